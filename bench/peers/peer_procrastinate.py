"""procrastinate: PostgreSQL (psycopg 3). ``defer()`` per job; bulk
``batch_defer`` of BULK_CHUNK jobs (one INSERT each); P processes of
``procrastinate worker --concurrency T`` (it has no multi-process mode; an
``async def`` task, so T async sub-workers a process; jobs kept, its default).

Its database is a fresh one, named by BENCH_PEERS_PG_DB (run.py picks
``bench_peers_procrastinate_<random>``), on the server of LEASEHOLD_TEST_PG_URL:
created here, ``procrastinate schema --apply``-ed, dropped at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import common
import procrastinate
import psycopg
import redis.asyncio
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


def _redis():
    global _conn
    _conn = _conn or redis.asyncio.Redis.from_url(common.URL)
    return _conn


# async: procrastinate runs sync tasks in a thread each (asgiref sync_to_async)
@app.task(name="noop")
async def noop():
    await _redis().incr(common.COUNTER)


@app.task(name="stamp")
async def stamp(seq):
    await _redis().rpush(common.TIMES, f"{seq} {time.time()!r}")


def admin(statement: sql.Composable, dbname: str | None = None) -> None:
    conninfo = make_conninfo(ADMIN, dbname=dbname) if dbname else ADMIN
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(statement)


class Procrastinate(common.System):
    name = "procrastinate"
    server = "postgresql"
    DEFAULT = {"p": 2, "c": 8}
    SWEEP = [{"p": 1, "c": 8}, {"p": 2, "c": 8}, {"p": 2, "c": 32}, {"p": 1, "c": 32}]
    BULK = "Task.batch_defer"

    def __enter__(self):
        if not DB.startswith(PREFIX):
            raise SystemExit(f"BENCH_PEERS_PG_DB must name a fresh {PREFIX}* database")
        admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
        subprocess.run([*self.cli(), "schema", "--apply"], check=True, capture_output=True)
        self.opened = app.open()  # sync: a SyncPsycopgConnector's pool
        self.opened.__enter__()
        return self

    def __exit__(self, *exc):
        self.opened.__exit__(None, None, None)
        admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB)))

    def cli(self):
        bin_dir = sys.executable.rsplit("/", 1)[0]
        return [f"{bin_dir}/procrastinate", "--app", "peer_procrastinate.app", "--log-level", "warning"]

    def worker(self, config):
        one = [*self.cli(), "worker", "--concurrency", str(config["c"])]
        return ["sh", "-c", f'for i in $(seq {config["p"]}); do "$@" & done; wait', "sh", *one]

    def worker_env(self):
        return dict(super().worker_env(), BENCH_PEERS_PG_DB=DB)

    def describe(self, config):
        return f"{config['p']} × procrastinate worker --concurrency {config['c']}"

    def enqueue_one(self, seq):
        noop.defer() if seq is None else stamp.defer(seq=seq)

    def enqueue_bulk(self, n):
        for i in range(0, n, common.BULK_CHUNK):
            noop.batch_defer(*[{} for _ in range(min(common.BULK_CHUNK, n - i))])

    def reset(self):
        super().reset()
        admin(sql.SQL("TRUNCATE procrastinate_jobs CASCADE"), DB)


if __name__ == "__main__":
    import peer_procrastinate  # tasks must be named peer_procrastinate.*, not __main__.*

    common.main(peer_procrastinate.Procrastinate)
