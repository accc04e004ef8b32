"""The shop: an ``Order`` model, a route that saves an order and enqueues its
invoice in the same transaction, the shop's own login, and Leasehold's
console and API at ``/ops`` for the shop's operators.

Run it (SQLite)::

    export SHOP_DATABASE_URL=sqlite:///$PWD/shop.db
    export LEASEHOLD_STORE_URL=$SHOP_DATABASE_URL LEASEHOLD_HANDLERS=examples.flask_orders.jobs
    flask --app examples.flask_orders.app db upgrade   # the shop's tables (Flask-Migrate)
    leasehold db upgrade                               # Leasehold's, in the same database
    flask --app examples.flask_orders.app run & leasehold worker
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask, abort, redirect, request, session, url_for
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from examples.flask_orders.jobs import send_invoice
from leasehold import Leasehold, host_tables_only

LOGIN_FORM = (
    '<form method="post"><input name="name"><input name="password" type="password">'
    "<button>Sign in</button></form>"
)


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
migrate = Migrate(
    directory=os.path.join(os.path.dirname(__file__), "migrations"), include_name=host_tables_only
)


class Order(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str]
    quantity: Mapped[int]


class OutOfStock(Exception):
    """Fewer items left than ordered."""


def reserve(item: str, quantity: int, stock: dict[str, int]) -> None:
    """Take ``quantity`` of ``item`` from the stock; OutOfStock when short."""
    if stock.get(item, 0) < quantity:
        raise OutOfStock(item)
    stock[item] -= quantity


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    url = os.environ.get("SHOP_DATABASE_URL", "sqlite:///shop.db")
    app.config.update(
        SECRET_KEY=os.environ.get("SHOP_SECRET_KEY", "change-me"),
        SQLALCHEMY_DATABASE_URI=url,
        LEASEHOLD_STORE_URL=url,  # Leasehold's tables live beside the shop's
        # name -> (password hash, role at /ops or None)
        USERS={
            "ada": (generate_password_hash("ada-pw"), "operator"),
            "bob": (generate_password_hash("bob-pw"), None),
        },
        STOCK={"book": 3},
    )
    app.config.update(config or {})
    db.init_app(app)
    migrate.init_app(app, db)

    @app.get("/")
    def home() -> Any:
        return {"user": session.get("user")}

    @app.post("/orders")
    def place_order() -> Any:
        if "user" not in session:
            return redirect(url_for("login", next=request.path), 303)
        order = Order(item=request.form["item"], quantity=int(request.form["quantity"]))
        db.session.add(order)
        db.session.flush()  # the order's id
        send_invoice.enqueue({"order_id": order.id}, session=db.session)
        try:
            reserve(order.item, order.quantity, app.config["STOCK"])
        except OutOfStock:
            db.session.rollback()  # no order, and no invoice job either
            return {"error": f"out of stock: {order.item}"}, 409
        db.session.commit()  # the order and its invoice job, together
        return {"order_id": order.id}, 201

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        if request.method == "GET":
            return LOGIN_FORM
        name = request.form.get("name", "")
        found = app.config["USERS"].get(name)
        if found is None or not check_password_hash(found[0], request.form.get("password", "")):
            abort(401)
        session["user"] = name
        target = request.args.get("next", "/")
        return redirect(target if target.startswith("/") and not target.startswith("//") else "/", 303)

    def who() -> tuple[str, str] | None:
        """The shop's login decides who sees /ops: operators only."""
        name = session.get("user")
        role = app.config["USERS"].get(name, (None, None))[1] if name else None
        return (role, name) if role else None

    Leasehold(app, db=db, url_prefix="/ops", authorize=who, login_url="/login")
    return app
