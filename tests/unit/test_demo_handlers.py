"""The demo's index-source handler on real files of the standard library."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import pytest

from workers.demo_handlers import index_source, index_source_text
from workers.handlers import JobContext


def ctx(payload: object) -> JobContext:
    return JobContext("j", "index-source", payload, None, None, None, 0, "w", 1)


def test_counts_a_real_module() -> None:
    path = Path(ast.__file__)
    result = index_source(ctx({"path": str(path)}))
    text = path.read_text(encoding="utf-8")
    assert result["path"] == str(path)
    assert result["lines"] == len(text.splitlines())
    assert result["classes"] == text.count("\nclass ")
    assert result["functions"] >= text.count("\ndef ")
    assert result["imports"] >= 1
    assert result["largest_function"]["lines"] > 10


def test_small_source() -> None:
    src = (
        "import os\nfrom a import b\n\nclass C:\n    def m(self):\n        return 1\n\n"
        "async def f():\n    x = 1\n    return x\n"
    )
    assert index_source_text(src, "s.py") == {
        "lines": 10,
        "functions": 2,
        "classes": 1,
        "imports": 2,
        "largest_function": {"name": "f", "lines": 3, "line": 8},
    }


def test_unparsable_file_raises_the_real_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n    pass\n")
    with pytest.raises(SyntaxError):
        index_source(ctx({"path": str(bad)}))


def test_the_standard_library_ships_unparsable_files() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    bad = []
    candidates = [*stdlib.glob("test/tokenizedata/bad*.py"), *stdlib.glob("lib2to3/tests/data/*.py")]
    for path in sorted(candidates):
        try:
            index_source(ctx({"path": str(path)}))
        except SyntaxError:
            bad.append(path)
    if not bad:
        pytest.skip("this Python was installed without its test modules")
    assert bad
