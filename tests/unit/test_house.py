"""What the house keeps out of the product and how big its parts may grow
(docs/architecture.md, "Layout"): read from the source, no store needed."""

from __future__ import annotations

import re
from pathlib import Path

from store.redis import scripts

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("leasehold", "store", "workers", "webapp")


def test_the_library_a_store_loads_has_no_bench_function() -> None:
    """The fixture loader is bench code (bench/fixtures/): neither its Python
    nor its Lua function ships in the store's library or packages."""
    name, code = scripts.library()
    registered = re.findall(rf"register_function\('{name}_(\w+)'", code)
    assert registered == scripts.function_names()
    assert "fixtures" not in registered
    shipped = [p.relative_to(REPO) for pkg in PRODUCT for p in (REPO / pkg).rglob("*") if "fixture" in p.name]
    assert shipped == []


def test_the_bench_library_is_built_apart_and_named_apart() -> None:
    from bench.fixtures.redis import _built

    name, code = _built()
    assert name.startswith("leasehold_bench_") and not scripts.OUR_LIBRARY.fullmatch(name)
    assert re.findall(rf"register_function\('{name}_(\w+)'", code) == ["fixtures"]


#: The most lines a Lua file may hold (one function, or helpers of one concept).
MAX_LUA_LINES = 200
#: Lua files over MAX_LUA_LINES, each with why it is still one file; none should be added.
LUA_OVER = {"enqueue.lua", "lib/claim.lua"}


def test_lua_files_are_small_and_by_concept() -> None:
    lua = REPO / "store" / "redis" / "lua"
    over = {
        str(p.relative_to(lua)) for p in lua.rglob("*.lua") if len(p.read_text().splitlines()) > MAX_LUA_LINES
    }
    assert over <= LUA_OVER, sorted(over - LUA_OVER)
    for section in scripts.SECTIONS:  # each helper file says what it takes and defines
        head = (lua / "lib" / f"{section}.lua").read_text()[:3000]
        assert "KEYS" in head and "Defines" in head, section
