"""Leasehold side by side with huey, dramatiq, rq, celery, arq and procrastinate:
single and bulk enqueue, drain, latency with idle workers,
CPU per job and worker RSS, in one run, with ratios and every speed target.

    make bench-peers            # creates bench/.peers-venv, then runs this with --sweep
    .venv/bin/python -m bench.peers.run [--runs 3] [--jobs 10000] [--single 2000] [--bulk 20000]
        [--latency-jobs 150] [--gap-ms 100] [--sweep] [--sweep-jobs 5000] [--features both|on|off]
        [--systems leasehold-redis,leasehold-postgresql,leasehold-sqlite,huey,dramatiq,rq,celery,arq,
                   procrastinate]
        [--timeout 180] [--api] [--quick] [--json FILE]

Every system runs in a process of its own (the peers in bench/.peers-venv, arq
in bench/.peers-venv/arq, Leasehold in the main venv) through the same
measurement code (``common.py``: what is measured and how). The runs are
interleaved: run 1 of every system, then run 2, and so on, so that a change
in the machine's load falls on all of them alike. ``--sweep`` first drains
``--sweep-jobs`` once with each configuration of a system's SWEEP list and
keeps the fastest; without it each system runs its DEFAULT (huey ``-k process
-w 2``, dramatiq ``-p 2 -t 32``, ...). Leasehold's drain runs with every
feature on (``leasehold.py``) and, with ``--features both``, also plain;
on SQLite only the drain runs (no peer of it: its worker RSS is the target),
in its DEFAULT configuration.

``--api`` then runs bench/api_enqueue.py (POST /api/jobs under gunicorn.conf.py
against a bare Flask endpoint, on SQLite, PostgreSQL and Redis) and takes its
ratios into the summary: every speed target, MET or NOT MET with the figures
it was decided on.

Peers use BENCH_PEERS_REDIS_URL (default redis://127.0.0.1:6379/13), which must
be empty at start (the run refuses otherwise) and is FLUSHDB-ed after each
system's run. procrastinate gets a fresh database ``bench_peers_procrastinate_<random>``
on LEASEHOLD_TEST_PG_URL's server (dropped afterwards; here too should its
script die). Leasehold's stores are fresh key prefixes / databases, removed after.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

from bench.peers import table
from bench.peers.common import URL as PEERS_URL
from bench.report import commit
from bench.stores import server_versions

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

MAIN_PY = sys.executable
VENV_PY = REPO / "bench" / ".peers-venv" / "bin" / "python"
ARQ_PY = REPO / "bench" / ".peers-venv" / "arq" / "bin" / "python"
INSTALLED = REPO / "bench" / ".peers-venv" / "installed"
#: name -> (script, interpreter, constructor arguments, package that must be installed)
SYSTEMS = {
    "leasehold-redis": ("leasehold.py", MAIN_PY, {"kind": "redis"}, None),
    "leasehold-postgresql": ("leasehold.py", MAIN_PY, {"kind": "postgresql"}, None),
    "leasehold-sqlite": ("leasehold.py", MAIN_PY, {"kind": "sqlite"}, None),
    "huey": ("peer_huey.py", VENV_PY, {}, "huey"),
    "dramatiq": ("peer_dramatiq.py", VENV_PY, {}, "dramatiq"),
    "rq": ("peer_rq.py", VENV_PY, {}, "rq"),
    "rq-fork": ("peer_rq.py", VENV_PY, {"kind": "fork"}, "rq"),
    "celery": ("peer_celery.py", VENV_PY, {}, "celery"),
    "arq": ("peer_arq.py", ARQ_PY, {}, "arq"),
    "procrastinate": ("peer_procrastinate.py", VENV_PY, {}, "procrastinate"),
}
DEFAULT_SYSTEMS = [s for s in SYSTEMS if s != "rq-fork"]  # a fork per job: ~100 jobs/s, minutes a run
#: Leasehold's Redis stores (fresh key prefixes, removed after): a database of their own on the
#: peers' server, so that removing a prefix (a SCAN) does not walk keys others left in database 0.
LEASEHOLD_REDIS_URL = os.environ.get("BENCH_PEERS_LEASEHOLD_REDIS_URL", PEERS_URL.rsplit("/", 1)[0] + "/12")
PG_PREFIX = "bench_peers_procrastinate_"  # the only databases a peer creates (and drops)
MEASURES = ["single", "bulk", "drain", "latency"]
#: Systems measured by their drain alone (no peer of theirs runs) and never swept.
DRAIN_ONLY = {"leasehold-sqlite"}
FULL = dict(
    runs=3, jobs=10_000, single=1000, bulk=20_000, latency_jobs=150, gap_ms=100.0, cap_s=15.0,
    sweep_jobs=3000, sweep_cap_s=4.0,
)  # fmt: skip
QUICK = dict(
    runs=1, jobs=2000, single=300, bulk=2000, latency_jobs=20, gap_ms=50.0, cap_s=5.0,
    sweep_jobs=1000, sweep_cap_s=2.0,
)  # fmt: skip
PEER_PACKAGES = ["huey", "dramatiq", "rq", "celery", "kombu", "procrastinate", "psycopg", "redis", "hiredis"]


def log(text: str) -> None:
    print(f"# {text}", file=sys.stderr, flush=True)


def check_empty(conn: redis.Redis) -> None:
    if n := conn.dbsize():
        raise SystemExit(
            f"refusing to run: {PEERS_URL} holds {n} keys; point BENCH_PEERS_REDIS_URL at an empty database"
        )


def drop_pg_db(name: str) -> None:
    """DROP one database this run named (never any other) on LEASEHOLD_TEST_PG_URL's server."""
    import psycopg
    from psycopg import sql

    assert name.startswith(PG_PREFIX)
    admin = os.environ["LEASEHOLD_TEST_PG_URL"].replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as pg:
        pg.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def unavailable(name: str) -> str | None:
    """Why ``name`` cannot run here (None: it can)."""
    _script, python, _args, package = SYSTEMS[name]
    installed = INSTALLED.read_text().split() if INSTALLED.exists() else []
    if package and (not Path(python).exists() or package not in installed):
        return f"{package} not installed (bench/peers/setup.sh)"
    if ("postgresql" in name or name == "procrastinate") and not os.environ.get("LEASEHOLD_TEST_PG_URL"):
        return 'LEASEHOLD_TEST_PG_URL not set (eval "$(scripts/services.sh)")'
    return None


def system_command(name: str, spec: dict, env: dict[str, str]) -> tuple[list[str], Path, dict[str, str]]:
    """How to start one run of ``name``: argv, working directory, environment.

    Leasehold runs as ``python -m bench.peers.leasehold`` from the repository,
    in its own venv. A peer runs in the peers' venv as a script of this folder,
    which is on its PYTHONPATH: its consumers import its task module under its
    own top-level name (``peer_huey.*``), as a user's project would."""
    script, python, _args, _package = SYSTEMS[name]
    if name.startswith("leasehold"):
        module = f"bench.peers.{Path(script).stem}"
        # bench/peers on the path too: the instructions measure imports its modules top-level
        path = os.pathsep.join(p for p in (str(REPO), str(HERE), env.get("PYTHONPATH", "")) if p)
        return [str(python), "-m", module, json.dumps(spec)], REPO, dict(env, PYTHONPATH=path)
    return [str(python), str(HERE / script), json.dumps(spec)], HERE, dict(env, PYTHONPATH=str(HERE))


def run_system(name: str, spec: dict, conn: redis.Redis) -> dict:
    """One process of ``name`` running ``spec``; its RESULT, or {"failed": why}."""
    args = SYSTEMS[name][2]
    check_empty(conn)
    env = dict(os.environ, BENCH_PEERS_REDIS_URL=PEERS_URL)
    pg_db = None
    if name.startswith("leasehold"):
        env["LEASEHOLD_TEST_REDIS_URL"] = LEASEHOLD_REDIS_URL
    if name == "procrastinate":
        pg_db = env["BENCH_PEERS_PG_DB"] = f"{PG_PREFIX}{uuid.uuid4().hex[:10]}"
    spec = dict(spec, system_args={**args, **spec.get("system_args", {})})
    budget = spec["timeout"] * 3 + 120
    try:
        argv, cwd, env = system_command(name, spec, env)
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=budget, env=env)
    except subprocess.TimeoutExpired:
        return {"failed": f"no result within {budget:.0f} s"}
    finally:
        conn.flushdb()  # only the peers' database, checked empty before the run
        if pg_db:
            drop_pg_db(pg_db)  # normally already dropped by the peer's script
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {"failed": f"exit {out.returncode}: {tail[:300]}"}


def record(res: table.Results, name: str, result: dict, note: str = "") -> None:
    """Add one run's figures of ``name`` to ``res`` (``note``: added to its drain configuration)."""
    config = result.get("config", "")
    if "failed" in result:
        for metric in ("enqueue, single", "drain", "latency p50"):
            res.error(metric, name, result["failed"])
        return
    for key, metric in (("single", "enqueue, single"), ("bulk", "enqueue, bulk")):
        if key in result:
            what = "one job a call" if key == "single" else result["bulk_api"] + ", 1,000 a call"
            res.add(metric, name, result[key], what)
    if drain := result.get("drain"):
        timed = f", {drain['jobs_timed']:,} jobs timed" if drain.get("jobs_timed") else ""
        res.add("drain", name, drain["rate_steady"], config + note + timed)
        res.add("worker CPU per job", name, drain["cpu_us"], "worker processes, drain span")
        if drain["server_cpu_us"] == drain["server_cpu_us"]:  # NaN: a store with no server (SQLite)
            res.add("store server CPU per job", name, drain["server_cpu_us"], "whole server, drain span")
        res.add("worker peak RSS", name, drain["rss_mb"], "largest worker process, drain")
    if ms := result.get("latency_ms"):
        cuts = statistics.quantiles(ms, n=100, method="inclusive")
        res.add("latency p50", name, cuts[49], config + ", idle")
        res.add("latency p99", name, cuts[98], config + ", idle")
    for key, text in result.get("errors", {}).items():
        res.error({"single": "enqueue, single", "bulk": "enqueue, bulk"}.get(key, key), name, text)


def sweep(name: str, args: argparse.Namespace, conn: redis.Redis, lines: list[str]) -> dict | None:
    """The fastest configuration of ``name``'s SWEEP (one drain of --sweep-jobs each)."""
    listing = run_system(name, {"list_sweep": True, "timeout": 60}, conn)
    configs = listing.get("sweep")
    if not configs:
        lines.append(f"{name}: no sweep ({listing.get('failed', 'no SWEEP list')})")
        return None
    best, best_rate = None, 0.0
    for config in configs:
        spec = {"measures": ["drain"], "jobs": args.sweep_jobs, "timeout": args.timeout, "config": config}
        spec["cap_s"] = args.sweep_cap_s
        result = run_system(name, spec, conn)
        drain = result.get("drain")
        rate = drain["rate_steady"] if drain else 0.0
        what = result.get("config", json.dumps(config))
        text = f"{rate:,.0f} jobs/s" if drain else f"failed: {result.get('failed') or result.get('errors')}"
        log(f"sweep {name}: {what}: {text}")
        lines.append(f"{name}: {what}: {text}")
        if rate > best_rate:
            best, best_rate = config, rate
    return best


def versions() -> str:
    """Versions of every peer library (as installed in the peers' venvs) and of Leasehold's clients."""
    code = (
        "import importlib.metadata as m, json, sys; out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try: out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    parts = []
    for label, python, packages in (
        ("peers", VENV_PY, PEER_PACKAGES),
        ("arq venv", ARQ_PY, ["arq", "redis"]),
        ("leasehold", MAIN_PY, ["redis", "hiredis", "SQLAlchemy", "psycopg", "orjson"]),
    ):
        if not Path(python).exists():
            continue
        got = subprocess.run([str(python), "-c", code, *packages], capture_output=True, text=True)
        found = json.loads(got.stdout or "{}")
        parts.append(f"{label}: " + ", ".join(f"{k} {v}" for k, v in found.items()))
    return "; ".join(parts)


def api_section(args: argparse.Namespace) -> tuple[list[str], list[dict]]:
    """bench/api_enqueue.py's own lines (the API against a bare Flask endpoint on the
    same gunicorn), run as it is, and its ratios; or why it did not run."""
    sizes = ["--requests", "300", "--rounds", "1"] if args.quick else []
    with tempfile.TemporaryDirectory(prefix="lh-peers-api-") as tmp:
        out_json = Path(tmp) / "api.json"
        shown = ["-m", "bench.api_enqueue", "--stores", "sqlite,postgresql,redis", "--routes", "jobs", *sizes]
        shown += shlex.split(args.api_args)
        log(f"API: {shlex.join(shown)}")
        try:
            out = subprocess.run(
                [MAIN_PY, *shown, "--json", str(out_json)],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=1800,
            )
        except subprocess.TimeoutExpired:
            return ["# API: no result within 30 min"], []
        if out.returncode != 0:
            why = (out.stderr.strip().splitlines() or ["?"])[-1][:300]
            return [f"# API: {shlex.join(shown)} failed: {why}"], []
        rows = json.loads(out_json.read_text()) if out_json.exists() else []
    return [f"## API: `python {shlex.join(shown)}`", "", *out.stdout.rstrip().splitlines()], rows


def summary(res: table.Results, api: list[dict] | None) -> list[str]:
    """Every speed target, MET / NOT MET / not run, with the figures it was decided on."""
    lines = ["## Speed targets", ""]
    for target, text, met, figures in table.verdicts(res):
        verdict = {"yes": "MET", "NO": "NOT MET"}.get(met, met)
        lines.append(f"#   {verdict:<8} {target.metric}, {target.system} ({text}): {figures}")
    if api is None:
        lines.append(
            "#   not run  POST /api/jobs ≥ 0.6 / 0.5 / 0.35× bare Flask (Redis / PostgreSQL / SQLite): --api"
        )
    elif not api:
        lines.append(
            "#   not run  POST /api/jobs against bare Flask: bench/api_enqueue.py gave no result (above)"
        )
    for row in api or []:
        verdict = "MET" if row["ratio"] >= row["target"] and "error" not in row else "NOT MET"
        lines.append(
            f"#   {verdict:<8} POST /api/jobs, leasehold-{row['store']} (≥ {row['target']:g}× bare Flask): "
            f"{row['ratio']:.2f}× ({row['leasehold']:,.0f} / {row['bare']:,.0f} req/s)"
            + (f"; {row['error']}" if "error" in row else "")
        )
    return lines


def header(args: argparse.Namespace) -> list[str]:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    servers = "; ".join(server_versions(["postgresql", "redis"]).values())
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return [
        f"# Leasehold and its peers side by side, {now}",
        f"# command: {shlex.join([Path(sys.executable).name, *sys.argv])}",
        f"# commit: {commit()}",
        f"# machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"{platform.python_implementation()} {platform.python_version()}; load average at start {load}",
        f"# servers: {servers}; peers on {PEERS_URL}, Leasehold's Redis stores on {LEASEHOLD_REDIS_URL}",
        f"# versions: {versions()}",
        f"# sizes: {args.runs} runs (interleaved), medians; single enqueue {args.single:,}, "
        f"bulk {args.bulk:,}, "
        f"drain {args.jobs:,} no-op jobs (a peer's timed for at most {args.cap_s:g} s), "
        f"latency {args.latency_jobs} jobs 0–{args.gap_ms:g} ms apart; "
        f"workers (processes × threads) per system in the configuration column"
        + ("" if args.sweep else " (each system's DEFAULT: no --sweep)"),
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS), help="of " + ",".join(SYSTEMS))
    parser.add_argument("--features", choices=["both", "on", "off"], default="both", help="Leasehold's drain")
    parser.add_argument("--sweep", action="store_true", help="pick each system's fastest drain configuration")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a drain may take")
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 run: a smoke run")
    parser.add_argument("--api", action="store_true", help="also run bench/api_enqueue.py, print its table")
    parser.add_argument("--api-args", default="", help="extra arguments of bench/api_enqueue.py")
    parser.add_argument("--json", type=Path, default=None, help="also write every result to this file")
    for name, full in FULL.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(full), default=None,
                            help=f"default {full:,} ({QUICK[name]:,} quick)")  # fmt: skip
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.systems = [s for s in args.systems.split(",") if s]
    for name in args.systems:
        if name not in SYSTEMS:
            parser.error(f"unknown system {name!r}; pick from {','.join(SYSTEMS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    conn = redis.Redis.from_url(PEERS_URL)
    check_empty(conn)
    lines = header(args)
    print("\n".join(lines), flush=True)
    t0 = time.perf_counter()
    res, skipped, sweep_lines, raw = table.Results(), [], [], []
    systems = []
    for name in args.systems:
        if why := unavailable(name):
            skipped.append(f"{name}: {why}")
        else:
            systems.append(name)
    configs: dict[str, dict | None] = {}
    for name in systems if args.sweep else []:
        if name not in DRAIN_ONLY:
            configs[name] = sweep(name, args, conn, sweep_lines)
    keys = ("jobs", "single", "bulk", "latency_jobs", "gap_ms", "timeout", "cap_s")
    sizes = {k: getattr(args, k) for k in keys}
    for run in range(1, args.runs + 1):
        for name in systems:
            leasehold = name.startswith("leasehold")
            main_label = name + (table.PLAIN if leasehold and args.features == "off" else "")
            measures = ["drain"] if name in DRAIN_ONLY else MEASURES
            passes = [(main_label, measures, args.features != "off")]
            if leasehold and args.features == "both":
                passes.append((name + table.PLAIN, ["drain"], False))
            for label, measures, features in passes:
                spec = {"measures": measures, "config": configs.get(name), **sizes}
                if leasehold:
                    spec["system_args"] = {"features": features}
                t1 = time.perf_counter()
                result = run_system(name, spec, conn)
                raw.append({"system": label, "run": run, **result})
                note = (", all features on" if features else ", features off") if leasehold else ""
                record(res, label, result, note)
                brief = {k: v for k, v in result.items() if k != "latency_ms"}
                log(f"run {run}/{args.runs} {label} ({time.perf_counter() - t1:.0f} s): {json.dumps(brief)}")
    conn.close()

    extra = [
        ["every figure @1,000,000 finished", "leasehold-*", "make bench-scale (bench/run_all.py --scale)",
         "—", "—", "—", "within 20%", "not run here"],
    ]  # fmt: skip
    print()
    if sweep_lines:
        print(f"## Sweep: one drain of {args.sweep_jobs:,} jobs per configuration; the fastest kept")
        print("\n".join(f"#   {line}" for line in sweep_lines))
        print()
    print(table.table(res, extra))
    for line in skipped:
        print(f"# skipped: {line}")
    api_rows = None
    if args.api:
        api_lines, api_rows = api_section(args)
        print()
        print("\n".join(api_lines))
    print()
    print("\n".join(summary(res, api_rows)))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n# took {(time.perf_counter() - t0) / 60:.1f} min; load average at end {load}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"header": lines, "sweep": sweep_lines, "runs": raw}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
