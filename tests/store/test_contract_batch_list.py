"""Listing batches, newest first, a keyset page at a time (every store)."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.errors import ValidationError
from store.models import JobSpec


def test_batches_are_listed_newest_first_page_by_page(store: JobStore) -> None:
    assert store.list_batches() == ([], None)
    made = [store.create_batch([JobSpec("t", {"b": b, "n": n}) for n in range(b + 1)]) for b in range(5)]
    chain = store.create_batch([JobSpec("t", {"c": n}) for n in range(2)], kind="chain")
    newest_first = [chain.id, *(b.id for b in reversed(made))]

    first, cursor = store.list_batches(limit=4)
    assert [b.id for b in first] == newest_first[:4]
    assert first[0].kind == "chain" and first[1].size == 5 and first[1].counts == {"Queued": 5}
    second, end = store.list_batches(limit=4, cursor=cursor)
    assert [b.id for b in second] == newest_first[4:] and end is None
    whole, none = store.list_batches(limit=6)
    assert [b.id for b in whole] == newest_first and none is None


def test_a_bad_page_is_refused_naming_the_field(store: JobStore) -> None:
    with pytest.raises(ValidationError, match="limit"):
        store.list_batches(limit=0)
    with pytest.raises(ValidationError, match="cursor"):
        store.list_batches(cursor="not-an-id")
