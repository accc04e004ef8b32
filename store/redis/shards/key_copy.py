"""Copying Redis keys to other names of one client, whole or member by
member, in bounded calls (the moves of ``reshard.py``; docs/architecture.md,
Shards). Every write is idempotent: a whole key is written afresh, a member
set again to its value, so a copy run again after a stop gives the same keys.
The client decodes replies (the store's own), which every key of the store
allows: its values are text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

#: Members of one key read or written a call.
CHUNK = 1000
#: The command giving a key's size, by its type.
SIZE = {"hash": "HLEN", "list": "LLEN", "set": "SCARD", "zset": "ZCARD", "string": "STRLEN"}
#: A small key's whole content read on a pipeline, by its type.
READ: dict[str, Callable[[Any, str], Any]] = {
    "string": lambda p, k: p.get(k),
    "hash": lambda p, k: p.hgetall(k),
    "list": lambda p, k: p.lrange(k, 0, -1),
    "set": lambda p, k: p.smembers(k),
    "zset": lambda p, k: p.zrange(k, 0, -1, withscores=True),
}
#: That content written on a pipeline, by its type.
WRITE: dict[str, Callable[[Any, str, Any], Any]] = {
    "string": lambda p, k, v: p.set(k, v),
    "hash": lambda p, k, v: p.hset(k, mapping=v),
    "list": lambda p, k, v: p.rpush(k, *v),
    "set": lambda p, k, v: p.sadd(k, *v),
    "zset": lambda p, k, v: p.zadd(k, dict(v)),
}


def chunks(items: Iterable[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    part: list[Any] = []
    for item in items:
        part.append(item)
        if len(part) >= size:
            yield part
            part = []
    if part:
        yield part


def copy_whole(client: Any, pairs: Sequence[tuple[str, str]]) -> None:
    """Copy each ``(key, to)`` afresh: its type, members and expiry (ms).
    Keys of up to CHUNK members take four pipelines for all of them; bigger
    ones are read and written CHUNK members a call (``copy_big``)."""
    if not pairs:
        return
    pipe = client.pipeline(transaction=False)
    for key, _ in pairs:
        pipe.type(key)
        pipe.pttl(key)
    got = pipe.execute()
    types, ttls = got[0::2], got[1::2]
    pipe = client.pipeline(transaction=False)
    for (key, _), kind in zip(pairs, types, strict=True):
        pipe.execute_command(SIZE.get(kind, "EXISTS"), key)
    sizes = pipe.execute()
    small = [i for i, size in enumerate(sizes) if types[i] == "string" or int(size) <= CHUNK]
    pipe = client.pipeline(transaction=False)
    for i in small:
        READ.get(types[i], lambda p, k: p.exists(k))(pipe, pairs[i][0])
    values = dict(zip(small, pipe.execute(), strict=True))
    pipe = client.pipeline(transaction=False)
    for i in small:
        to = pairs[i][1]
        pipe.delete(to)
        if types[i] in WRITE and values[i]:
            WRITE[types[i]](pipe, to, values[i])
        if ttls[i] > 0:
            pipe.pexpire(to, ttls[i])
    pipe.execute()
    for i in sorted(set(range(len(pairs))) - set(small)):
        copy_big(client, *pairs[i], types[i], ttls[i])


def copy_big(client: Any, key: str, to: str, kind: str, ttl_ms: int) -> None:
    """Copy a key of ``kind`` with more than CHUNK members, CHUNK a call."""
    client.delete(to)
    if kind == "hash":
        for part in chunks(client.hscan_iter(key, count=CHUNK)):
            client.hset(to, mapping=dict(part))
    elif kind == "list":
        for start in range(0, client.llen(key), CHUNK):
            part = client.lrange(key, start, start + CHUNK - 1)
            if part:
                client.rpush(to, *part)
    elif kind == "set":
        for part in chunks(client.sscan_iter(key, count=CHUNK)):
            client.sadd(to, *part)
    elif kind == "zset":
        for part in chunks(client.zscan_iter(key, count=CHUNK)):
            client.zadd(to, dict(part))
    if ttl_ms > 0:
        client.pexpire(to, ttl_ms)


def split_hash(
    client: Any,
    key: str,
    to: Callable[[str, str], str],
    before: Callable[[list[tuple[str, str]]], None] = lambda pairs: None,
) -> None:
    """Each field of hash ``key`` set in hash ``to(field, value)``;
    ``before(pairs)`` is called on each chunk first (to look up, in one
    call, what ``to`` needs)."""
    for part in chunks(client.hscan_iter(key, count=CHUNK)):
        before(part)
        by: dict[str, dict[str, str]] = {}
        for field, value in part:
            by.setdefault(to(field, value), {})[field] = value
        pipe = client.pipeline(transaction=False)
        for target, mapping in by.items():
            pipe.hset(target, mapping=mapping)
        pipe.execute()


def split_set(client: Any, key: str, to: Callable[[str], str]) -> None:
    """Each member of set ``key`` added to set ``to(member)``."""
    for part in chunks(client.sscan_iter(key, count=CHUNK)):
        by: dict[str, list[str]] = {}
        for member in part:
            by.setdefault(to(member), []).append(member)
        pipe = client.pipeline(transaction=False)
        for target, members in by.items():
            pipe.sadd(target, *members)
        pipe.execute()


def split_zset(
    client: Any,
    key: str,
    to: Callable[[str], Iterable[str]],
    before: Callable[[list[str]], None] = lambda members: None,
) -> None:
    """Each member of zset ``key`` added, with its score, to each zset of
    ``to(member)``; ``before(members)`` is called on each chunk first (to
    look up, in one call, what ``to`` needs)."""
    for part in chunks(client.zscan_iter(key, count=CHUNK)):
        before([member for member, _ in part])
        by: dict[str, dict[str, float]] = {}
        for member, score in part:
            for target in to(member):
                by.setdefault(target, {})[member] = score
        pipe = client.pipeline(transaction=False)
        for target, mapping in by.items():
            pipe.zadd(target, mapping)
        pipe.execute()
