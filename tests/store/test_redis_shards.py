"""``shards=N`` in a Redis store URL (docs/architecture.md, Shards): the
parameter is validated with one line naming it; shards=1 is the one-shard
store; above 1, open_store opens the sharded store and RedisStore (one
shard's engine) refuses it. Ids made for a shard carry it in their last byte."""

from __future__ import annotations

import uuid
from zlib import crc32

import pytest
from redis.crc import key_slot

from store import open_store
from store.errors import ValidationError
from store.ids import ID_TEXT, new_id_on_shard, shard_of_id
from store.redis.connect import MAX_SHARDS, split_url, url_shards
from store.redis.keys import Keys
from store.redis.layout import LAYOUT_VERSION
from store.redis.shards import shard_of_queue, shard_prefix
from store.redis.shards.sharded_store import ShardedRedisStore
from store.redis.store import RedisStore
from store.schema_version import SchemaUpgradeFailed, upgrade_schema
from tests.backends import delete_redis_prefix, redis_url_with_prefix


@pytest.mark.parametrize(
    ("query", "shards"), [("", 1), ("?shards=1", 1), ("?shards=3", 3), (f"?shards={MAX_SHARDS}", MAX_SHARDS)]
)
def test_url_shards_reads_the_count(query: str, shards: int) -> None:
    assert url_shards(f"redis://127.0.0.1:6379/0{query}") == shards


@pytest.mark.parametrize("value", ["0", "-1", "x", "", "2.5", str(MAX_SHARDS + 1)])
def test_a_bad_shards_count_is_refused_in_one_line_naming_it(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        url_shards(f"redis+cluster://127.0.0.1:7000?prefix=p&shards={value}")
    assert caught.value.field == "shards"
    assert "\n" not in str(caught.value)
    assert f"shards={value!r}" in str(caught.value)


def test_shards_does_not_reach_redis_py() -> None:
    clean, prefix, cluster = split_url("redis://127.0.0.1:6379/0?shards=1&prefix=p&health_check_interval=5")
    assert clean == "redis://127.0.0.1:6379/0?health_check_interval=5"
    assert (prefix, cluster) == ("p", False)


def test_shards_1_is_todays_store() -> None:
    url, prefix = redis_url_with_prefix()
    store = open_store(f"{url}&shards=1")
    try:
        job = store.enqueue("t", {"n": 1})
        assert store.get(job.id).id == job.id
    finally:
        store.close()
        delete_redis_prefix(url, prefix)


def test_shards_above_1_opens_the_sharded_store_and_one_shards_engine_refuses_it() -> None:
    with pytest.raises(ValidationError) as caught:
        RedisStore("redis://127.0.0.1:6379/0?shards=3")
    assert caught.value.field == "shards"
    url, prefix = redis_url_with_prefix()
    store = open_store(f"{url}&shards=3")
    try:
        assert isinstance(store, ShardedRedisStore)
        assert [s.keys.route for s in store.shards] == [f"{{{prefix}:{k}}}:" for k in range(3)]
    finally:
        store.close()
        delete_redis_prefix(url, prefix)


@pytest.mark.parametrize("shards", [1, 2, 3, 7, MAX_SHARDS])
def test_an_id_made_for_a_shard_routes_to_it(shards: int) -> None:
    for shard in range(min(shards, 16)):
        made = new_id_on_shard(shard)
        assert ID_TEXT.fullmatch(made)
        assert uuid.UUID(made).version == 7
        assert shard_of_id(made, shards) == shard


def test_ids_made_for_shards_still_sort_in_order() -> None:
    made = [new_id_on_shard(k % 3) for k in range(2000)]
    assert made == sorted(made)


def test_a_shard_outside_one_byte_is_refused() -> None:
    with pytest.raises(ValueError, match="shard 256"):
        new_id_on_shard(256)


def test_a_queue_maps_to_one_shard_in_every_process() -> None:
    assert [shard_of_queue(q, 3) for q in ("default", "emails", "reports")] == [
        crc32(q.encode()) % 3 for q in ("default", "emails", "reports")
    ]
    assert {shard_of_queue(f"q{k}", 3) for k in range(30)} == {0, 1, 2}
    assert all(shard_of_queue(f"q{k}", 1) == 0 for k in range(30))


def test_each_shard_has_its_own_hash_tag() -> None:
    tags = [Keys(shard_prefix("leasehold", k)).route for k in range(3)]
    assert tags == ["{leasehold:0}:", "{leasehold:1}:", "{leasehold:2}:"]
    assert len({key_slot(tag.encode()) for tag in tags}) == 3


def test_db_upgrade_lays_out_every_shard() -> None:
    """(Moving an unsharded namespace onto the shards: test_redis_reshard.py.)"""
    url, prefix = redis_url_with_prefix()
    try:
        assert (
            upgrade_schema(f"{url}&shards=3")
            == f"created the key layout at version {LAYOUT_VERSION} (each of 3 shards)"
        )
        assert f"already at version {LAYOUT_VERSION} (each of 3 shards)" in upgrade_schema(f"{url}&shards=3")
        with pytest.raises(SchemaUpgradeFailed, match="shards=3, not 4"):
            upgrade_schema(f"{url}&shards=3", shards=4)
    finally:
        delete_redis_prefix(url, prefix)


def test_an_ids_time_is_read_from_its_uuidv7_head() -> None:
    """moved_ids.py routes an id by its time against ``moved_before``."""
    import time

    from store.ids import new_id
    from store.redis.shards.moved_ids import id_millis

    before = int(time.time() * 1000)
    made = id_millis(new_id())
    assert made is not None and before <= made <= int(time.time() * 1000)
    assert id_millis("not-an-id") is None
    assert id_millis("01900000-0000-7000-8000-000000000000") == 0x019000000000
