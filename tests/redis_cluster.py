"""A throwaway 3-master Redis Cluster for the tests.

Started on free loopback ports in a temporary folder (no persistence), its
servers killed by pid afterwards: nothing of another cluster is touched. The
contract suite runs on it as the backend ``redis-cluster`` (tests/conftest.py)
and tests/store/test_redis_cluster.py checks what is particular to it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from tests.backends import delete_redis_prefix

#: Seconds a server, or the cluster's state, may take to come up.
START_TIMEOUT_S = 30.0


def available() -> bool:
    """Whether redis-server and redis-cli are installed."""
    return bool(shutil.which("redis-server") and shutil.which("redis-cli"))


def free_ports(n: int) -> list[int]:
    """``n`` loopback ports that are free, each with its cluster bus port (+10000)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 10000 > 65535 or port in ports:
            continue
        try:
            with socket.socket() as bus:
                bus.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        ports.append(port)
    return ports


def cli(port: int, *args: str) -> str:
    """``redis-cli -p port args...``: its output."""
    done = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout


def _wait(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"cluster: {what}")
        time.sleep(0.1)


def _server_command(port: int, folder: Path, pidfile: Path) -> list[str]:
    """A cluster-enabled, non-persistent, daemonised server on 127.0.0.1:port."""
    return [
        *("redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes"),
        *("--cluster-config-file", str(folder / f"nodes-{port}.conf"), "--dir", str(folder)),
        *("--save", "", "--appendonly", "no", "--daemonize", "yes"),
        *("--pidfile", str(pidfile), "--logfile", str(folder / f"{port}.log")),
    ]


def _stop(pid: int) -> None:
    """Stop one server this module started: SIGTERM, then SIGKILL after 10 s."""
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Cluster:
    """Three masters on free ports of 127.0.0.1, slots spread over them.
    ``stop()`` kills the servers it started. Raises TimeoutError when a
    server or the cluster's state does not come up in START_TIMEOUT_S."""

    def __init__(self, folder: Path) -> None:
        self.ports = free_ports(3)
        self._pids: list[int] = []
        try:
            for port in self.ports:
                pidfile = folder / f"{port}.pid"
                subprocess.run(
                    _server_command(port, folder, pidfile), check=True, timeout=30, stdin=subprocess.DEVNULL
                )
                _wait(lambda p=pidfile: p.exists() and p.read_text().strip(), f"pid file of {port}")
                self._pids.append(int(pidfile.read_text()))
                _wait(lambda p=port: cli(p, "ping").strip() == "PONG", f"server on {port}")
            nodes = [f"127.0.0.1:{port}" for port in self.ports]
            subprocess.run(
                ["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
            for port in self.ports:
                _wait(
                    lambda p=port: "cluster_state:ok" in cli(p, "cluster", "info"), f"cluster state on {port}"
                )
        except BaseException:
            self.stop()
            raise

    def url_with_prefix(self) -> tuple[str, str]:
        """A ``redis+cluster://`` URL with a fresh ``prefix``, and that prefix."""
        prefix = f"lh-cluster-{uuid.uuid4().hex[:10]}"
        return f"redis+cluster://127.0.0.1:{self.ports[0]}?prefix={quote(prefix)}", prefix

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key of one test prefix (one hash tag: one master's), on
        every master."""
        for port in self.ports:
            delete_redis_prefix(f"redis://127.0.0.1:{port}/0", prefix)

    def stop(self) -> None:
        for pid in self._pids:
            _stop(pid)
        self._pids = []
