"""What the house keeps out of the product and how big its parts may grow
(docs/architecture.md, "Layout"): read from the source, no store needed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from store.base import JobStore
from store.parts import delegate
from store.redis import functions, scripts
from store.redis.store import RedisStore
from store.sql.store import SqlStore

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
    assert name.startswith("leasehold_bench_") and not functions.OUR_LIBRARY.fullmatch(name)
    assert re.findall(rf"register_function\('{name}_(\w+)'", code) == ["fixtures"]


#: The most lines a Lua file may hold (one function, or helpers of one concept).
MAX_LUA_LINES = 200
#: Lua files over MAX_LUA_LINES (none left; none should be added).
LUA_OVER: set[str] = set()


def test_lua_files_are_small_and_by_concept() -> None:
    lua = REPO / "store" / "redis" / "lua"
    over = {
        str(p.relative_to(lua)) for p in lua.rglob("*.lua") if len(p.read_text().splitlines()) > MAX_LUA_LINES
    }
    assert over <= LUA_OVER, sorted(over - LUA_OVER)
    for section in scripts.SECTIONS:  # each helper file says what it takes and defines
        head = (lua / "lib" / f"{section}.lua").read_text()[:3000]
        assert "KEYS" in head and "Defines" in head, section


#: The most lines a module of the repository (the product, bench and tests) may hold.
MAX_MODULE_LINES = 450
#: Modules over MAX_MODULE_LINES, to be split (shrink only).
MODULES_OVER: set[str] = set()


def test_modules_are_at_most_450_lines() -> None:
    over = {
        path.relative_to(REPO).as_posix()
        for path in _python_files()
        if len(path.read_text().splitlines()) > MAX_MODULE_LINES
    }
    assert over <= MODULES_OVER, sorted(over - MODULES_OVER)


# ---- engines by composition: each engine is its plumbing and the port, and
# names the part that runs each method (docs/architecture.md, "Stores").
ENGINES = [SqlStore, RedisStore]


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.__name__)
def test_an_engine_is_at_most_five_classes(engine: type[JobStore]) -> None:
    names = [c.__name__ for c in engine.__mro__]
    assert len(names) <= 5, names


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.__name__)
def test_every_port_method_is_found_in_the_engine_class_itself(engine: type[JobStore]) -> None:
    public = {n for n in dir(JobStore) if not n.startswith("_") and callable(getattr(JobStore, n))}
    missing = sorted(n for n in public if n not in vars(engine) and n not in vars(engine.__mro__[1]))
    port_own = {
        n
        for n in missing
        if n in vars(JobStore) and not getattr(vars(JobStore)[n], "__isabstractmethod__", 0)
    }
    assert sorted(set(missing) - port_own) == []


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.__name__)
def test_no_abstract_method_is_left(engine: type[JobStore]) -> None:
    assert engine.__abstractmethods__ == frozenset()


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.__name__)
def test_each_delegate_names_a_listed_part_that_defines_the_method(engine: type[JobStore]) -> None:
    parts = engine.parts  # type: ignore[attr-defined]
    for name, value in vars(engine).items():
        if isinstance(value, delegate):
            assert value.part in parts, name
            assert hasattr(parts[value.part], name), f"{name} -> {value.part}"


# ---- module names read in a traceback: a basename names one module, except
# the SQL and Redis halves of one engine concern (store/sql/x.py, store/redis/x.py).
#: Names still shared by modules of different concerns, to be renamed (shrink only).
SHARED_NAMES_LEFT = {
    "job_logs.py",
    "handlers.py",
    "batch_list.py",
    "alerts.py",
    "search.py",
    "records.py",
    "batches.py",
    "wsgi.py",
    "procs.py",
    "periodic.py",
    "jobs.py",
    "helpers.py",
    "errors.py",
    "env.py",
    "control.py",
    "config.py",
    "common.py",
    "catalogue.py",
    "bulk.py",
    "history.py",
    "auth.py",
    "base.py",
    "schema.py",
}


def _python_files() -> list[Path]:
    """The repository's own Python files (tracked by git: no build copies, no venv)."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return [REPO / line for line in tracked.stdout.splitlines()]


def test_module_basenames_are_unique_but_an_engines_two_halves() -> None:
    seen: dict[str, set[str]] = {}
    for path in _python_files():
        if path.name in ("__init__.py", "conftest.py"):
            continue
        where = path.parent.relative_to(REPO).as_posix()
        where = "store/<engine>" if where in ("store/sql", "store/redis") else where
        seen.setdefault(path.name, set()).add(where)
    shared = {name for name, dirs in seen.items() if len(dirs) > 1}
    assert shared <= SHARED_NAMES_LEFT, sorted(shared - SHARED_NAMES_LEFT)
    assert len(seen["flow_rules.py"]) == 1 and len(seen["recovery_run.py"]) == 1
