"""Which worker serves which ports, on which core (DESIGN rule 6: explicit and visible).

One worker per port (it sends that port's streams and reads that port's RX ring), pinned
round-robin onto the allowed cores. The default allowed set is every core but the first,
which stays with the engine, the console and the kernel's receive work (RPS). When there
are more workers than cores, workers share cores: that is said in a warning, never done
silently; with the default cores and a sender paced by the timer (engine.setup), the
workers of receive-only ports go to that first core instead, so that each sender keeps a
core of its own (its spacing: issue 30).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerPlan:
    id: int
    core: int
    ports: tuple[str, ...]
    streams: tuple[str, ...]
    lane: int = 0  # which of the port's sender lanes (tgen_tui.engine.lanes)
    lanes: int = 1


def default_cores() -> list[int]:
    """All cores this process may use except the lowest one (kept for engine/UI/RPS)."""
    cores = sorted(os.sched_getaffinity(0))
    return cores[1:] if len(cores) > 1 else cores


def parse_cores(text: str) -> list[int]:
    """``1,3`` or ``2-5`` or ``0,2-3`` → sorted core list; ValueError on nonsense."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if lo > hi:
                raise ValueError(f"bad core range {part!r}")
            out.update(range(lo, hi + 1))
        else:
            out.add(int(part))
    if not out:
        raise ValueError("no cores given")
    online = os.sched_getaffinity(0)
    bad = sorted(c for c in out if c not in online)
    if bad:
        raise ValueError(f"core(s) {bad} not available (this process may use {sorted(online)})")
    return sorted(out)


def spare_cores() -> list[int]:
    """The core :func:`default_cores` keeps for the engine (none on a 1-core host)."""
    cores = sorted(os.sched_getaffinity(0))
    return cores[:1] if len(cores) > 1 else []


def plan_workers(
    port_streams: dict[str, list[str]], cores: list[int], spare: list[int] | None = None
) -> tuple[list[WorkerPlan], list[str]]:
    """One worker per port, round-robin over cores. Returns (plans, warnings).

    With ``spare`` (the engine's core, given only when the cores are tgen's default) and
    more workers than cores, the workers of receive-only ports go to the spare core and
    the senders keep theirs: a receiver sharing a sender's core delayed the sender's
    wake-ups by up to 0.7 ms (a capture replayed at its recorded times, p90 error 300-480
    µs, against 28-82 µs with the receiver on the other core; issue 30)."""
    receivers = [p for p, s in port_streams.items() if not s]
    n_send = len(port_streams) - len(receivers)
    moved = bool(spare) and len(port_streams) > len(cores) and 0 < n_send <= len(cores)
    plans = []
    k_send = k_recv = 0
    for i, (port, streams) in enumerate(port_streams.items()):
        if moved and not streams:
            core = spare[k_recv % len(spare)] if spare else cores[0]
            k_recv += 1
        else:
            core = cores[(k_send if moved else i) % len(cores)]
            k_send += 1
        plans.append(WorkerPlan(i, core, (port,), tuple(streams)))
    if moved:
        return plans, []
    warnings = []
    if len(plans) > len(cores):
        shared: dict[int, list[str]] = {}
        for p in plans:
            shared.setdefault(p.core, []).extend(p.ports)
        detail = "; ".join(
            f"core {c}: ports {', '.join(ps)}" for c, ps in shared.items() if len(ps) > 1
        )
        warnings.append(
            f"{len(plans)} workers share {len(cores)} core(s) ({detail}): each gets a share of the core, "
            f"so per-port maxima are lower; allow more cores with --cores"
        )
    return plans, warnings
