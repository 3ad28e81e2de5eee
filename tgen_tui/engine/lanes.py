"""Sender lanes: several workers per port, each on its own core (``lanes: N``, ``--lanes``).

Planning: a port with N lanes gets N workers (``WorkerPlan.lane`` 0..N-1), each sending
every stream of the port, but only its share of the frames (tgen_tui.packets.lanes:
frames ``k*N + L``, rate ``pps/N``, its own sequence space), and each receiving a
flow-hash share of the port's frames (PACKET_FANOUT, tgen_tui.worker.fanout). Workers go
round-robin over the allowed cores; more workers than cores is said in the existing
warning, never done silently.

Merging: each lane worker has its own counter block. The engine sums a port's rows and a
stream's tx rows over its lane workers (gauges: the most recent or the largest), and a
stream's rx rows over its lanes (``index + L * block``) and over every receiver.
One lane changes nothing: one worker per port, one rx row per stream, as before.

Imports: numpy, the worker's counter layout, the engine's figures (RxSum) and
assignment.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tgen_tui.engine.assignment import WorkerPlan
from tgen_tui.engine.figures import RxSum
from tgen_tui.worker import counters as C

# gauges of a port row that several lane workers write: the merged row keeps the largest
_PORT_MAX = (C.P_HEARTBEAT_NS, C.P_LATE_MAX_NS, C.P_STATE, C.P_RX_TABLE, C.P_STARTED_NS)
_TX_MIN_NZ = (C.T_FIRST_TX_NS,)
_TX_MAX = (C.T_LAST_TX_NS, C.T_STREAM, C.T_PORT)


def port_lanes(
    compiled, used: list[str], override: int | None, learning: frozenset[str] = frozenset()
) -> dict[str, int]:
    """Lanes of each used port: ``--lanes`` for every port, else the profile's. A port
    that learns tuples (RFC 9693 Responder, ``learning``) keeps one lane under ``--lanes``:
    each lane would see only a share of the tuples."""
    if override is not None:
        if override < 1:
            raise ValueError("--lanes: need at least 1")
        return {p: 1 if p in learning else int(override) for p in used}
    return {p: int(getattr(compiled.ports[p], "lanes", 1) or 1) for p in used}


def live_learn_ports(programs) -> frozenset[str]:
    """Ports of ``learn: true`` exchanges: each reply stream's port (it learns the tuples
    that arrive there) and the port it replies to (that one verifies the flows). Each
    keeps one lane: a lane receives only its fanout share of the frames, so it would
    learn (or verify) only a share, and the port's report is one worker's."""
    from tgen_tui.packets.program import LIVE_TABLE

    live = [p for p in programs if p.table == LIVE_TABLE]
    return frozenset(p.port for p in live) | frozenset(p.rx_port for p in live if p.rx_port)


def block_ports(programs) -> frozenset[str]:
    """Ports of streams that send their flows in blocks (``blocks`` > 1): one lane each,
    as a lane would carry only every N-th frame of a block."""
    return frozenset(p.port for p in programs if getattr(p, "blocks", 1) > 1)


def one_lane_warning(override: int | None, kept: list[str]) -> list[str]:
    """The line that says ``--lanes N`` left these ports with one lane (never silent)."""
    if not override or override <= 1 or not kept:
        return []
    return [
        f"--lanes {override}: port {', '.join(kept)} keeps one lane (it learns tuples, "
        "verifies flows or sends flows in blocks: each lane would see only its share)"
    ]


def plan_lanes(
    port_streams: dict[str, list[str]], lanes: dict[str, int], cores: list[int]
) -> tuple[list[WorkerPlan], list[str]]:
    """One worker per (port, lane), round-robin over ``cores``. Returns (plans, warnings):
    the warning of :func:`~tgen_tui.engine.assignment.plan_workers` when workers share
    cores, and one when a port has more lanes than there are cores."""
    plans: list[WorkerPlan] = []
    for port, streams in port_streams.items():
        n = lanes.get(port, 1)
        for lane in range(n):
            i = len(plans)
            plans.append(WorkerPlan(i, cores[i % len(cores)], (port,), tuple(streams), lane, n))
    warnings = []
    for port, n in lanes.items():
        if n > len(cores):
            warnings.append(
                f"port {port} has {n} lanes but only {len(cores)} core(s) are allowed "
                f"({', '.join(map(str, cores))}): lanes share cores, so the port's rate does "
                "not grow with its lanes; allow more cores with --cores"
            )
    if len(plans) > len(cores):
        shared: dict[int, list[str]] = {}
        for p in plans:
            shared.setdefault(p.core, []).append(label(p))
        detail = "; ".join(f"core {c}: {', '.join(ws)}" for c, ws in shared.items() if len(ws) > 1)
        warnings.append(
            f"{len(plans)} workers share {len(cores)} core(s) ({detail}): each gets a share of "
            "the core, so per-port maxima are lower; allow more cores with --cores"
        )
    return plans, warnings


def port_workers(plans, port: str) -> list[int]:
    """Ids of the workers that serve ``port``: one, or one per lane (lane order)."""
    return [p.id for p in plans if port in p.ports]


def label(p: WorkerPlan) -> str:
    """``p0`` for a one-lane port, ``p0 lane 1/2`` for a lane."""
    ports = ", ".join(p.ports)
    return ports if p.lanes <= 1 else f"{ports} lane {p.lane}/{p.lanes}"


def fanout_group(port_index: int) -> int:
    """A PACKET_FANOUT group id for the port at ``port_index``: unique per port of this
    engine (groups are per network namespace; this process's pid keeps two engines apart)."""
    return ((os.getpid() * 64) + port_index) & 0xFFFF


def lane_entries(entries: list[dict], plan: WorkerPlan, setup: Any) -> None:
    """Add the lane fields to the configure entries of ``plan``'s ports (lanes > 1 only):
    ``lane`` {lane, lanes, block} and ``fanout`` (the port's group id). ``setup``: the
    engine's Setup (its rx rows per lane: n_streams / lanes)."""
    if plan.lanes <= 1:
        return
    block = setup.n_streams // max(1, setup.lanes)
    index = {n: i for i, n in enumerate(setup.port_names)}
    for e in entries:
        e["lane"] = {"lane": plan.lane, "lanes": plan.lanes, "block": block}
        e["fanout"] = fanout_group(index[e["name"]])


# ---------------------------------------------------------------------- merging
def merge_port_row(a: np.ndarray | None, b: np.ndarray, mono: list[int]) -> np.ndarray:
    """Two lane workers' rows of one port: monotonic slots summed, gauges the largest."""
    if a is None:
        return b
    out = a.copy()
    out[mono] += b[mono]
    for k in _PORT_MAX:
        out[k] = max(a[k], b[k])
    return out


def merge_tx_row(a: np.ndarray | None, b: np.ndarray) -> np.ndarray:
    """Two lanes' tx rows of one stream: counts and requested rates summed, the first
    send the earliest, the last send the latest."""
    if a is None:
        return b
    out = a + b
    for k in _TX_MIN_NZ:
        nz = [v for v in (a[k], b[k]) if v]
        out[k] = min(nz) if nz else 0
    for k in _TX_MAX:
        out[k] = max(a[k], b[k])
    return out


def rx_rows(index: int, block: int, lanes: int) -> list[int]:
    """The rx rows of the stream with global index ``index``: one per lane."""
    return [index + k * block for k in range(max(1, lanes))]


def merge_rx(rx, index: int, block: int, lanes: int) -> RxSum:
    """A stream's rx figures over its lanes' rows (``rx``: figures.RxTotals, every
    receiver already summed). Counts and histograms are summed; min/max are combined;
    the highest sequence number becomes the lanes' frames expected so far minus one
    (``sum(max_seq_L + 1) - 1``), so that running loss (expected - received) adds up.

    With several receivers (fanout) a lane's expected count is taken at the receiver
    that is furthest behind (the lowest of their highest sequence numbers): frames that a
    lagging receiver has not read yet are not lost. While sending, loss is then a lower
    bound; once the port has stopped, loss is sent - received, exact."""
    rows = rx_rows(index, block, lanes)
    if len(rows) == 1:
        return rx.of(index)
    s = rx.sum[rows].sum(axis=0)
    lo = rx.minseq[rows]
    seen = np.where(lo < C.INT64_MAX, lo, rx.maxseq[rows])
    expected = int((seen + 1).sum())
    return RxSum(
        s,
        expected - 1,
        int(rx.min[rows].min()),
        int(rx.max[rows].max()),
        int(rx.vlan[rows].max()),
        int(rx.every[rows].max()),
        int(rx.asked[rows].max()),
    )


def assignment_lines(plans, host_of=None) -> list[str]:
    """``port p0 lane 1/2: worker 1: core 1: streams up`` (the printed assignment)."""
    out = []
    for p in plans:
        streams = ", ".join(p.streams) or "(receive only)"
        host = host_of(p) if host_of else None
        at = f"host {host}: " if host else ""
        out.append(f"worker {p.id}: {at}core {p.core}: port {label(p)}: streams {streams}")
    return out


__all__ = [
    "assignment_lines",
    "block_ports",
    "fanout_group",
    "label",
    "lane_entries",
    "merge_port_row",
    "merge_rx",
    "merge_tx_row",
    "plan_lanes",
    "port_workers",
    "port_lanes",
    "rx_rows",
]
