"""``leasehold db upgrade``: bring a store to this release's schema and say
what was done (created at, upgraded from … to, or already at)."""

from __future__ import annotations

import time

import click

from store.schema_version import SchemaUpgradeFailed, upgrade_schema

#: Seconds between two progress lines of a move onto shards (on stderr).
PROGRESS_EVERY_S = 2.0


def upgrade_store(url: str, shards: int | None = None) -> str:
    """Upgrade the store at ``url`` through the store's own door
    (``store.schema_version.upgrade_schema``; ``shards``: split a Redis
    store into that many shards); returns the one line to print.
    Raises ClickException when the upgrade fails or cannot be done."""
    last = [time.monotonic()]

    def progress(line: str) -> None:  # a long move says how far it is, every 2 s at most
        if time.monotonic() - last[0] >= PROGRESS_EVERY_S:
            last[0] = time.monotonic()
            click.echo(line, err=True)

    try:
        return upgrade_schema(url, shards, progress)
    except SchemaUpgradeFailed as exc:
        raise click.ClickException(str(exc)) from None
