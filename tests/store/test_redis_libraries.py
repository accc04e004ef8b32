"""The Redis store unloads the Functions libraries of its older versions: a
new version's load removes those its namespace last loaded more than
LIBRARY_GRACE_S ago (about 135 KB each), keeps recent ones (a rolling
deploy's other version) and never touches another application's; on a
cluster a load reaches every primary. The library's name follows its
content, and two versions load side by side."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import redis

from store.redis.functions import LIBRARY_GRACE_S, Library
from store.redis.scripts import function_names, library, version
from store.redis.store import RedisStore
from tests.backends import BACKENDS, REDIS_BACKENDS, REDIS_URL

pytestmark = pytest.mark.skipif(not set(REDIS_BACKENDS) & set(BACKENDS), reason="Redis is not a test backend")

OLD, RECENT, OTHER, NEW = (
    "leasehold_0000000000a1",
    "leasehold_0000000000a2",
    "someone_elses_lib",
    "leasehold_0000000000a3",
)


def _fake(name: str) -> str:
    return f"#!lua name={name}\nredis.register_function('{name}_f', function() return 1 end)\n"


@pytest.fixture
def libraries(redis_store: RedisStore) -> Iterator[RedisStore]:
    client = redis_store._client
    for name in (OLD, RECENT, OTHER, NEW):
        with contextlib.suppress(redis.ResponseError):
            client.function_delete(name)
        if name != NEW:
            client.function_load(_fake(name))
    yield redis_store
    for name in (OLD, RECENT, OTHER, NEW):
        with contextlib.suppress(redis.ResponseError):
            client.function_delete(name)


def _as_text(names) -> set[str]:
    return {n.decode() if isinstance(n, bytes) else n for n in names}


def _loaded(client) -> set[str]:
    """Names of the libraries on the server (FUNCTION LIST: flat field lists)."""
    return _as_text(
        dict(zip(lib[::2], lib[1::2], strict=True))["library_name"] for lib in client.function_list()
    )


def test_a_new_version_unloads_the_stale_libraries_of_its_namespace(libraries: RedisStore) -> None:
    client, registry = libraries._client, libraries.keys.libraries
    seconds, _ = client.time()
    client.zadd(registry, {OLD: seconds - LIBRARY_GRACE_S - 60, RECENT: seconds - 60})
    new = Library(client, registry)
    new.name, new.code = NEW, _fake(NEW)
    new.load()  # a fresh load: the older version's library goes
    listed = _loaded(client)
    assert NEW in listed and RECENT in listed and OTHER in listed
    assert OLD not in listed
    assert _as_text(client.zrange(registry, 0, -1)) == {RECENT, NEW}
    # A process of the unloaded version loads it again at its next call.
    old = Library(client, registry)
    old.name, old.code = OLD, _fake(OLD)
    old.load()
    assert client.fcall(f"{OLD}_f", 0) == 1
    assert NEW in _loaded(client)  # loaded within the grace: kept


def test_the_store_registers_its_own_library(libraries: RedisStore) -> None:
    lib = libraries._lua.now.library
    assert lib.registry == libraries.keys.libraries
    lib.unload_stale()
    assert lib.name in _as_text(libraries._client.zrange(libraries.keys.libraries, 0, -1))


def test_the_registry_works_on_a_cluster(redis_cluster) -> None:
    """TIME, the registry zset (in the prefix's slot) and FUNCTION DELETE on
    every primary: a library of another version that only some primaries
    have is unloaded where it is and forgotten."""
    from store import open_store

    url, prefix = redis_cluster.url_with_prefix()
    store = open_store(url)
    try:
        lib = store._lua.now.library  # type: ignore[attr-defined]
        client, registry = lib.client, lib.registry
        with contextlib.suppress(redis.ResponseError):
            client.function_delete(OLD)
        client.function_load(_fake(OLD))
        seconds, _ = client.time()
        client.zadd(registry, {OLD: seconds - LIBRARY_GRACE_S - 60})
        assert lib.unload_stale() == [OLD]
        assert _as_text(client.zrange(registry, 0, -1)) == {lib.name}
        assert lib.unload_stale() == []
    finally:
        store.close()
        redis_cluster.delete_prefix(prefix)


def test_a_load_reaches_every_primary_when_another_process_loaded_one(redis_cluster) -> None:
    """Processes starting together on a cluster: one has loaded the library
    on some primary when another loads it. The second load must leave it on
    every primary (redis-py's load to all primaries stops at the first
    node's "already exists", which left the rest without it), and a stale
    library on one primary only is unloaded there."""
    from store import open_store

    url, prefix = redis_cluster.url_with_prefix()
    store = open_store(url)
    try:
        client = store._lua.now.library.client  # type: ignore[attr-defined]
        primaries = client.get_primaries()
        assert len(primaries) == 3
        for k, first in enumerate(primaries):
            name = f"leasehold_00000000f0{k:02d}"
            lib = Library(client, None, built=(name, _fake(name)))
            client.execute_command("FUNCTION LOAD", lib.code, target_nodes=first)
            lib.load()
            for node in primaries:
                assert client.execute_command(f"FCALL {name}_f 0", target_nodes=node) == 1
        registry = store._lua.now.library.registry  # type: ignore[attr-defined]
        seconds, _ = client.time()
        client.execute_command("FUNCTION LOAD", _fake(OLD), target_nodes=primaries[-1])
        client.zadd(registry, {OLD: seconds - LIBRARY_GRACE_S - 60})
        assert store._lua.now.library.unload_stale() == [OLD]  # type: ignore[attr-defined]
        assert all(OLD not in _loaded_on(client, node) for node in primaries)
    finally:
        for k in range(3):
            with contextlib.suppress(redis.ResponseError):
                client.function_delete(f"leasehold_00000000f0{k:02d}")
        store.close()
        redis_cluster.delete_prefix(prefix)


def _loaded_on(client, node) -> set[str]:
    listed = client.execute_command("FUNCTION LIST", target_nodes=node)
    return _as_text(dict(zip(lib[::2], lib[1::2], strict=True))["library_name"] for lib in listed)


def _library_names(client: redis.Redis) -> set[str]:
    """Names of the libraries loaded (FUNCTION LIST: flat pairs in RESP2)."""
    return {dict(zip(e[::2], e[1::2], strict=True))["library_name"] for e in client.function_list()}


def test_the_library_name_follows_its_content() -> None:
    name, code = library()
    head, rest = code.split("\n", 1)
    assert head == f"#!lua name={name}"
    body, registrations = rest.split("\nregister_function(", 1)
    assert name == f"leasehold_{version(body)}"
    assert version(body + " ") != version(body)
    assert registrations.count("\nregister_function(") == len(function_names()) - 1
    assert "local OPERATIONS = {" in body


def test_two_versions_side_by_side_and_loading_twice(redis_client_for_library) -> None:
    """A second library (another Leasehold version: other content, so other
    name) loads beside this one; each version's functions answer; loading
    this one again is a no-op. Only the libraries this test made are removed."""
    client = redis_client_for_library
    lib = Library(client)
    lib.load()
    lib.load()  # already there: no error, nothing replaced
    other = Library(client)
    other.code = lib.code.replace(lib.name, lib.name[:-4] + "beef").replace("-- lib/clock.lua", "-- v2 clock")
    other.name = lib.name[:-4] + "beef"
    made = other.name not in _library_names(client)
    try:
        other.load()
        assert {lib.name, other.name} <= _library_names(client)
        for name in (lib.name, other.name):
            assert float(client.fcall(f"{name}_now", 1, "{lh-static}:x", 0)) > 1e9
    finally:
        if made:
            client.function_delete(other.name)


@pytest.fixture
def redis_client_for_library() -> object:
    if "redis" not in BACKENDS:
        pytest.skip("Redis is not among LEASEHOLD_TEST_BACKENDS")
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    client.close()
