"""Job ids (store.ids): UUIDv7 text that sorts in the order it was made,
within a millisecond too, from one thread or several (the rank's
tie-break between jobs of one priority and due time relies on it)."""

from __future__ import annotations

import threading
import uuid

from store.ids import new_id


def test_ids_are_uuid7_text_and_increase_within_a_millisecond() -> None:
    ids = [new_id() for _ in range(20_000)]  # thousands a millisecond
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    parsed = uuid.UUID(ids[0])
    assert (parsed.version, str(parsed), len(ids[0])) == (7, ids[0], 36)
    assert len({i[:13] for i in ids}) < len(ids) // 10  # many share their millisecond


def test_ids_made_by_threads_are_distinct_and_each_thread_sees_them_increase() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(new_id() for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(out == sorted(out) for out in made)
    assert len({i for out in made for i in out}) == 20_000
