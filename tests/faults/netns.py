"""Hosts made of Linux network namespaces, for the many-hosts fault test.

``Network`` builds a bridge in the root namespace (the store's side of the
network, address ``10.201.<k>.1/24``) and one namespace a host, each with a
veth pair to the bridge and an address of its own (``10.201.<k>.<11+i>``),
its loopback up. A process started through ``Host.prefix`` runs in the
host's namespace with its own host name (``unshare --uts``), as on a machine
of its own; it shares the file system with the test. ``cut`` and ``restore``
take a host's link down and up again (its root-side veth end): packets to
and from it are dropped while it is down, as on a pulled cable.

Names carry the test process's pid, so two runs never collide; ``close``
deletes every namespace and link it made, whatever state they are in.
Everything here needs root (``missing`` says why it cannot run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

#: Commands the namespaces need.
TOOLS = ("ip", "unshare", "hostname")


def missing() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        return f"needs {', '.join(absent)} on PATH"
    probe = f"lh-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", *(("netns", "exec", netns, "ip") if netns else ()), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done


def _free_subnet(pid: int) -> int:
    """A ``10.201.<n>.0/24`` no address of the root namespace is in (from one
    chosen by ``pid``, so two runs at once start apart)."""
    used = _ip("-o", "-4", "addr", "show").stdout
    for step in range(200):
        n = 16 + (pid + step) % 200
        if f" 10.201.{n}." not in used:
            return n
    raise RuntimeError("no free 10.201.<n>.0/24 subnet")


@dataclass(frozen=True, slots=True)
class Host:
    """One namespace: its host name, namespace, address and root-side link."""

    hostname: str
    netns: str
    address: str
    root_link: str

    def prefix(self) -> list[str]:
        """The command prefix that runs a program on this host (then its argv)."""
        return [
            "ip", "netns", "exec", self.netns,
            "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname,
        ]  # fmt: skip


class Network:
    """A bridge and ``names`` hosts on it (see the module docstring)."""

    def __init__(self, names: list[str]) -> None:
        pid = os.getpid()
        self.subnet = _free_subnet(pid)  # 10.201.<subnet>.0/24, private to this run
        self.bridge = f"lh{pid}br"
        self.bridge_address = f"10.201.{self.subnet}.1"
        self.hosts = [
            Host(name, f"lh-{pid}-{name}", f"10.201.{self.subnet}.{11 + i}", f"lh{pid}h{i}")
            for i, name in enumerate(names)
        ]
        self._made_bridge = False

    def open(self) -> None:
        """Make the bridge, the namespaces and their links (raises RuntimeError)."""
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        _ip("addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for host in self.hosts:
            inner = f"{host.root_link}n"
            _ip("netns", "add", host.netns)
            _ip("link", "set", "lo", "up", netns=host.netns)
            _ip("link", "add", host.root_link, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", host.netns)
            _ip("link", "set", host.root_link, "master", self.bridge)
            _ip("link", "set", host.root_link, "up")
            _ip("addr", "add", f"{host.address}/24", "dev", inner, netns=host.netns)
            _ip("link", "set", inner, "up", netns=host.netns)

    def cut(self, host: Host) -> None:
        """Take ``host``'s link down: nothing gets through until ``restore``."""
        _ip("link", "set", host.root_link, "down")

    def restore(self, host: Host) -> None:
        _ip("link", "set", host.root_link, "up")

    def close(self) -> None:
        """Delete every namespace and link of this network (never raises)."""
        for host in self.hosts:
            _ip("link", "del", host.root_link, check=False)  # its peer goes with it
            _ip("netns", "del", host.netns, check=False)
        if self._made_bridge:
            _ip("link", "del", self.bridge, check=False)
