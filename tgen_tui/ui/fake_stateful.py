"""The fake counter source's stateful figures (tgen_tui.ui.fake): what the workers'
:mod:`tgen_tui.worker.liveflow` writes into the counter block, simulated.

- every received stream: its longest receive gap is one frame interval at its rate,
  beginning at its port's start;
- a ``learn: true`` stream's port learns one tuple per distinct flow of the streams that
  arrive there, as their frames arrive (no NAT: the tuple is the forward frame's own
  source and destination, the k-th flow's source port its field's minimum + k);
- the forward stream's port sends its distinct flows and sees each verified once its
  reply stream has sent that many frames, each after SETUP_NS.
"""

from __future__ import annotations

import numpy as np

from tgen_tui.engine.setup import distinct_flows as program_flows
from tgen_tui.packets.program import LIVE_TABLE
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import lat_bucket

SETUP_NS = 2_000_000  # each simulated flow's time to first reply


def write_gap(row: np.ndarray, pps: float, frames: int, start_ns: int) -> None:
    """The gap gauges of an rx row after ``frames`` frames of a stream paced at ``pps``."""
    if frames >= 2 and pps > 0:
        row[C.R_MAX_GAP] = round(1e9 / pps)
        row[C.R_GAP_START] = start_ns
    else:
        row[C.R_MAX_GAP] = row[C.R_GAP_START] = 0


def _tuple(prog, k: int) -> list[int]:
    """The k-th flow's (src, dst, sport, dport): the template's, a varying field from its
    minimum (+ k for the source port)."""
    t = prog.template
    varying = {f.offset: f for f in prog.fields if f.mode != "fixed"}

    def val(off: int, width: int, k: int = 0) -> int:
        f = varying.get(off)
        if f is not None:
            return f.min + (k % f.span)
        return int.from_bytes(t[off : off + width], "big")

    a, b = prog.l3_offset, prog.l4_offset
    return [val(a + 12, 4), val(a + 16, 4), val(b, 2, k), val(b + 2, 2)]


def write_flows(programs, flow_rows: dict[str, np.ndarray], received, sent) -> None:
    """The flow rows (port name -> FLOW_STRIDE row) of the ``learn: true`` streams' ports
    and of their forward streams' ports; ``received(i)``/``sent(i)``: frames of program
    position i so far."""
    for j, p in enumerate(programs):
        if p.table != LIVE_TABLE or p.port not in flow_rows:
            continue
        fwd = [(i, q) for i, q in enumerate(programs) if q.rx_port == p.port and i != j]
        learned = sum(min(program_flows(q), received(i)) for i, q in fwd if q.l3 == 4)
        row = flow_rows[p.port]
        row[C.F_LEARNED] = learned
        ex = [q for _, q in fwd if q.l3 == 4]
        n = min(C.SAMPLES, learned)
        if ex and n:
            t = np.array([_tuple(ex[0], k) for k in range(n)], dtype=np.int64)
            row[C.F_SAMPLES : C.F_SAMPLES + 4 * n] = t.reshape(-1)
        row[C.F_N_SAMPLES] = n
        for i, q in fwd:
            fr = flow_rows.get(q.port)
            if fr is None or p.rx_port != q.port:
                continue
            flows = min(program_flows(q), sent(i))
            ok = min(flows, received(j))
            fr[C.F_FLOWS] = flows
            fr[C.F_VERIFIED] = ok
            fr[C.F_SETUP_SUM] = ok * SETUP_NS
            fr[C.F_SETUP_MIN] = SETUP_NS if ok else C.INT64_MAX
            fr[C.F_SETUP_MAX] = SETUP_NS if ok else -1
            fr[C.F_HIST :] = 0
            fr[C.F_HIST + int(lat_bucket(np.array([SETUP_NS]))[0])] = ok


__all__ = ["SETUP_NS", "write_flows", "write_gap"]
