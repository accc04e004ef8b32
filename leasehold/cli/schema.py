"""``leasehold db upgrade``: bring a store to this release's schema and say
what was done (created at, upgraded from … to, or already at)."""

from __future__ import annotations

import click

from store.schema_version import SchemaUpgradeFailed, upgrade_schema


def upgrade_store(url: str, shards: int | None = None) -> str:
    """Upgrade the store at ``url`` through the store's own door
    (``store.schema_version.upgrade_schema``; ``shards``: split a Redis
    store into that many shards); returns the one line to print.
    Raises ClickException when the upgrade fails or cannot be done."""
    try:
        return upgrade_schema(url, shards)
    except SchemaUpgradeFailed as exc:
        raise click.ClickException(str(exc)) from None
