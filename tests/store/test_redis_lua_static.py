"""Static checks of the Redis store's Lua (store/redis/lua): the rules that make
the scripts safe on Redis Cluster and bounded in cost.

* each file starts with a header naming its KEYS, ARGV and what it returns;
* no SCAN/KEYS/FLUSH* calls (in Lua or in the Python store);
* every key argument of ``redis.call`` is a ``KEYS[...]`` reference: never a
  name built inside the script (no ``..`` concatenation, no alias variable);
* only commands whose key positions this test knows are used;
* a script that counts (lib/job.lua ``move``, ``append_event``, ``count``)
  writes the counters with ``flush_counts()``;
* the files and ``Scripts`` agree, includes resolve, and the ``rank`` format of
  lua/lib/job.lua matches what keys.py parses.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from store.models import MAX_PRIORITY
from store.redis import keys as redis_keys
from store.redis.scripts import LUA_DIR, Scripts, source

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
    **dict.fromkeys(["ZADD", "ZREM", "ZRANGE", "ZRANGEBYSCORE", "ZCOUNT", "ZREMRANGEBYRANK"], 1),
    **dict.fromkeys(["RPUSH", "LPUSH", "LTRIM", "PEXPIRE"], 1),
    "PUBLISH": 0,  # a Pub/Sub channel, not a key (ARGV); cluster-wide on Redis Cluster
}
KEY_REF = re.compile(r"KEYS\[[^\[\]]+\]")


def strip_comments(code: str) -> str:
    """Lua source without ``--`` comments (string literals respected)."""
    out, i, quote = [], 0, None
    while i < len(code):
        ch = code[i]
        if quote:
            out.append(ch)
            if ch == "\\":
                out.append(code[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif code.startswith("--", i):
            while i < len(code) and code[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def call_args(code: str, start: int) -> list[str]:
    """Top-level arguments of the call whose ``(`` is just before ``start``."""
    args, depth, quote, current = [], 0, None, []
    for i in range(start, len(code)):
        ch = code[i]
        if quote:
            quote = None if ch == quote and code[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    raise AssertionError("unbalanced redis.call")


def redis_calls(code: str) -> list[tuple[str, list[str]]]:
    """``(command, argument expressions)`` of every redis.call / redis.pcall."""
    out = []
    for m in re.finditer(r"redis\.p?call\s*\(", code):
        command, *args = call_args(code, m.end())
        literal = re.fullmatch(r"""['"](\w+)['"]""", command)
        assert literal, f"command must be a string literal, got {command!r}"
        out.append((literal[1].upper(), args))
    return out


def header(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("--") and line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(LUA_DIR)))
def test_header_names_keys_argv_and_returns(path: Path) -> None:
    head = header(path)
    assert re.search(r"\bKEYS\b", head), "header must name the KEYS"
    assert re.search(r"\bARGV\b", head), "header must name the ARGV"
    assert re.search(r"\bReturns:", head), "header must say what the script returns"


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(LUA_DIR)))
def test_every_key_comes_from_KEYS(path: Path) -> None:
    code = strip_comments(path.read_text())
    calls = redis_calls(code)
    for command, args in calls:
        assert command not in FORBIDDEN, f"{command} is not allowed in the store"
        assert command in KEY_POSITIONS, f"{command}: add its key positions to this test first"
        positions = KEY_POSITIONS[command]
        key_args = args if positions == "all" else args[: int(positions)]
        if positions == "all":
            assert key_args, f"{command} without a key"
        for arg in key_args:
            assert KEY_REF.fullmatch(arg), f"{command}: key argument {arg!r} is not a KEYS[...] reference"
    # No key name is ever built: KEYS[...] never takes part in a concatenation.
    assert not re.search(r"KEYS\[[^\[\]]+\]\s*\.\.|\.\.\s*KEYS\[", code)


def test_forbidden_commands_in_the_python_store() -> None:
    for path in (LUA_DIR.parent).glob("*.py"):
        text = path.read_text()
        assert not re.search(r"\.(scan|scan_iter|[hsz]scan(_iter)?|keys|flushdb|flushall)\(", text), path.name


def test_scripts_and_files_agree_and_includes_resolve() -> None:
    assert {f.name for f in fields(Scripts)} == {p.stem for p in OPERATIONS}
    for path in OPERATIONS:
        text = source(path.stem)
        assert not re.search(r"^-- @include ", text, re.MULTILINE), f"{path.name}: unresolved include"
        for command, _ in redis_calls(strip_comments(text)):
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
    assert "'%07d%017d:%s'" in lib
    assert redis_keys.RANK_HEAD == 7 + 17
    member = "0999995" + "1".zfill(17) + ":" + "0" * 8 + "-job"
    assert redis_keys.rank_job_id(member) == "00000000-job"
