"""Reads of a sharded Redis store that merge its shards' answers
(docs/architecture.md, Shards): sums of counters and history buckets, and
pages merged in their order, exact at any depth. A listing's cursor is a
keyset position (``store/cursor.py``), the same on every shard, so each
shard reads its own next entries after it and the merge takes the first;
the audit log's cursor carries each shard's own position."""

from __future__ import annotations

import base64
import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any, TypeVar

import orjson

from store.contract_flow import Batch
from store.errors import ValidationError
from store.models import AuditPage
from store.redis import codec
from store.redis.audit import audit_cursor_after

T = TypeVar("T")


def summed_rows(answers: Iterable[Iterable[tuple[str, int | str]]]) -> list[tuple[str, int]]:
    """The shards' counters (``_counter_rows`` answers) summed by key: a
    queue's counters live on its shard alone, the event totals on every shard."""
    total: Counter[str] = Counter()
    for rows in answers:
        for key, value in rows:
            total[key] += int(value)
    return list(total.items())


def summed_buckets(answers: Iterable[dict[str, dict[Any, int]]]) -> dict[str, dict[Any, int]]:
    """``{kind: {bucket: n}}`` answers of the shards (``history``,
    ``handler_minutes``) summed bucket by bucket."""
    out: dict[str, dict[Any, int]] = {}
    for answer in answers:
        for kind, buckets in answer.items():
            mine = out.setdefault(kind, {})
            for bucket, n in buckets.items():
                mine[bucket] = mine.get(bucket, 0) + n
    return out


def first_merged(runs: Sequence[Sequence[T]], count: int, key: Callable[[T], Any], reverse: bool) -> list[T]:
    """The first ``count`` items of ``runs`` (each sorted by ``key``), merged."""
    return list(islice(heapq.merge(*runs, key=key, reverse=reverse), count))


def merged_batches(
    pages: Sequence[tuple[list[Batch], str | None]], limit: int
) -> tuple[list[Batch], str | None]:
    """The shards' batch pages (newest first by id, a UUIDv7) as one page
    of ``limit``; its cursor the last id when any shard has more."""
    items = first_merged([p[0] for p in pages], limit + 1, lambda b: b.id, True)
    more = len(items) > limit or any(cursor is not None for _, cursor in pages)
    page = items[:limit]
    return page, (page[-1].id if more and page else None)


# ------------------------------------------------------------------ audit
def encode_positions(positions: Sequence[str | None]) -> str:
    """The audit cursor of a sharded store: each shard's own cursor ("" for
    its first page, None when it has no more), as opaque text."""
    return base64.urlsafe_b64encode(orjson.dumps(list(positions))).decode().rstrip("=")


def decode_positions(cursor: str | None, shards: int) -> list[str | None]:
    """Inverse of encode_positions (a first page: every shard from its
    start). Raises ValidationError("cursor") when malformed."""
    if not cursor:
        return [""] * shards
    try:
        found = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        found = None
    if (
        not isinstance(found, list)
        or len(found) != shards
        or not all(p is None or isinstance(p, str) for p in found)
    ):
        raise ValidationError("cursor", "is not a cursor of this audit log")
    return found


def merged_audit(shards: Sequence[Any], limit: int, cursor: str | None) -> AuditPage:
    """The audit log of every shard, newest first: each shard's next
    ``limit`` + 1 rows after its position, merged by time; the cursor
    moves each shard past the rows of it taken."""
    positions = decode_positions(cursor, len(shards))
    runs = [
        [(score, k, text) for text, score in shard._audit_rows(p or None, limit + 1)] if p is not None else []
        for k, (shard, p) in enumerate(zip(shards, positions, strict=True))
    ]
    merged = first_merged(runs, limit + 1, lambda r: r[0], True)
    taken = merged[:limit]
    if len(merged) <= limit:
        return AuditPage([codec.event_from_json(text) for _, _, text in taken], None)
    after: list[str | None] = []
    for k, run in enumerate(runs):
        mine = [(text, score) for score, j, text in taken if j == k]
        if not mine:
            after.append(positions[k] if run else None)
        elif len(mine) == len(run):  # it had no more than these (it read limit + 1)
            after.append(None)
        else:
            after.append(audit_cursor_after(mine, positions[k] or None))
    return AuditPage([codec.event_from_json(text) for _, _, text in taken], encode_positions(after))
