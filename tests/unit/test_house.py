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
