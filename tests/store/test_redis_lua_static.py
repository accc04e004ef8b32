"""Static checks of the Redis store's Lua (store/redis/lua): the rules that make
the scripts safe on Redis Cluster and bounded in cost.

* each file starts with a header naming its KEYS, ARGV and what it returns;
* no SCAN/KEYS/FLUSH* calls (in Lua or in the Python store);
* the hash-tag rule: every key argument of ``redis.call`` is built from the
  prefix ``P`` (KEYS[1], the only declared key, read in lib/keys.lua alone) as
  ``P .. '<literal>'`` + data, directly or through a local assigned only
  such values; never a name without the prefix;
* only commands whose key positions this test knows are used;
* a script that counts (lib/job.lua ``move``, ``append_event``, ``count``)
  writes the counters with ``flush_counts()``;
* the files, the library's functions and ``Scripts`` agree, includes name
  known sections, and the ``rank`` format of
  lua/lib/job.lua matches what keys.py parses;
* the lifecycle table and the counters as the library has them compiled:
  test_redis_lua_table.py; the library's name and versions side by side:
  test_redis_libraries.py.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from store.lifecycle import JobStatus
from store.models import MAX_PRIORITY
from store.redis import keys as redis_keys
from store.redis.functions import Scripts
from store.redis.keys import Keys
from store.redis.scripts import (
    LUA_DIR,
    function_names,
    includes,
    library,
)
from tests.store.lua_source import header, redis_calls, strip_comments

OPERATIONS = sorted(LUA_DIR.glob("*.lua"))
ALL_FILES = sorted(LUA_DIR.rglob("*.lua"))
FORBIDDEN = {"SCAN", "HSCAN", "SSCAN", "ZSCAN", "KEYS", "FLUSHDB", "FLUSHALL", "RANDOMKEY"}
#: Commands the scripts may use, and which arguments are keys: 1 = the first
#: argument only, "all" = every argument, 0 = none.
KEY_POSITIONS: dict[str, int | str] = {
    "TIME": 0,
    "EXISTS": "all",
    "DEL": "all",
    **dict.fromkeys(["HGET", "HMGET", "HGETALL", "HSET", "HSETNX", "HDEL", "HINCRBY"], 1),
    **dict.fromkeys(["ZADD", "ZREM", "ZRANGE", "ZRANGEBYSCORE", "ZCOUNT", "ZSCORE", "ZREMRANGEBYRANK"], 1),
    **dict.fromkeys(["ZREMRANGEBYSCORE", "ZCARD", "ZRANGEBYLEX", "ZLEXCOUNT", "GET", "SET"], 1),
    **dict.fromkeys(["SADD", "SREM", "SISMEMBER", "SMEMBERS"], 1),
    **dict.fromkeys(["RPUSH", "LPUSH", "LTRIM", "LRANGE", "LLEN", "LREM", "PEXPIRE", "EXPIREAT"], 1),
}
KEY_REF = re.compile(r"KEYS\[[^\[\]]+\]")


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(LUA_DIR)))
def test_header_names_keys_argv_and_returns(path: Path) -> None:
    head = header(path)
    assert re.search(r"\bKEYS\b", head), "header must name the KEYS"
    assert re.search(r"\bARGV\b", head), "header must name the ARGV"
    assert re.search(r"\bReturns:", head), "header must say what the script returns"


#: A key built from the prefix: ``P .. '<literal>'`` (then more ``..`` data).
FROM_PREFIX = re.compile(r"""P\s*\.\.\s*'[a-z_:]+'(\s*\.\..*)?""", re.DOTALL)
ASSIGNMENT = re.compile(r"^[ \t]*(?:local[ \t]+)?([\w \t,]+?)[ \t]*=(?!=)[ \t]*(.+)$", re.MULTILINE)


def top_level_split(expr: str, sep: str) -> list[str]:
    """``expr`` split at ``sep`` outside brackets and string literals."""
    parts, depth, quote, current, i = [], 0, None, [], 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            quote = None if ch == quote and expr[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(sep, i):
            parts.append("".join(current).strip())
            current, i = [], i + len(sep)
            continue
        current.append(ch)
        i += 1
    parts.append("".join(current).strip())
    return parts


def assignments(code: str) -> dict[str, list[str]]:
    """Every value assigned to each name in ``code`` (one-line statements)."""
    out: dict[str, list[str]] = {}
    for m in ASSIGNMENT.finditer(code):
        names = [n.strip() for n in m[1].split(",")]
        values = top_level_split(m[2].strip(), ",")
        for name, value in zip(names, values, strict=False):
            out.setdefault(name, []).append(value)
    return out


def built_from_prefix(arg: str, assigned: dict[str, list[str]]) -> bool:
    """``arg`` is ``P .. '<literal>' ..`` data, or starts with a local whose
    every assigned value is."""
    if FROM_PREFIX.fullmatch(arg):
        return True
    head = top_level_split(arg, "..")[0]
    values = assigned.get(head) if re.fullmatch(r"[a-z_]\w*", head) else None
    return bool(values) and all(FROM_PREFIX.fullmatch(v) for v in values)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(LUA_DIR)))
def test_every_key_is_built_from_the_prefix(path: Path) -> None:
    """The hash-tag rule: every key argument of ``redis.call`` is the prefix
    ``P`` (KEYS[1], lib/keys.lua) + a literal + data, directly or through a
    local assigned only such values; no key name without the prefix, and
    KEYS is read nowhere but lib/keys.lua (a call declares the prefix alone)."""
    code = strip_comments(path.read_text())
    assigned = assignments(code)
    for command, args in redis_calls(code):
        assert command not in FORBIDDEN, f"{command} is not allowed in the store"
        assert command in KEY_POSITIONS, f"{command}: add its key positions to this test first"
        positions = KEY_POSITIONS[command]
        key_args = args if positions == "all" else args[: int(positions)]
        if positions == "all":
            assert key_args, f"{command} without a key"
        for arg in key_args:
            assert built_from_prefix(arg, assigned), f"{command}: key {arg!r} is not P .. '<literal>' .. data"
    if path.relative_to(LUA_DIR) == Path("lib/keys.lua"):
        assert re.findall(r"KEYS\[[^\]]*\]", code) == ["KEYS[1]"] and "P = KEYS[1]" in code
    else:
        assert "KEYS" not in code, "keys are built from P; only lib/keys.lua reads KEYS[1]"


def test_the_prefix_rule_catches_what_it_should() -> None:
    assigned = assignments(
        "local job = P .. 'job:' .. id\nlocal a, b = P .. 'x', other\nb = 'y'\n"
        "  return\nend\nlocal c = P .. 'c'\nif d == 1 then"
    )
    assert built_from_prefix("P .. 'leases'", assigned)
    assert built_from_prefix("job", assigned) and built_from_prefix("a .. ':queue'", assigned)
    assert built_from_prefix("c", assigned) and "d" not in assigned  # one line a statement; == compares
    for bad in ("'leases'", "KEYS[1]", "other .. 'x'", "b", "ARGV[1]", "P", "P .. ARGV[1]", "x .. P .. 'a'"):
        assert not built_from_prefix(bad, assigned), bad


def test_the_python_keys_match_the_prefix() -> None:
    k = Keys("dep")
    assert k.route == "{dep}:"
    assert (
        k.job("1") == k.route + "job:1"
        and k.by_queue(JobStatus.Queued, "q") == k.route + "updated:100:queue:q"
        and k.by_name(JobStatus.Queued, "n") == k.route + "updated:100:name:n"
    )
    assert k.history(60) == (k.route + "history:60", k.route + "history_index:60")
    assert (
        k.record("hold", "r") == k.route + "rec:hold:r"
        and k.record_index("worker") == k.route + "recs:worker"
    )


#: The one module allowed to SCAN: ``leasehold db upgrade``'s move of layout-2
#: records, run once outside the serving path, finds keys no index of that
#: layout lists (failure windows, locks) by SCAN under the prefix.
SCAN_ALLOWED = {"upgrade_records.py"}


def test_forbidden_commands_in_the_python_store() -> None:
    for path in (LUA_DIR.parent).glob("*.py"):
        if path.name in SCAN_ALLOWED:
            continue
        text = path.read_text()
        assert not re.search(r"\.(scan|scan_iter|[hsz]scan(_iter)?|keys|flushdb|flushall)\(", text), path.name


def test_scripts_and_files_agree_and_includes_resolve() -> None:
    assert {f.name for f in fields(Scripts)} == {p.stem for p in OPERATIONS} == set(function_names())
    name, code = library()
    assert code.startswith(f"#!lua name={name}\n")
    for path in OPERATIONS:
        assert includes(path.stem) == [
            s for s in ("clock", "job") if f"-- @include lib/{s}.lua" in path.read_text()
        ]
        assert f"\nregister_function('{name}_{path.stem}', F['{path.stem}'])" in code
        for command, _ in redis_calls(strip_comments(path.read_text())):
            assert command in KEY_POSITIONS


def test_clock_comes_from_redis_time() -> None:
    clock = strip_comments((LUA_DIR / "lib" / "clock.lua").read_text())
    assert "redis.call('TIME')" in clock
    for path in OPERATIONS:
        text = path.read_text()
        if re.search(r"\bnow\b", strip_comments(text)):
            assert "-- @include lib/clock.lua" in text, f"{path.name} uses now without lib/clock.lua"


@pytest.mark.parametrize("path", OPERATIONS, ids=lambda p: p.name)
def test_a_script_that_counts_flushes_its_counters(path: Path) -> None:
    code = strip_comments(path.read_text())
    if re.search(r"\b(move|append_event|count)\(", code):
        assert "-- @include lib/job.lua" in path.read_text()
        assert re.search(r"^flush_counts\(\)$", code, re.MULTILINE), "counter deltas would be lost"


def test_rank_format_matches_the_python_side() -> None:
    lib = (LUA_DIR / "lib" / "job.lua").read_text()
    assert f"{MAX_PRIORITY} - tonumber(priority)" in lib
    assert "string.format('%07d', 1000000 - tonumber(priority))" in lib
    assert "string.format('%017d', math.floor(due * 1000000 + 0.5))" in lib
    assert redis_keys.RANK_HEAD == 7 + 17
    member = "0999995" + "1".zfill(17) + ":" + "0" * 8 + "-job"
    assert redis_keys.rank_job_id(member) == "00000000-job"


# --------------------------------------------------- the lifecycle table in Lua
