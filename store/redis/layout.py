"""The Redis store's "schema": the version of its key layout.

Redis has no DDL to run, so an empty deployment is ready as it stands. What
can be wrong is data written by a release with another key layout. The
version lives in ``{P}:layout`` (a string): ``leasehold db upgrade`` writes it,
and so does the first check of a deployment that has none (an empty or
pre-versioning deployment uses the current layout). A deployment whose
version differs from LAYOUT_VERSION is refused until ``db upgrade`` moves it.
"""

from __future__ import annotations

from typing import Any

#: The key layout this release reads and writes (bump it when keys change shape).
LAYOUT_VERSION = "1"


def layout_key(store: Any) -> str:
    """``{P}:layout`` of the store's deployment."""
    return store.keys._key("layout")


def current_layout(store: Any, stamp: bool = True) -> tuple[str | None, bool]:
    """``(version, written)``: the deployment's layout version; with ``stamp``
    an absent one is written as LAYOUT_VERSION first (``written`` True)."""
    client = store._client
    key = layout_key(store)
    if stamp and client.set(key, LAYOUT_VERSION, nx=True):
        return LAYOUT_VERSION, True
    found = client.get(key)
    return (found.decode() if isinstance(found, bytes) else found), False
