"""Commands around the queue: db upgrade, hash-password, web, demo."""

from __future__ import annotations

import os
import sys

import click

from leasehold.cli.base import OneLineCommand, OneLineGroup, friendly_errors, runtime

#: gunicorn's settings (the project's config, inside the package) and the app it serves.
GUNICORN_CONFIG = "python:webapp.gunicorn_conf"
WSGI_APP = "leasehold.wsgi:app"

# ---------------------------------------------------------------------------- db
db_group = OneLineGroup("db", help="Store schema.")


@db_group.command("upgrade")
@click.option(
    "--shards",
    type=click.IntRange(2, 256),
    default=None,
    help="Redis: split the namespace into N shards, moving its jobs onto them (stop the workers first).",
)
@friendly_errors
def db_upgrade_command(shards: int | None) -> None:
    """Create or upgrade the store's schema; says what it did (SQL: the Alembic
    revision; Redis: the key layout's version, and a move onto shards)."""
    from leasehold.cli.schema import upgrade_store

    click.echo(upgrade_store(runtime().settings().store_url, shards))


# ----------------------------------------------------------------- hash-password
@click.command("hash-password", cls=OneLineCommand)
@click.option("--password", default=None, help="The password (prompted for when omitted).")
def hash_password_command(password: str | None) -> None:
    """Print a password hash for LEASEHOLD_USERS (name:hash:role)."""
    from werkzeug.security import generate_password_hash

    if password is None:
        # The prompts go to stderr, so $(leasehold hash-password) captures the hash alone.
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    if not password:
        raise click.BadParameter("must not be empty", param_hint="--password")
    click.echo(generate_password_hash(password))


# --------------------------------------------------------------------------- web
@click.command(
    "web",
    cls=OneLineCommand,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("gunicorn_args", nargs=-1, type=click.UNPROCESSED)
def web_command(gunicorn_args: tuple[str, ...]) -> None:
    """Serve the console and the JSON API with gunicorn (needs LEASEHOLD_SECRET_KEY).

    Uses the project's gunicorn settings (LEASEHOLD_WEB_BIND, LEASEHOLD_WEB_WORKERS, ...;
    default 127.0.0.1:8000); extra arguments go to gunicorn, e.g. ``leasehold web --bind 0.0.0.0:8000``.
    The configuration is checked here first, so a bad value is one line, not a boot loop."""
    from store.errors import StoreUnavailable, ValidationError
    from store.schema_version import SchemaMismatch, check_schema
    from webapp import create_app
    from webapp.config import ConfigError

    try:
        app = create_app()
    except (ConfigError, ValidationError) as exc:
        raise click.ClickException(" ".join(str(exc).split())) from None
    try:
        check_schema(app.extensions["leasehold"], app.extensions["leasehold.settings"].store_url)
    except SchemaMismatch as exc:
        raise click.ClickException(str(exc)) from None
    except StoreUnavailable:
        pass  # served anyway: the app answers 503 until the store is back
    finally:
        app.extensions["leasehold"].close()
    argv = [sys.executable, "-m", "gunicorn", "-c", GUNICORN_CONFIG, *gunicorn_args, WSGI_APP]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)


# ------------------------------------------------------------------------ demo
@click.command("demo", cls=OneLineCommand)
@click.option(
    "--store",
    "store_url",
    default=None,
    help="Store URL [a SQLite file in a temporary folder, removed at the end].",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Index only the first N files.")
@click.option("--kill-after", type=click.FloatRange(min=0), default=30.0, show_default=True)
@friendly_errors
def demo_command(store_url: str | None, port: int, limit: int | None, kill_after: float) -> None:
    """Run the demo: the console on 127.0.0.1:PORT, two worker processes and a
    workload (the standard library indexed, a worker killed and its jobs
    recovered), on a store of its own. Ctrl-C stops everything."""
    import tempfile

    from workers import demo

    args = ["--port", str(port), "--kill-after", str(kill_after)]
    args += ["--limit", str(limit)] if limit else []
    if store_url is not None:
        raise SystemExit(demo.main(["--store", store_url, *args]))
    with tempfile.TemporaryDirectory(prefix="leasehold-demo-") as folder:
        code = demo.main(["--store", f"sqlite:///{folder}/demo.db", *args])
    raise SystemExit(code)
