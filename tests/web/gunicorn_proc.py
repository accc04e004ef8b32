"""The web app under a real gunicorn, for the API tests and bench/api_enqueue.py.

``Gunicorn(store_url, workers=4)`` starts ``gunicorn -c gunicorn.conf.py wsgi:app``
(or another ``app``, e.g. the benches' ``bench.bare_app:app``) on a free
loopback port in its own process group, waits for /healthz, and on exit
stops it (SIGTERM, then SIGKILL of its group after a grace period), so
nothing outlives the test.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")
OPERATOR_TOKEN = "op-token"
VIEWER_TOKEN = "view-token"
TOKENS = f"{OPERATOR_TOKEN}:operator:gunicorn-test,{VIEWER_TOKEN}:viewer"
#: Generous: other suites may share this machine's two cores.
START_TIMEOUT_S = 90.0
STOP_GRACE_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gunicorn:
    """A gunicorn serving the app on ``store_url``; use as a context manager."""

    def __init__(
        self,
        store_url: str,
        log_path: Path,
        workers: int = 4,
        threads: int = 4,
        access_log: bool = True,
        app: str = "wsgi:app",
    ) -> None:
        self.port = free_port()
        self.log_path = log_path
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "LEASEHOLD_STORE_URL": store_url,
            "LEASEHOLD_API_TOKENS": TOKENS,
            "LEASEHOLD_SECRET_KEY": "gunicorn-test-secret-0123456789abcdef0123456789",
            "LEASEHOLD_WEB_BIND": f"127.0.0.1:{self.port}",
            "LEASEHOLD_WEB_WORKERS": str(workers),
            "LEASEHOLD_WEB_THREADS": str(threads),
            "LEASEHOLD_WEB_ACCESSLOG": "-" if access_log else "off",
        }
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [GUNICORN, "-c", "gunicorn.conf.py", app],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = OPERATOR_TOKEN,
        timeout: float = 30.0,
    ) -> tuple[int, dict[str, str], Any]:
        """One request on a new connection: (status, headers, parsed JSON or text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            kind = response.getheader("Content-Type", "")
            parsed = json.loads(raw) if "json" in kind else raw.decode()
            return response.status, dict(response.getheaders()), parsed
        finally:
            conn.close()

    def wait_healthy(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                if self.request("GET", "/healthz", token=None, timeout=2)[0] == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"gunicorn did not become healthy in {timeout:g}s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(STOP_GRACE_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group this Popen created: its workers
        self.proc.wait(5)
        self._log.close()

    def __enter__(self) -> Gunicorn:
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
