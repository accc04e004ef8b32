"""The README's quick start, read from the README itself: its handler module
(the ``# myapp/jobs.py`` block) and the ``leasehold`` commands of its
"Install with pip" block, so a test that runs them breaks when the README and
the code drift apart."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

#: The application code the README's handler imports ("your own code"): a stand-in.
BILLING = """
CHARGED = []


def charge(order_id, idempotency_key):
    CHARGED.append((order_id, idempotency_key))


def invoice_pages(order_id):
    return [f"page {n} of order {order_id}" for n in range(3)]
"""


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def handler_module() -> str:
    """The text of the README's ``myapp/jobs.py``."""
    [block] = [b for b in _blocks("python") if b.startswith("# myapp/jobs.py")]
    return block


def handler_tests() -> str:
    """The text of the README's ``tests/test_jobs.py`` (section "Testing your handlers")."""
    [block] = [b for b in _blocks("python") if b.startswith("# tests/test_jobs.py")]
    return block


def commands() -> list[list[str]]:
    """The quick start's ``leasehold`` commands, in order, as argument lists
    (comments dropped), ``web`` and ``demo`` left out (they serve until stopped)."""
    [block] = [b for b in _blocks("sh") if "leasehold worker --burst" in b]
    out = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] == "leasehold" and words[1] not in ("web", "demo"):
            out.append(words)
    return out


def write_app(root: Path) -> None:
    """``root/myapp``: the README's handler module and a stand-in for its billing code."""
    app = root / "myapp"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "jobs.py").write_text(handler_module())
    (app / "billing.py").write_text(BILLING)


def console_script() -> list[str]:
    """The ``leasehold`` console script of pyproject.toml as ``python -c`` arguments
    (for a checkout, where the script is not installed)."""
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["leasehold"]
    module, func = target.split(":")
    return ["-c", f"import sys; from {module} import {func}; sys.exit({func}())"]
