"""Redis stores as earlier key layouts left them, for the upgrade tests
(tests/store/test_redis_upgrade.py, test_redis_upgrade_layout2.py), and
``leasehold db upgrade`` run through the command."""

from __future__ import annotations

from store.lifecycle import JobStatus
from store.redis.keys import LEX_LISTING_BY
from store.redis.listing import stamp
from store.redis.store import RedisStore
from tests.store.helpers import as_layout_5_hash, redis_status_ids
from tests.workers.test_cli import make_cli


def as_layout_3(store: RedisStore) -> None:
    """Rewrite the listing indexes as layouts 1 to 3 kept them: each
    ``updated:<status>`` scored in float seconds, lex zsets by queue, name
    and both (member ``<queue>\0<µs>:<id>`` ...), no zsets by queue or name
    and no ``queue_names``."""
    c, k = store._client, store.keys
    for status in JobStatus:
        if status is JobStatus.InProgress:
            continue
        for job_id in redis_status_ids(store, status):
            h = as_layout_5_hash(store, job_id)
            at = h["last_updated_at"]
            c.zadd(k.updated(status), {job_id: float(at)})
            tail = f"{stamp(float(at))}:{job_id}"
            members = {"queue": f"{h['queue']}\0{tail}", "name": f"{h['name']}\0{tail}"}
            members["queue_name"] = f"{h['queue']}\0{h['name']}\0{tail}"
            for by in LEX_LISTING_BY:
                c.zadd(k.lex_listed(status, by), {members[by]: 0})
            c.delete(k.by_queue(status, h["queue"]), k.by_name(status, h["name"]))
    c.delete(k.queue_names)


def cli_upgrade(url: str) -> str:
    """``leasehold db upgrade`` on ``url`` through the command; its output
    (it must exit 0)."""
    invoke, close = make_cli(url)
    try:
        result = invoke("db", "upgrade")
        assert result.exit_code == 0, result.output
        return result.stdout.strip()
    finally:
        close()
