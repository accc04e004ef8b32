"""Ids of jobs, batches and flows: UUIDv7 text (RFC 9562, section 5.7),
"01a21b31-c91b-7440-b07a-3bf806b6a560".

A UUIDv7 starts with its Unix time in milliseconds, and uuid-utils keeps
the ids of one process increasing within a millisecond (a counter, RFC
9562 section 6.2), so ids made in order sort in order: the tie-break of
jobs with the same priority and due time (their rank, docs/architecture.md)
and of listings by time. uuid-utils (Rust) makes one in 0.2 us, against
2.5 us for the pure-Python uuid6 package used before (a job enqueued
one at a time costs about 90 us in the client).
"""

from __future__ import annotations

import re

from uuid_utils import uuid7

#: A whole id as ``new_id`` writes it (any UUID version, lowercase).
ID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def new_id() -> str:
    """A new UUIDv7 as text (36 characters, lowercase, hyphenated),
    greater than every id this process made before."""
    return str(uuid7())


def new_id_on_shard(shard: int) -> str:
    """A new id (as ``new_id``) whose last byte is ``shard`` (0 to 255), so a
    sharded store routes it with ``shard_of_id`` alone. The last byte is
    random in a UUIDv7 of uuid-utils (its counter sits in higher bits), so
    the id stays valid UUIDv7 text and ids made in order still sort in order."""
    if not 0 <= shard <= 0xFF:
        raise ValueError(f"shard {shard} is not from 0 to 255")
    return f"{new_id()[:-2]}{shard:02x}"


def shard_of_id(job_id: str, shards: int) -> int:
    """The shard (0 to ``shards`` - 1) of an id made by ``new_id_on_shard``
    for a store of ``shards`` shards: its last byte, modulo ``shards``."""
    return int(job_id[-2:], 16) % shards


def is_whole_id(text: str) -> bool:
    """Whether ``text`` (lowercase) is a whole id: every job id is one, so
    the only id that contains it is itself."""
    return ID_TEXT.fullmatch(text) is not None
