"""The wheel as a user installs it: built from the checkout, installed with pip into a fresh virtual
environment outside the repository (dependencies from the index this machine
is configured with), then driven from an empty directory with a clean
environment (no LEASEHOLD_SECRET_KEY, nothing of the checkout on the path).

Slow: building and installing take about a minute."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

from store import open_store
from tests import readme_quickstart as quick

#: Building and installing the wheel (the session fixture) counts toward the first test's timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
HTMX = REPO / "static" / "vendor" / "htmx.min.js"
INSTALL_TIMEOUT_S = 600

HANDLERS = """
from workers import handler


@handler("add", queue="math")
def add(ctx):
    return {"sum": ctx.payload["a"] + ctx.payload["b"]}
"""


class Installed:
    """A venv with the wheel installed, an empty working folder and a handler module."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root = root
        self.wheel = wheel
        self.bin = root / "venv" / "bin"
        self.empty = root / "empty"
        self.handlers = root / "handlers"

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment: no LEASEHOLD_*, no PYTHONPATH but the handler folder."""
        keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_CONFIG_FILE", "SSL_CERT_FILE")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env["PATH"] = f"{self.bin}{os.pathsep}/usr/bin{os.pathsep}/bin"
        env["PYTHONPATH"] = str(self.handlers)
        env["LEASEHOLD_HANDLERS"] = "myjobs"
        env.update(extra)
        return env

    def run(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), cwd=self.empty, env=self.env(**env), capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    assert HTMX.is_file(), "static/vendor/htmx.min.js is missing: run `make assets` first"
    root = tmp_path_factory.mktemp("wheel")
    assert not root.resolve().is_relative_to(REPO)
    dist = root / "dist"
    # setuptools builds in the checkout's build/ (ignored by git); a stale copy there of
    # a module since removed would end up in the wheel, so start from none.
    shutil.rmtree(REPO / "build", ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
        capture_output=True,
    )
    [wheel] = dist.glob("leasehold-*.whl")
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(root / "venv")
    box = Installed(root, wheel)
    done = subprocess.run(
        [str(box.bin / "python"), "-m", "pip", "install", "-q", str(wheel)],
        env={**box.env(), "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    box.empty.mkdir()
    box.handlers.mkdir()
    (box.handlers / "myjobs.py").write_text(HANDLERS)
    return box


def test_the_wheel_carries_lua_migrations_templates_static_and_htmx(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for name in (
        "store/redis/lua/claim.lua",
        "store/redis/lua/lib/job.lua",
        "store/sql/migrations/env.py",
        "store/sql/migrations/script.py.mako",
        "store/sql/migrations/versions/0001_initial.py",
        "webapp/templates/base.html",
        "webapp/templates/partials/jobs_table.html",
        "webapp/static/console.css",
        "webapp/static/vendor/htmx.min.js",
        "webapp/gunicorn_conf.py",
        "leasehold/wsgi.py",
        "workers/demo.py",
        "workers/demo_handlers.py",
    ):
        assert name in names, name
    assert not any(n.startswith(("tests/", "bench/")) for n in names)


def test_db_upgrade_enqueue_worker_stats_from_an_empty_folder(installed: Installed) -> None:
    (installed.root / "data").mkdir()
    url = f"sqlite:///{installed.root / 'data' / 'jobs.db'}"
    upgraded = installed.run("leasehold", "db", "upgrade", LEASEHOLD_STORE_URL=url).stdout
    assert upgraded.startswith("created the schema at revision ")
    enqueued = installed.run(
        "leasehold", "enqueue", "add", "--payload", '{"a": 2, "b": 3}', LEASEHOLD_STORE_URL=url
    )
    assert enqueued.returncode == 0, enqueued.stderr
    job_id = enqueued.stdout.strip()

    worker = installed.run("leasehold", "worker", "--burst", "--queues", "math", LEASEHOLD_STORE_URL=url)
    assert worker.returncode == 0, worker.stderr

    stats = installed.run("leasehold", "stats", "--json", LEASEHOLD_STORE_URL=url)
    assert stats.returncode == 0, stats.stderr
    data = json.loads(stats.stdout)
    assert data["counts"]["Completed"] == 1 and data["queues"] == {"math": {"Completed": 1}}
    with open_store(url) as store:
        job = store.get(job_id)
        assert (job.status.name, job.result) == ("Completed", {"sum": 5})
    assert list(installed.empty.iterdir()) == []  # nothing written where the user stood


def test_the_installed_app_reads_nothing_from_the_checkout(installed: Installed) -> None:
    (installed.root / "probe").mkdir()
    url = f"sqlite:///{installed.root / 'probe' / 'jobs.db'}"
    probe = (
        "import json, webapp, store, workers\n"
        "from webapp import create_app\n"
        "from webapp.console.blueprint import TEMPLATES, bp\n"
        f"app = create_app({{'TESTING': True, 'SECRET_KEY': 'k', 'STORE_URL': {url!r}}})\n"
        "client = app.test_client()\n"
        "print(json.dumps({'files': [webapp.__file__, store.__file__, workers.__file__,\n"
        "  TEMPLATES, bp.static_folder],\n"
        "  'login': client.get('/login').status_code,\n"
        "  'htmx': client.get('/static/vendor/htmx.min.js').status_code}))\n"
    )
    done = installed.run("python", "-c", probe)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    site = installed.root / "venv"
    assert all(Path(f).resolve().is_relative_to(site) for f in data["files"]), data["files"]
    assert (data["login"], data["htmx"]) == (200, 200)


def test_leasehold_web_serves_with_the_packaged_gunicorn_config(installed: Installed) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (installed.root / "web").mkdir()
    url = f"sqlite:///{installed.root / 'web' / 'jobs.db'}"
    assert installed.run("leasehold", "db", "upgrade", LEASEHOLD_STORE_URL=url).returncode == 0
    missing = installed.run("leasehold", "web", LEASEHOLD_STORE_URL=url)
    assert missing.returncode != 0 and "LEASEHOLD_SECRET_KEY" in missing.stderr
    proc = subprocess.Popen(
        [str(installed.bin / "leasehold"), "web", "--bind", f"127.0.0.1:{port}"],
        cwd=installed.empty,
        env=installed.env(
            LEASEHOLD_STORE_URL=url,
            LEASEHOLD_SECRET_KEY="wheel-test-secret-0123456789abcdef0123456789",
            LEASEHOLD_WEB_WORKERS="1",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline, status = time.monotonic() + 60, None
        while status is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                    status = answer.status
            except OSError:
                time.sleep(0.2)
        assert status == 200
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()  # type: ignore[union-attr]


def test_version(installed: Installed) -> None:
    done = installed.run("leasehold", "--version")
    assert (done.returncode, done.stdout) == (0, "leasehold 0.1.0\n")


def test_a_misspelled_setting_stops_with_the_closest_match(installed: Installed) -> None:
    for args in (["stats"], ["worker", "--burst"], ["web"]):
        done = installed.run("leasehold", *args, LEASEHOLD_STORE_ULR="redis://127.0.0.1:6379/0")
        assert done.returncode == 1, done.stdout
        assert done.stderr.splitlines() == [
            "Error: unknown setting LEASEHOLD_STORE_ULR (did you mean LEASEHOLD_STORE_URL?)"
        ], args
    assert list(installed.empty.iterdir()) == []  # no default SQLite file made


def test_a_missing_schema_and_folder_are_named(installed: Installed) -> None:
    (installed.root / "noschema").mkdir()
    url = f"sqlite:///{installed.root / 'noschema' / 'jobs.db'}"
    for args in (["stats"], ["enqueue", "add"], ["queue", "list"]):
        done = installed.run("leasehold", *args, LEASEHOLD_STORE_URL=url)
        assert (done.returncode, done.stderr) == (
            1,
            f"Error: {url} has no Leasehold schema: run leasehold db upgrade\n",
        )
    missing = installed.root / "nonexistent" / "dir"
    done = installed.run("leasehold", "db", "upgrade", LEASEHOLD_STORE_URL=f"sqlite:///{missing}/x.db")
    assert done.returncode == 1 and "does not exist" in done.stderr
    assert not missing.parent.exists()


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_leasehold_demo_runs_from_an_empty_folder_and_stops_on_ctrl_c(installed: Installed) -> None:
    import signal
    import socket
    import threading
    import uuid

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    marker = f"demo-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [
            str(installed.bin / "leasehold"),
            "demo",
            "--port",
            str(port),
            "--limit",
            "20",
            "--kill-after",
            "600",
        ],
        cwd=installed.empty,
        env=installed.env(LEASEHOLD_TEST_PROC_MARKER=marker),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    status = None
    try:
        deadline = time.monotonic() + 120  # four processes start on a loaded machine
        while not any("Ctrl-C stops" in line for line in lines) and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=10) as answer:
                status = answer.status
        except OSError as exc:
            lines.append(f"[test] /login: {exc}\n")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        reader.join(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
    out = "".join(lines)
    assert status == 200, out[-3000:]
    assert proc.returncode == 0, out[-3000:]
    assert "Leasehold demo: http://127.0.0.1:" in out and "Stopping" in out
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == []
    assert list(installed.empty.iterdir()) == []


def test_the_readme_quick_start_verbatim(installed: Installed) -> None:
    """The README's handler module and its ``leasehold`` commands, as written there."""
    root = installed.root / "quick"
    root.mkdir()
    quick.write_app(root)
    url = f"sqlite:///{root / 'jobs.db'}"
    outputs = {}
    for words in quick.commands():
        done = installed.run(
            *words, LEASEHOLD_STORE_URL=url, LEASEHOLD_HANDLERS="myapp.jobs", PYTHONPATH=str(root)
        )
        assert done.returncode == 0, (words, done.stderr)
        outputs[words[1]] = done.stdout
    assert json.loads(outputs["stats"])["queues"] == {"billing": {"Completed": 1}}
    with open_store(url) as store:
        assert store.get(outputs["enqueue"].strip()).status.name == "Completed"
