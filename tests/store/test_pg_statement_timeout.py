"""PostgreSQL reads run under a statement timeout (LEASEHOLD_PG_STATEMENT_TIMEOUT,
s, default 5) and a read it cuts is a StoreTimeout naming the limit; claims,
acks and other one-statement changes run on connections without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from store import open_store
from store.base import JobStore
from store.errors import StoreTimeout, StoreUnavailable, ValidationError
from store.sql.engine import PG_STATEMENT_TIMEOUT_ENV, pg_statement_timeout_s
from tests.backends import StoreHandle


@pytest.fixture
def pg_handle(handle: StoreHandle) -> StoreHandle:
    if handle.backend != "postgresql":
        pytest.skip("PostgreSQL's statement timeout")
    return handle


@pytest.fixture
def quick(pg_handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobStore]:
    """A handle on the test's database whose reads may run 0.3 s."""
    monkeypatch.setenv(PG_STATEMENT_TIMEOUT_ENV, "0.3")
    store = open_store(pg_handle.url, pg_handle.store.settings)
    yield store
    store.close()


def _show(store: JobStore, single: bool) -> str:
    stmt = text("SHOW statement_timeout")
    if single:
        return store.tx(lambda c: c.execute(stmt).scalar_one(), single=True)  # type: ignore[attr-defined]
    return store.read(stmt)[0]["statement_timeout"]  # type: ignore[attr-defined]


def test_reads_run_under_the_default_timeout_and_changes_without(pg_handle: StoreHandle) -> None:
    assert _show(pg_handle.store, single=False) == "5s"
    assert _show(pg_handle.store, single=True) == "0"


def test_a_read_past_the_timeout_is_a_store_timeout_naming_the_setting(quick: JobStore) -> None:
    assert _show(quick, single=False) == "300ms"
    with pytest.raises(StoreTimeout) as raised:
        quick.read(text("SELECT pg_sleep(2)"))  # type: ignore[attr-defined]
    assert isinstance(raised.value, StoreUnavailable)
    assert PG_STATEMENT_TIMEOUT_ENV in str(raised.value) and "0.3 s" in str(raised.value)
    assert quick.counts().by_status["Queued"] == 0  # the connection is fine afterwards


def test_claims_and_acks_are_not_cut_by_the_read_timeout(quick: JobStore) -> None:
    # A one-statement change as long as the read timeout would cut is not cut.
    assert quick.tx(lambda c: c.execute(text("SELECT pg_sleep(0.5), 1")).all(), single=True)  # type: ignore[attr-defined]
    job = quick.enqueue("t")
    [claimed] = quick.claim("w", ["default"], 1)
    assert quick.complete(job.id, claimed.lease_token, {"ok": True}).status.name == "Completed"


@pytest.mark.parametrize("raw", ["0", "-1", "x", "3601", "nan"])
def test_a_bad_timeout_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValidationError) as raised:
        pg_statement_timeout_s(raw)
    assert raised.value.field == PG_STATEMENT_TIMEOUT_ENV


def test_the_timeout_takes_seconds() -> None:
    assert pg_statement_timeout_s("") == 5.0 and pg_statement_timeout_s("2.5") == 2.5
