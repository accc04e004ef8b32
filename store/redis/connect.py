"""Opening the Redis client of a store URL, and mapping outages to StoreUnavailable.

URLs: ``redis://host:port/db``, ``rediss://…``, ``unix:///path.sock`` (one
server) and ``redis+cluster://host:port`` / ``rediss+cluster://…`` (Redis
Cluster, any node as the seed). The query parameter ``prefix`` names the
deployment (default ``leasehold``); ``shards`` (an integer from 1 to
MAX_SHARDS, default 1) is the count of shards (above 1: the sharded store,
store/redis/shards/; docs/architecture.md, Shards); other query
parameters go to redis-py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis import Redis
from redis import exceptions as rx
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from store.errors import StoreUnavailable, ValidationError
from store.redis.keys import DEFAULT_PREFIX

#: Most shards of one deployment: a job id carries its shard in its last
#: byte (store/ids.py), so 256 at most.
MAX_SHARDS = 256

#: Errors that mean "Redis did not answer": the operation may or may not have
#: been applied (every write script is guarded, so retrying is safe).
UNAVAILABLE: tuple[type[Exception], ...] = (
    rx.ConnectionError,  # includes BusyLoadingError
    rx.TimeoutError,
    rx.ClusterDownError,
    rx.TryAgainError,
    rx.MasterDownError,
    rx.RedisClusterException,
)


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How the store talks to Redis.

    socket_timeout_s: most seconds to wait for a reply (5).
    connect_timeout_s: most seconds to wait for a connection (5).
    retries: retries of a command after a connection error or timeout, with
    exponential backoff from backoff_base_s up to backoff_cap_s (3, 0.05 s, 1 s);
    the worst case before StoreUnavailable is about
    ``(retries + 1) * (connect_timeout_s + socket_timeout_s) + retries * backoff_cap_s``.

    A retried write may be a replay of one Redis already applied (the reply
    was lost). That is safe: enqueue recognises its own chunk and writes
    nothing twice; every other write is guarded, so a replayed ack or nack is
    refused (LeaseLost, with a refusal event) and a replayed claim leases
    nothing new (the first attempt's leases expire and are recovered).
    """

    socket_timeout_s: float = 5.0
    connect_timeout_s: float = 5.0
    retries: int = 3
    backoff_base_s: float = 0.05
    backoff_cap_s: float = 1.0


@contextmanager
def unavailable() -> Iterator[None]:
    """Turn redis-py's connection errors and timeouts into StoreUnavailable."""
    try:
        yield
    except UNAVAILABLE as exc:
        raise StoreUnavailable(f"Redis store unavailable: {exc}") from exc


def split_url(url: str) -> tuple[str, str | None, bool]:
    """``(url for redis-py, prefix from the URL or None, is_cluster)``."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [v for k, v in query if k == "prefix"]
    rest = urlencode([(k, v) for k, v in query if k not in ("prefix", "shards")])
    scheme = parts.scheme.lower()
    cluster = scheme.endswith("+cluster")
    if cluster:
        scheme = scheme.removesuffix("+cluster")
    clean = urlunsplit((scheme, parts.netloc, parts.path, rest, parts.fragment))
    return clean, (prefixes[-1] if prefixes else None), cluster


def url_shards(url: str) -> int:
    """The ``shards`` query parameter of a Redis store URL (the last one
    given), 1 when absent. Raises ValidationError (field ``shards``, one line)
    unless it is an integer from 1 to MAX_SHARDS."""
    given = [v for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True) if k == "shards"]
    if not given:
        return 1
    text = given[-1].strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_SHARDS:
        raise ValidationError("shards", f"shards={given[-1]!r} is not an integer from 1 to {MAX_SHARDS}")
    return int(text)


def with_shards(url: str, shards: int) -> str:
    """``url`` with its ``shards`` parameter set to ``shards`` (1: none).
    Raises ValidationError (``shards``) unless it is from 1 to MAX_SHARDS."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "shards"]
    if shards != 1:
        query.append(("shards", str(shards)))
    out = urlunsplit(parts._replace(query=urlencode(query)))
    url_shards(out)
    return out


def open_client(url: str, prefix: str | None, options: ClientOptions) -> tuple[Redis | RedisCluster, str]:
    """The client for ``url`` and the deployment prefix (argument, else URL,
    else DEFAULT_PREFIX). A cluster client connects at once (it reads the slot
    map); a single-server client connects on first use. Raises StoreUnavailable,
    and ValidationError (``shards``) for a bad shard count."""
    url_shards(url)
    clean, url_prefix, cluster = split_url(url)
    kwargs: dict[str, Any] = {
        "socket_timeout": options.socket_timeout_s,
        "socket_connect_timeout": options.connect_timeout_s,
        "retry": Retry(
            ExponentialBackoff(cap=options.backoff_cap_s, base=options.backoff_base_s), options.retries
        ),
        "decode_responses": True,
        # RESP2: redis-py 8 speaks RESP3 by default and turns each zset score
        # of a RESP3 reply back into RESP2's shape one by one (a format() a
        # score), the bulk of a listing's or a search's client time.
        "protocol": 2,
    }
    with unavailable():
        client = RedisCluster.from_url(clean, **kwargs) if cluster else Redis.from_url(clean, **kwargs)
    if cluster:
        route_fcall_by_first_key(client)
    return client, prefix or url_prefix or DEFAULT_PREFIX


def route_fcall_by_first_key(client: RedisCluster) -> None:
    """Route FCALL by its first key on ``client``, as redis-py routes EVALSHA.

    redis-py finds the keys of a command with movable keys (FCALL) by asking
    a server (COMMAND GETKEYS): one more round trip per call. Every call of
    the store declares the deployment's prefix as its first key, so that key's
    slot is the call's."""
    find = client.determine_slot

    def determine_slot(*args: Any) -> int | None:
        if str(args[0]).upper() in ("FCALL", "FCALL_RO") and len(args) > 3 and int(args[2]) > 0:
            return client.keyslot(args[3])
        return find(*args)

    client.determine_slot = determine_slot  # type: ignore[method-assign]
