"""A SQL store on an application's engine (``open_store(url, engine=…)``,
``Leasehold(app, db=db)``): PostgreSQL of the same database only, one pool,
left open by the store's close; anything else refused with the field named
or (the extension) kept on the store's own engines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Engine, create_engine, text

from store import open_store
from store.errors import ValidationError
from tests.backends import PgTemplate, SqliteTemplate
from webapp.config import ConfigError
from webapp.extension import host_engine


@pytest.fixture
def pg_url(pg_template: PgTemplate) -> Iterator[str]:
    url, drop = pg_template.clone()
    yield url
    drop()


@pytest.fixture
def app_engine(pg_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_url)
    yield engine
    engine.dispose()


def test_a_postgresql_store_runs_on_the_applications_engine_and_leaves_it_open(
    pg_url: str, app_engine: Engine
) -> None:
    store = open_store(pg_url, engine=app_engine)
    assert store.write_engine is app_engine  # type: ignore[attr-defined]
    assert store.read_engine.pool is app_engine.pool  # type: ignore[attr-defined]
    job = store.enqueue("noop", {"n": 1})
    assert store.get(job.id).payload == {"n": 1} and store.counts().by_status["Queued"] == 1
    [claimed] = store.claim("w1", ["default"])  # one-statement changes: the autocommit copy
    assert store.complete(claimed.id, claimed.lease_token, {"ok": True}).status.name == "Completed"
    store.enqueue("noop", {"n": 2})
    checked_out = app_engine.pool.checkedout()  # type: ignore[attr-defined]
    store.close()
    with app_engine.connect() as conn:  # still open: the application's
        assert conn.execute(text("SELECT count(*) FROM leasehold_jobs")).scalar_one() == 2
    assert checked_out == 0


def test_what_cannot_share_an_engine_is_refused_naming_it(
    pg_url: str,
    app_engine: Engine,
    tmp_path: Path,
    sqlite_template: SqliteTemplate,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = create_engine(pg_url.rsplit("/", 1)[0] + "/postgres")
    sqlite_url = sqlite_template.clone(tmp_path)
    sqlite = create_engine(sqlite_url)
    try:
        for url, engine in ((pg_url, other), (sqlite_url, sqlite), ("redis://127.0.0.1:6379/0", app_engine)):
            with pytest.raises(ValidationError) as refused:
                open_store(url, engine=engine)
            assert refused.value.field == "engine"
        monkeypatch.setenv("LEASEHOLD_PG_SCHEMA", "jobs")
        with pytest.raises(ValidationError, match="LEASEHOLD_PG_SCHEMA") as refused:
            open_store(pg_url, engine=app_engine)
        assert refused.value.field == "engine"
    finally:
        other.dispose()
        sqlite.dispose()


def test_the_extension_shares_only_a_postgresql_engine_of_the_store_database(
    pg_url: str, tmp_path: Path
) -> None:
    def app_with(uri: str) -> tuple[Flask, SQLAlchemy]:
        app = Flask(__name__)
        app.config["SQLALCHEMY_DATABASE_URI"] = uri
        db = SQLAlchemy()
        db.init_app(app)
        return app, db

    app, db = app_with(pg_url)
    with app.app_context():
        assert host_engine(app, db, pg_url) is db.engine
        assert host_engine(app, db, pg_url.rsplit("/", 1)[0] + "/postgres") is None
        assert host_engine(app, db, "redis://127.0.0.1:6379/0") is None
        db.engine.dispose()
    sqlite_url = f"sqlite:///{tmp_path / 'app.db'}"
    app, db = app_with(sqlite_url)
    assert host_engine(app, db, sqlite_url) is None  # SQLite keeps the store's own connections
    with pytest.raises(ConfigError, match=r"db\.init_app"):
        host_engine(Flask(__name__), SQLAlchemy(), pg_url)
