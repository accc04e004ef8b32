"""Commands around the queue: db upgrade, hash-password, web, demo."""

from __future__ import annotations

import os
import sys

import click

from workers.cli.base import OneLineCommand, OneLineGroup, friendly_errors, runtime

#: gunicorn's settings (the project's config, inside the package) and the app it serves.
GUNICORN_CONFIG = "python:webapp.gunicorn_conf"
WSGI_APP = "webapp.wsgi:app"

# ---------------------------------------------------------------------------- db
db_group = OneLineGroup("db", help="Store schema.")


@db_group.command("upgrade")
@friendly_errors
def db_upgrade_command() -> None:
    """Create or upgrade the SQL schema, or upgrade a Redis store's data."""
    url = runtime().settings().store_url
    if url.split(":", 1)[0].lower().startswith(("redis", "rediss", "unix")):
        from store import open_store
        from store.redis.upgrade import upgrade

        with open_store(url) as store:
            done = upgrade(store)  # type: ignore[arg-type]
        click.echo(f"Redis store is up to date ({done['indexed']} jobs indexed)")
        return
    if not url.split(":", 1)[0].lower().startswith(("sqlite", "postgresql")):
        click.echo("this store keeps no schema; nothing to upgrade")
        return
    from sqlalchemy.exc import SQLAlchemyError

    from store.sql import migrate

    try:
        migrate(url)
    except SQLAlchemyError as exc:
        raise click.ClickException(
            f"schema upgrade failed: {' '.join(str(exc.orig or exc).split())}"
        ) from None
    click.echo("schema is up to date")


# ----------------------------------------------------------------- hash-password
@click.command("hash-password", cls=OneLineCommand)
@click.option("--password", default=None, help="The password (prompted for when omitted).")
def hash_password_command(password: str | None) -> None:
    """Print a password hash for LEASEHOLD_USERS (name:hash:role)."""
    from werkzeug.security import generate_password_hash

    if password is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
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
    from store.errors import ValidationError
    from webapp import create_app
    from webapp.config import ConfigError

    try:
        app = create_app()
    except (ConfigError, ValidationError) as exc:
        raise click.ClickException(" ".join(str(exc).split())) from None
    app.extensions["leasehold"].close()
    argv = [sys.executable, "-m", "gunicorn", "-c", GUNICORN_CONFIG, *gunicorn_args, WSGI_APP]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)


# ------------------------------------------------------------------------ demo
@click.command("demo", cls=OneLineCommand)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Index only the first N files.")
@click.option("--kill-after", type=click.FloatRange(min=0), default=30.0, show_default=True)
@friendly_errors
def demo_command(port: int, limit: int | None, kill_after: float) -> None:
    """Run the demo on this store, from a checkout (``make demo`` does the set-up first)."""
    from workers import demo

    url = runtime().settings().store_url
    args = ["--store", url, "--port", str(port), "--kill-after", str(kill_after)]
    raise SystemExit(demo.main([*args, *(["--limit", str(limit)] if limit else [])]))
