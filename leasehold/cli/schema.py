"""``leasehold db upgrade``: bring a store to this release's schema and say
what was done (created at, upgraded from … to, or already at)."""

from __future__ import annotations

import click

from store.schema_version import public_url


def upgrade_store(url: str) -> str:
    """Upgrade the store at ``url``; returns the one line to print. Raises
    ClickException when the upgrade fails or cannot be done."""
    if url.split(":", 1)[0].lower().startswith(("sqlite", "postgresql")):
        return _upgrade_sql(url)
    return _upgrade_redis(url)


def _upgrade_sql(url: str) -> str:
    from sqlalchemy.exc import SQLAlchemyError

    from store.sql import migrate
    from store.sql.engine import make_engines
    from store.sql.revision import current_revision, head_revision

    try:
        engines = make_engines(url, pool_size=1)
        try:
            before = current_revision(engines.read)
        finally:
            for engine in {engines.write, engines.read, engines.single}:
                engine.dispose()
        migrate(url)
    except SQLAlchemyError as exc:
        raise click.ClickException(
            f"schema upgrade failed: {' '.join(str(getattr(exc, 'orig', None) or exc).split())}"
        ) from None
    head = head_revision()
    if before is None:
        return f"created the schema at revision {head}"
    if before != head:
        return f"upgraded the schema from revision {before} to {head}"
    return f"the schema is already at revision {head}"


def _upgrade_redis(url: str) -> str:
    from store import open_store
    from store.redis.layout import LAYOUT_VERSION, UPGRADABLE, current_layout, upgrade_layout

    with open_store(url) as store:
        found, written = current_layout(store)
        if found in UPGRADABLE:
            done = upgrade_layout(store)
            return (
                f"upgraded the key layout from version {found} to {LAYOUT_VERSION} "
                f"({done['indexed']} jobs indexed, {done['removed']} old indexes removed, "
                f"{done['records_moved']} records moved)"
            )
    if written:
        return f"created the key layout at version {LAYOUT_VERSION}"
    if found == LAYOUT_VERSION:
        return f"the key layout is already at version {LAYOUT_VERSION}"
    raise click.ClickException(
        f"{public_url(url)} has key layout version {found}; this release reads version "
        f"{LAYOUT_VERSION} and has no upgrade from {found}"
    )
