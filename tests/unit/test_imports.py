"""The worker side loads no web code: importing the
worker, its process pool and the ``leasehold`` CLI in a fresh interpreter
loads no ``flask*`` or ``webapp*`` module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import workers.worker, workers.pool, leasehold.cli, leasehold.settings, store.recovery_run
print(json.dumps(sorted(sys.modules)))
"""


def test_worker_pool_and_cli_import_no_flask_and_no_webapp() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert "leasehold.cli" in loaded and "workers.worker" in loaded
    web = [m for m in loaded if m.split(".")[0].startswith(("flask", "webapp"))]
    assert web == []


def _loaded(code: str, cwd: Path = REPO) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_the_worker_side_loads_no_alembic() -> None:
    """Only ``db upgrade`` needs Alembic (~20 MB): not the worker, nor the CLI."""
    loaded = _loaded("import workers.worker, workers.pool, leasehold.cli, store.sql.store")
    assert [m for m in loaded if m.split(".")[0] == "alembic"] == []


def test_a_sqlite_store_at_work_loads_neither_postgresql_nor_alembic(tmp_path: Path) -> None:
    """A SQLite store enqueuing, claiming and acking loads no PostgreSQL
    dialect or driver (the schema's JSONB and its indexes' options once
    loaded it: ~3 MB a worker) and no Alembic."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    subprocess.run(
        [sys.executable, "-c", f"from store.sql import migrate; migrate({url!r})"],
        cwd=REPO,
        check=True,
        timeout=60,
    )
    loaded = _loaded(
        "from store import open_store\n"
        f"s = open_store({url!r})\n"
        "s.enqueue('t', {'n': 1})\n"
        "[job] = s.claim('w', ['default'])\n"
        "s.complete(job.id, job.lease_token, {'ok': True})\n"
        "s.close()"
    )
    assert "store.sql.sqlite" in loaded
    unwanted = ("sqlalchemy.dialects.postgresql", "psycopg", "alembic")
    assert [m for m in loaded if m.startswith(unwanted)] == []


def test_a_postgresql_store_loads_no_sqlite_dialect() -> None:
    """Opening a PostgreSQL store and compiling its statements (no server
    needed: the engine connects on first use) loads no SQLite dialect."""
    loaded = _loaded(
        "from store import open_store\n"
        "s = open_store('postgresql+psycopg://nobody@127.0.0.1:9/none')\n"
        "str(s.dialect._q_enqueue.compile(dialect=s.write_engine.dialect))\n"
        "s.close()"
    )
    assert "store.sql.postgres" in loaded
    assert [m for m in loaded if m.startswith(("sqlalchemy.dialects.sqlite", "alembic"))] == []
