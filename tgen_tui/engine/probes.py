"""Probes the engine samples next to the worker counters: interfaces, CPU and the DUT.

All of them are blocking reads, so the engine calls them through ``trio.to_thread`` and a
slow probe never stalls sampling. File descriptors are opened once inside the right
network namespace (a short-lived thread does ``setns``) and then re-read with
``pread``: a few microseconds a call, no process spawned.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from dataclasses import dataclass

import psutil

CT_COUNT = "/proc/sys/net/netfilter/nf_conntrack_count"
CT_MAX = "/proc/sys/net/netfilter/nf_conntrack_max"


def _open_in_netns(netns: str | None, path: str) -> int:
    """Open ``path`` with the calling thread inside ``netns`` (a /proc/net or /proc/sys file binds to it)."""
    if netns is None:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    from tgen_tui.lab.commands import in_netns

    return in_netns(netns, lambda: os.open(path, os.O_RDONLY | os.O_CLOEXEC))


def _pread_all(fd: int) -> str:
    chunks = []
    off = 0
    while True:
        b = os.pread(fd, 65536, off)
        if not b:
            break
        chunks.append(b)
        off += len(b)
    return b"".join(chunks).decode()


@dataclass(frozen=True)
class IfCounters:
    rx_bytes: int
    rx_packets: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_dropped: int


class InterfaceProbe:
    """Kernel interface counters (``/proc/net/dev`` of the port's namespace) and link state."""

    def __init__(self) -> None:
        self._fds: dict[str | None, int] = {}
        self._lock = threading.Lock()

    def read(self, netns: str | None) -> dict[str, IfCounters]:
        with self._lock:
            fd = self._fds.get(netns)
            if fd is None:
                fd = self._fds[netns] = _open_in_netns(netns, "/proc/thread-self/net/dev")
        text = _pread_all(fd)
        out = {}
        for line in text.splitlines()[2:]:
            name, _, rest = line.partition(":")
            f = rest.split()
            if len(f) >= 16:
                out[name.strip()] = IfCounters(
                    int(f[0]), int(f[1]), int(f[3]), int(f[8]), int(f[9]), int(f[11])
                )
        return out

    @staticmethod
    def link_state(netns: str | None, interface: str) -> str:
        """operstate via iproute2 (slow path, called at start and occasionally)."""
        cmd = ["ip", "-o", "link", "show", "dev", interface]
        if netns:
            cmd = ["ip", "-n", netns, "-o", "link", "show", "dev", interface]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=2).stdout
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        if not out:
            return "missing"
        if "state UP" in out or ("LOWER_UP" in out and ",UP" in out):
            return "up"
        if "state DOWN" in out:
            return "down"
        return "up" if ",UP" in out else "down"

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()


class CpuProbe:
    """Per-core CPU % (psutil deltas between calls) and per-process CPU %."""

    def __init__(self) -> None:
        psutil.cpu_percent(percpu=True)
        self._procs: dict[int, psutil.Process] = {}

    def cores(self) -> list[float]:
        return psutil.cpu_percent(percpu=True)

    def process(self, pid: int) -> float:
        p = self._procs.get(pid)
        try:
            if p is None:
                p = self._procs[pid] = psutil.Process(pid)
                p.cpu_percent()
                return 0.0
            return p.cpu_percent()
        except psutil.Error:
            return 0.0


@dataclass(frozen=True)
class DutReading:
    count: int | None
    max: int | None
    mem_available: int | None
    error: str | None = None


class DutProbe:
    """Conntrack count/max and free memory of the DUT: a lab namespace or a host over ssh."""

    def __init__(self, netns: str | None = None, ssh: str | None = None) -> None:
        self.netns = netns
        self.ssh = ssh
        self._max: int | None = None

    @property
    def source(self) -> str:
        return f"netns:{self.netns}" if self.netns else f"ssh:{self.ssh}" if self.ssh else "none"

    def read(self) -> DutReading:
        if self.netns:
            return self._read_netns()
        if self.ssh:
            return self._read_ssh()
        return DutReading(None, None, None, "no DUT probe configured")

    def _read_netns(self) -> DutReading:
        from tgen_tui.diagnostics import EnvironmentProblem
        from tgen_tui.lab.conntrack import conntrack_count  # cached fd, re-opened if the ns changes

        try:
            if self._max is None:
                fd = _open_in_netns(self.netns, CT_MAX)
                try:
                    self._max = int(os.pread(fd, 32, 0))
                finally:
                    os.close(fd)
            count = conntrack_count(self.netns)
        except (OSError, ValueError, EnvironmentProblem) as e:
            return DutReading(None, None, None, f"conntrack probe of netns {self.netns}: {e}")
        return DutReading(count, self._max, psutil.virtual_memory().available)

    def _read_ssh(self) -> DutReading:
        remote = f"cat {CT_COUNT} {CT_MAX}; grep MemAvailable /proc/meminfo"
        try:
            cp = subprocess.run(
                [*shlex.split(self.ssh), remote], capture_output=True, text=True, timeout=5
            )
            lines = cp.stdout.split("\n")
            return DutReading(int(lines[0]), int(lines[1]), int(lines[2].split()[1]) * 1024)
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
            return DutReading(None, None, None, f"ssh probe failed: {e}")
