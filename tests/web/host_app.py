"""A sample host application that mounts Leasehold's console and API at ``/ops``.

It has what a real host has and the console must not disturb: its own routes
(``/``, ``/login``, ``/logout``), its own session-based login (``alice`` is an
admin, so an operator at /ops; ``bob`` a viewer; ``carol`` a host user with
no access to /ops), its own ``base.html`` and ``login.html`` templates (which
must not shadow the console's), its own CSP header, and a ``seconds`` template
filter of its own. It applies no Flask-WTF CSRFProtect of its own.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, redirect, render_template_string, request, session
from jinja2 import DictLoader

from store.base import JobStore
from webapp import Leasehold

HOST_CSP = "default-src 'self'; script-src 'none'"
HOST_HEADER = ("X-Host-App", "yes")
#: name -> (password, role at /ops or None)
ACCOUNTS = {"alice": ("alice-pw", "operator"), "bob": ("bob-pw", "viewer"), "carol": ("carol-pw", None)}

TEMPLATES = {
    "base.html": "<!doctype html><title>Host</title><h1>Host app</h1>{% block body %}{% endblock %}",
    "login.html": '{% extends "base.html" %}{% block body %}<form method="post">'
    '<input name="name"><input name="password" type="password"><button>Sign in</button></form>{% endblock %}',
    "home.html": '{% extends "base.html" %}{% block body %}'
    '<p id="who">{{ session.get("name", "anonymous") }}</p>'
    '<p id="filter">{{ 5|seconds }}</p>{% endblock %}',
}


def authorize() -> tuple[str, str] | None:
    """The host's hook: (role, name) for a logged-in user with a role, else None."""
    name = session.get("name")
    role = ACCOUNTS.get(name, ("", None))[1] if name else None
    return (role, name) if role else None


def create_host_app(store: JobStore, **leasehold: Any) -> Flask:
    """The host app, Leasehold on ``store``; ``leasehold``: its settings (keys without the prefix)."""
    app = Flask("host_app")
    app.config.update(SECRET_KEY="host-secret")
    app.jinja_loader = DictLoader(TEMPLATES)  # type: ignore[assignment]
    app.add_template_filter(lambda value: f"{value} seconds (host)", "seconds")

    @app.after_request
    def host_headers(response: Response) -> Response:
        response.headers.setdefault("Content-Security-Policy", HOST_CSP)
        response.headers[HOST_HEADER[0]] = HOST_HEADER[1]
        return response

    @app.get("/")
    def home() -> str:
        session["visits"] = session.get("visits", 0) + 1
        return render_template_string('{% include "home.html" %}')

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        if request.method == "GET":
            return render_template_string('{% include "login.html" %}')
        name = request.form.get("name", "")
        if ACCOUNTS.get(name, ("",))[0] != request.form.get("password") or not name:
            return "no", 401
        session["name"] = name
        target = request.args.get("next", "/")
        return redirect(target if target.startswith("/") and not target.startswith("//") else "/", 303)

    @app.post("/logout")
    def logout() -> Any:
        session.clear()
        return redirect("/", 303)

    Leasehold(
        app,
        url_prefix="/ops",
        authorize=authorize,
        login_url="/login",
        store=store,
        config={"STORE_URL": "sqlite://", "API_TOKENS": "host-op:operator:ci", **leasehold},
    )
    return app
