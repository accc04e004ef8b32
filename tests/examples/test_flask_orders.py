"""The example shop (examples/flask_orders/) run as its README says, on SQLite
and PostgreSQL: the shop's Flask-Migrate history and ``leasehold db upgrade``
side by side in one database, each upgraded and downgraded without touching
the other's tables or version table; an order and its invoice job saved in
one transaction (an order refused for want of stock leaves neither); the
invoice run by a real worker; the console at /ops behind the shop's login."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import flask_migrate
import pytest
from alembic import command
from flask import Flask
from sqlalchemy import create_engine, inspect, text

from leasehold.cli.schema import upgrade_store
from store.lifecycle import JobStatus
from store.sql.upgrade import alembic_config

REPO = Path(__file__).resolve().parents[2]
FLASK = str(Path(sys.executable).parent / "flask")
SHOP = "examples.flask_orders.app"


@pytest.fixture
def url(empty_url: str) -> str:
    """An empty database for the shop and Leasehold together."""
    return empty_url


def run(url: str, *args: str) -> str:
    """One deploy step (``flask --app … db …`` or ``leasehold …``) as a process; its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    env.update(
        SHOP_DATABASE_URL=url,
        LEASEHOLD_STORE_URL=url,
        LEASEHOLD_HANDLERS="examples.flask_orders.jobs",
        PYTHONPATH=str(REPO),
    )
    cmd = (
        [FLASK, "--app", SHOP, *args[1:]]
        if args[0] == "flask"
        else [sys.executable, "-m", "leasehold.cli", *args[1:]]
    )
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def tables(url: str) -> tuple[set[str], dict[str, list[str]]]:
    """The tables of the database, and the rows of both version tables."""
    engine = create_engine(url)
    try:
        names = set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            versions = {
                t: sorted(conn.execute(text(f"SELECT version_num FROM {t}")).scalars())
                for t in ("alembic_version", "leasehold_alembic_version")
                if t in names
            }
        return names, versions
    finally:
        engine.dispose()


def test_the_shop_and_leasehold_migrate_side_by_side(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deploy's two steps as processes, then each history downgraded
    and upgraded again in this process (Flask-Migrate's and Alembic's API)."""
    run(url, "flask", "db", "upgrade")  # the deploy script of docs/operating.md
    assert "created the schema" in run(url, "leasehold", "db", "upgrade")
    names, versions = tables(url)
    leasehold = {n for n in names if n.startswith("leasehold_")}
    assert "orders" in names and "leasehold_jobs" in leasehold
    assert versions["alembic_version"] == ["shop0001"]
    [ours] = versions["leasehold_alembic_version"]

    monkeypatch.setenv("SHOP_DATABASE_URL", url)
    from examples.flask_orders.app import create_app

    app = create_app({"TESTING": True})
    with app.app_context():
        flask_migrate.check()  # the shop's autogenerate proposes nothing for Leasehold's tables
        flask_migrate.downgrade(revision="base")
    names, versions = tables(url)
    assert "orders" not in names and {n for n in names if n.startswith("leasehold_")} == leasehold
    assert versions == {"alembic_version": [], "leasehold_alembic_version": [ours]}

    leasehold_logger = logging.getLogger("workers.scheduler")  # made before the shop's env.py runs
    with app.app_context():
        flask_migrate.upgrade()
    assert not leasehold_logger.disabled  # the shop's logging set-up leaves other loggers on
    command.downgrade(alembic_config(url), "base")  # Leasehold's history alone
    names, versions = tables(url)
    assert "orders" in names and {n for n in names if n.startswith("leasehold_")} == {
        "leasehold_alembic_version"
    }
    assert versions == {"alembic_version": ["shop0001"], "leasehold_alembic_version": []}

    assert "created the schema" in upgrade_store(url)
    assert "already at" in upgrade_store(url)
    assert tables(url) == (
        names | leasehold,
        {"alembic_version": ["shop0001"], "leasehold_alembic_version": [ours]},
    )
    close_app(app)


def close_app(app: Flask) -> None:
    """Close the shop's store and dispose of its Flask-SQLAlchemy engines (their
    pooled connections are closed, not left to the garbage collector)."""
    app.extensions["leasehold"].close()
    with app.app_context():
        for engine in app.extensions["sqlalchemy"].engines.values():
            engine.dispose()


@pytest.fixture
def shop(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Flask]:
    run(url, "flask", "db", "upgrade")
    run(url, "leasehold", "db", "upgrade")
    monkeypatch.setenv("SHOP_DATABASE_URL", url)
    from examples.flask_orders.app import create_app

    app = create_app({"TESTING": True, "STOCK": {"book": 3}})
    yield app
    close_app(app)


def test_an_order_and_its_invoice_commit_together_and_a_worker_sends_it(shop: Flask, url: str) -> None:
    from examples.flask_orders.app import Order, db

    store = shop.extensions["leasehold"]
    client = shop.test_client()
    assert client.post("/orders", data={"item": "book", "quantity": "1"}).status_code == 303  # log in first
    anonymous = client.get("/ops/")
    assert anonymous.status_code in (302, 303) and anonymous.location.startswith("/login")

    client.post("/login", data={"name": "bob", "password": "bob-pw"})
    assert client.get("/ops/").status_code in (302, 303)  # the shop's user, no role at /ops
    refused = client.post("/orders", data={"item": "book", "quantity": "5"})
    assert refused.status_code == 409
    with shop.app_context():
        assert db.session.query(Order).count() == 0
    assert store.list_jobs().items == [] and sum(store.counts().by_status.values()) == 0

    placed = client.post("/orders", data={"item": "book", "quantity": "2"})
    assert placed.status_code == 201
    order_id = placed.json["order_id"]
    [job] = store.list_jobs().items
    assert (job.name, job.queue, job.payload) == ("send-invoice", "invoices", {"order_id": order_id})

    out = run(url, "leasehold", "worker", "--burst", "--queues", "invoices", "--concurrency", "1")
    done = store.get(job.id)
    assert done.status is JobStatus.Completed, out
    assert done.result == {"invoice": f"INV-{order_id:06d}"}

    client.post("/login", data={"name": "ada", "password": "ada-pw"})
    page = client.get("/ops/")
    assert page.status_code == 200 and b"send-invoice" in client.get(f"/ops/jobs/{job.id}").data


def test_on_postgresql_leasehold_runs_on_the_shops_engine(shop: Flask, url: str) -> None:
    from examples.flask_orders.app import db

    store = shop.extensions["leasehold"]
    with shop.app_context():
        engine = db.engine
    if url.startswith("postgresql"):
        assert store.write_engine is engine  # one engine, one pool: the shop's
        assert store.read_engine.pool is engine.pool and store.single_engine.pool is engine.pool
        assert store.get(store.enqueue("send-invoice", {"order_id": 1}).id).status is JobStatus.Queued
        store.close()  # the shop's engine stays open
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM leasehold_jobs")).scalar_one() == 1
    else:  # SQLite: the store keeps its own connections (see webapp.extension.host_engine)
        assert store.write_engine is not engine
