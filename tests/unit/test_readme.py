"""The README stays a page a newcomer reads in one sitting, and the documents
it sends readers to exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_the_readme_is_at_most_400_lines() -> None:
    assert len(README.splitlines()) <= 400


def test_every_document_the_readme_names_exists() -> None:
    named = set(re.findall(r"`((?:docs|bench|deploy)/[\w./-]+\.(?:md|service))`", README))
    assert {"docs/architecture.md", "docs/guarantees.md", "docs/handlers.md", "docs/operating.md"} <= named
    assert [name for name in sorted(named) if not (REPO / name).exists()] == []
