"""``from leasehold import open_store``: with no URL it opens the store
LEASEHOLD_STORE_URL names (docs/handlers.md), through the one settings model
(a bad variable is refused by name)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import leasehold
from leasehold.settings import ConfigError
from store.sql import migrate


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_open_store_without_a_url_reads_leasehold_store_url(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate(url)
    clean_env.setenv("LEASEHOLD_STORE_URL", url)
    clean_env.setenv("LEASEHOLD_MAX_RETRIES", "7")
    store = leasehold.open_store()
    try:
        job = store.enqueue("t", None)
        assert job.max_retries == 7  # the other LEASEHOLD_* defaults too
    finally:
        store.close()
    other = leasehold.open_store(url)
    try:
        assert other.get(job.id).id == job.id  # the same database
    finally:
        other.close()


def test_open_store_refuses_a_bad_variable_by_name(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LEASEHOLD_STORE_URL", "mysql://nope")
    with pytest.raises(ConfigError, match="LEASEHOLD_STORE_URL"):
        leasehold.open_store()
