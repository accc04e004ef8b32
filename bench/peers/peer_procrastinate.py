"""procrastinate: PostgreSQL (psycopg 3), ``Task.batch_defer`` in chunks of 1000
(one INSERT statement each), P processes of ``procrastinate worker --one-shot
--concurrency T`` (T async sub-workers each; jobs kept, as by default).

Its database is a fresh one, named by BENCH_PEERS_PG_DB (run.py picks
``bench_peers_procrastinate_<random>``), on the server of LEASEHOLD_TEST_PG_URL:
created here, ``procrastinate schema --apply``-ed, dropped at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys

import procrastinate
import psycopg
import redis.asyncio
from common import COUNTER, URL, args, drain, report, timed
from psycopg import sql
from psycopg.conninfo import make_conninfo

DB = os.environ.get("BENCH_PEERS_PG_DB", "")
# The server's URL as Leasehold spells it (an SQLAlchemy URL): libpq wants no driver.
ADMIN = os.environ.get("LEASEHOLD_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres").replace(
    "postgresql+psycopg://", "postgresql://", 1
)
PREFIX = "bench_peers_procrastinate_"

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=make_conninfo(ADMIN, dbname=DB)))
_conn = None


@app.task(name="noop")
async def noop():
    # async: procrastinate runs sync tasks in a thread each (asgiref sync_to_async)
    global _conn
    _conn = _conn or redis.asyncio.Redis.from_url(URL)
    await _conn.incr(COUNTER)


def admin(statement: sql.Composable) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(statement)


def main() -> None:
    jobs, procs, threads, timeout = args()
    if not DB.startswith(PREFIX):
        raise SystemExit(f"BENCH_PEERS_PG_DB must name a fresh {PREFIX}* database")
    bin_dir = sys.executable.rsplit("/", 1)[0]
    cli = [f"{bin_dir}/procrastinate", "--app", "peer_procrastinate.app", "--log-level", "warning"]
    admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    try:
        subprocess.run([*cli, "schema", "--apply"], check=True, capture_output=True)

        def enqueue() -> None:
            with app.open():  # sync: a SyncPsycopgConnector's pool
                for i in range(0, jobs, 1000):
                    noop.batch_defer(*[{} for _ in range(min(1000, jobs - i))])

        enq = timed(enqueue)
        worker = [*cli, "worker", "--one-shot", "--concurrency", str(threads)]
        # P independent worker processes (procrastinate has no multi-process mode)
        # under one shell, all in the process group that drain() stops.
        cmd = ["sh", "-c", f'for i in $(seq {procs}); do "$@" & done; wait', "sh", *worker]
        report({"enqueue_s": enq, **drain(cmd, jobs, timeout), "workers": f"{procs} procs x {threads} async"})
    finally:
        admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))


if __name__ == "__main__":
    import peer_procrastinate  # tasks must be named peer_procrastinate.*, not __main__.*

    peer_procrastinate.main()
