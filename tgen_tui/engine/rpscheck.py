"""Whether a worker shares its core with receive work that RPS steers there (issue 30).

veth and most NICs run a receiver's kernel work on the CPU that RPS names in
``/sys/class/net/IF/queues/rx-N/rps_cpus``. The netns lab steers the receive work of its
ports (and its DUT's forwarding) to CPU 0, where tgen's default placement runs no worker.
A worker pinned there anyway (``--cores 0-1``) is interrupted by that softirq for every
frame: the kernel charges the softirq to the worker's CPU time (lab.yaml's two workers at
20 kpps each: 45 % for the one on core 0 against 19 % on core 1; with RPS off 18 % and
16 %, benchmarks/worker_cpu.py) and its frames wait behind it. The run says so once, with
what to do, rather than leaving the figure unexplained. The masks are read with
``ip netns exec`` (a namespace's sysfs is only seen from a fresh mount), through trio.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from tgen_tui.engine.setup import Setup

_TTL_S = 5.0  # a methodology's trials build a set-up each: read the masks once per 5 s
_cache: dict[tuple[str | None, str], tuple[float, frozenset[int] | None]] = {}


def parse_mask(text: str) -> frozenset[int]:
    """CPUs of a sysfs CPU mask such as ``1``, ``3`` or ``00000000,00000001``."""
    hexdigits = text.strip().replace(",", "")
    value = int(hexdigits or "0", 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


async def steered_cpus(netns: str | None, interface: str) -> frozenset[int] | None:
    """The CPUs RPS sends ``interface``'s receive work to (all its rx queues); empty: RPS
    off; None: unknown (no such interface or namespace, not root)."""
    key = (netns, interface)
    hit = _cache.get(key)
    now = time.monotonic()
    if hit is not None and now - hit[0] < _TTL_S:
        return hit[1]
    cmd = ["sh", "-c", f"cat /sys/class/net/{interface}/queues/rx-*/rps_cpus"]
    if netns:  # a fresh sysfs of that namespace: ip netns exec mounts one
        cmd = ["ip", "netns", "exec", netns, *cmd]
    cpus: frozenset[int] | None = None
    try:
        with trio.move_on_after(5):
            cp = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)
            out = cp.stdout.decode(errors="replace")
            if cp.returncode == 0 and out.strip():
                cpus = frozenset().union(*(parse_mask(ln) for ln in out.split()))
    except (OSError, ValueError, subprocess.SubprocessError):
        cpus = None
    _cache[key] = (now, cpus)
    return cpus


async def rps_warnings(
    ports: Iterable[tuple[str, str | None, str]], workers: Iterable[tuple[int, tuple[str, ...]]]
) -> list[str]:
    """One warning per core that runs a worker and receives steered work.

    ``ports``: (port name, netns, interface) of the run's local ports; ``workers``: (core,
    ports) of each frame worker."""
    steer: dict[int, list[str]] = {}
    masks: dict[str, str] = {}
    for name, netns, ifname in ports:
        cpus = await steered_cpus(netns, ifname)
        for c in sorted(cpus or ()):
            steer.setdefault(c, []).append(name)
        if cpus:
            masks[name] = ", ".join(str(c) for c in sorted(cpus))
    out = []
    on_core: dict[int, list[str]] = {}
    for core, wports in workers:
        on_core.setdefault(core, []).extend(wports)
    for core in sorted(on_core):
        if core not in steer:
            continue
        mine = ", ".join(on_core[core])
        theirs = ", ".join(steer[core])
        out.append(
            f"core {core} runs the worker of {mine} and the receive work that RPS steers "
            f"there ({theirs}: RPS to CPU {masks[steer[core][0]]}; in the netns lab also the "
            "DUT's forwarding): the kernel charges that softirq to the worker's CPU and its "
            "frames wait behind it; keep workers off that core (--cores) or turn RPS off "
            "(tgen lab set --rps-cpus 0)"
        )
    return out


async def setup_warnings(setup: Setup) -> list[str]:
    """The warnings of a set-up's frame workers (ports on another host not looked at)."""
    local = {n: pr for n, pr in setup.ports.items() if pr.host is None}
    ports = [(n, pr.netns, pr.interface) for n, pr in local.items()]
    workers = [(w.core, w.ports) for w in setup.plans if set(w.ports) & set(local)]
    return await rps_warnings(ports, workers) if ports and workers else []


__all__ = ["parse_mask", "rps_warnings", "setup_warnings", "steered_cpus"]
