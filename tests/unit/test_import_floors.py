"""The import structure, read from the source (every import, those inside
functions and under ``TYPE_CHECKING`` included): no import runs up a floor and
no module imports itself back through others.

The floors (docs/architecture.md, "Floors"), lowest first:

0. ``leasehold.urls``: store URLs; imports nothing of Leasehold.
1. ``store``: the job model, the lifecycle table, the store contract and its engines.
2. ``leasehold.settings``, ``leasehold.logs``, ``leasehold.hooks``: what every process reads
   or sends (settings, logging, the lifecycle signals and middleware).
3. ``workers`` and ``webapp``, side by side: neither imports the other.
4. ``leasehold`` (the public API), ``leasehold.cli``, ``leasehold.wsgi``: the entry points.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("leasehold", "store", "workers", "webapp")

#: Module prefix -> floor; a module takes the floor of its longest matching prefix.
FLOORS = {
    "leasehold.urls": 0,
    "store": 1,
    "leasehold.settings": 2,
    "leasehold.logs": 2,
    "leasehold.hooks": 2,
    "workers": 3,
    "webapp": 3,
    "leasehold": 4,
}
#: Packages on one floor that must not import each other.
SIDE_BY_SIDE = ("workers", "webapp")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                names = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    for alias in node.names
                ]
            else:
                continue
            for name in names:
                target = _resolve(name, modules) if name.split(".")[0] in PACKAGES else None
                if target and target != module:
                    edges[module].add(target)
    for module in modules:
        edges.setdefault(module, set())
    return edges


def _floor(module: str) -> int:
    prefix = max((p for p in FLOORS if module == p or module.startswith(p + ".")), key=len)
    return FLOORS[prefix]


def _loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    loops.append(sorted(component))
    return loops


def test_the_walk_sees_the_whole_tree() -> None:
    edges = _graph()
    assert {
        "leasehold.urls",
        "store.lifecycle",
        "workers.worker",
        "webapp.extension",
        "leasehold.cli",
    } <= set(edges)
    assert "store.lifecycle" in edges["store.sql.store"]  # a module-level import
    assert "store.sql.store" in edges["store"]  # an import inside open_store()


def test_no_import_runs_up_a_floor() -> None:
    upward = [
        f"{module} (floor {_floor(module)}) imports {target} (floor {_floor(target)})"
        for module, targets in _graph().items()
        for target in sorted(targets)
        if _floor(target) > _floor(module)
    ]
    assert upward == []


def test_workers_and_webapp_do_not_import_each_other() -> None:
    crossing = [
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in sorted(targets)
        if {module.split(".")[0], target.split(".")[0]} == set(SIDE_BY_SIDE)
    ]
    assert crossing == []


def test_no_import_loop() -> None:
    assert _loops(_graph()) == []


def test_the_loop_finder_finds_a_loop() -> None:
    assert _loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_public_api_resolves_every_name_it_lists() -> None:
    import leasehold

    listed = set(leasehold.__all__) - {"__version__"}
    assert listed == set(leasehold._EXPORTS)
    for name in sorted(listed):
        assert getattr(leasehold, name) is not None, name


def test_nothing_above_store_reaches_an_engine_past_the_stores_door() -> None:
    """Only ``store`` itself imports its engines (``store.sql``, ``store.redis``):
    the rest goes through the store's door (``open_store``, the port, and
    ``store.schema_version`` for schema checks and upgrades)."""
    engines = ("store.sql", "store.redis")
    reaching = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        if not module.startswith("store")
        for target in targets
        if target.startswith(engines)
    )
    assert reaching == []
