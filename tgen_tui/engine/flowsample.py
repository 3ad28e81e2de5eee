"""The sampler's socket-flow part: flow workers' counter blocks to :class:`FlowStats`.

The :class:`~tgen_tui.engine.stats.Accumulator` owns one :class:`FlowSampler`: each
sample copies every flow worker's block once, subtracts the baselines of the monotonic
slots (a clear takes new ones), and turns each row into a flow's figures
(:mod:`tgen_tui.engine.flowfigures`), with the interval rates against the sample the
accumulator chose as the rate base. Knows nothing of the engine: a test or the console's
fake can feed it blocks of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tgen_tui.engine import appfigures as AF
from tgen_tui.engine import flowfigures as FF
from tgen_tui.engine.snapshot import FlowStats
from tgen_tui.worker import flowcounters as FC

_MONO = list(FC.MONOTONIC)


@dataclass(frozen=True)
class FlowCtx:
    """A socket flow as configured (``pos``: its place in ``Setup.flows``)."""

    pos: int
    name: str
    stream: str
    port: str
    rx_port: str
    protocol: str
    cc: str | None
    worker: int
    core: int
    app: str | None = None  # a request/response flow's kind (None: a bulk flow)
    load: str | None = None  # its load target: cps | concurrent | tps


@dataclass
class _Block:
    view: FC.FlowCounterView
    base: np.ndarray
    rows: dict[int, int]  # flow position -> row in the block


class FlowSampler:
    """Reads the flow workers' blocks and builds the flows of a snapshot."""

    def __init__(self, flows: tuple[FlowCtx, ...]) -> None:
        self.ctx = flows
        self.blocks: dict[int, _Block] = {}

    def attach(self, worker: int, view: FC.FlowCounterView) -> None:
        """A flow worker's block; its rows are its flows in ``ctx`` order."""
        old = self.blocks.pop(worker, None)
        if old is not None:
            old.view.close()
        mine = [c.pos for c in self.ctx if c.worker == worker]
        self.blocks[worker] = _Block(
            view, np.zeros_like(view.arr), {pos: k for k, pos in enumerate(mine)}
        )

    def clear(self, ports: set[str] | None = None) -> None:
        """Baselines for the flows of ``ports`` (None: every flow)."""
        by_pos = {c.pos: c for c in self.ctx}
        for b in self.blocks.values():
            raw = np.array(b.view.arr, copy=True)
            rows, base = b.view.table(raw), b.view.table(b.base)
            for pos, k in b.rows.items():
                if ports is None or by_pos[pos].port in ports:
                    base[k, _MONO] = rows[k, _MONO]

    def read(self) -> dict[int, np.ndarray]:
        """Every flow's row now, baselines subtracted from the monotonic slots."""
        out: dict[int, np.ndarray] = {}
        for b in self.blocks.values():
            rows = b.view.table(np.array(b.view.arr, copy=True)).copy()
            rows[:, _MONO] -= b.view.table(b.base)[:, _MONO]
            for pos, k in b.rows.items():
                out[pos] = rows[k]
        return out

    def sample(
        self,
        rows: dict[int, np.ndarray],
        prev: dict[int, tuple[int, ...]] | None,
        dt: float,
        alive: dict[int, bool],
    ) -> tuple[tuple[FlowStats, ...], float | None, float | None, dict[int, tuple[int, ...]]]:
        """(flows, Jain's index live, Jain's index over the run, this sample's byte
        counts, and an app flow's connection counts, for the next one's rates)."""
        out: list[FlowStats] = []
        cur: dict[int, tuple[int, ...]] = {}
        for c in self.ctx:
            row = rows.get(c.pos)
            if row is None:
                row = np.zeros(FC.FLOW_STRIDE, dtype=np.int64)
            counts: tuple[int, ...] = (int(row[FC.FC_RX_BYTES]), int(row[FC.FC_TX_BYTES]))
            if c.app is not None:
                counts += AF.rate_counts(row)
            cur[c.pos] = counts
            before = (prev or {}).get(c.pos)
            rates = (0.0, 0.0)
            if before is not None and dt > 0:
                rates = (
                    FF.per_s_bits(counts[0], before[0], dt),
                    FF.per_s_bits(counts[1], before[1], dt),
                )
            app_before = before[2:] if before is not None and len(before) > 2 else None
            out.append(flow_stats(c, row, rates, alive.get(c.worker, True), app_before, dt))
        flows = tuple(out)
        live = FF.fairness((f.protocol, f.on, f.goodput_bps) for f in flows)
        run = FF.fairness((f.protocol, f.active_s > 0, f.goodput_run_bps) for f in flows)
        return flows, live, run, cur

    def close(self) -> None:
        for b in self.blocks.values():
            b.view.close()
        self.blocks.clear()


def flow_stats(
    c: FlowCtx,
    row: np.ndarray,
    rates: tuple[float, float],
    alive: bool,
    app_before: tuple[int, ...] | None = None,
    dt: float = 0.0,
) -> FlowStats:
    """One flow's figures from its row and its interval rates (goodput, tx bit/s; an app
    flow's connection counts of the sample before, ``dt`` s ago)."""
    good_run = FF.goodput_mean_bps(int(row[FC.FC_RX_BYTES_DUE]), int(row[FC.FC_ACTIVE_NS]))
    if c.app is not None:
        part = AF.app_figures(row, app_before, dt, c.protocol == "udp")
        part.update(app=c.app, load=c.load)
    elif c.protocol == "tcp":
        part = FF.tcp_figures(row, c.cc, good_run)
    else:
        part = FF.udp_figures(row)
    return FlowStats(
        name=c.name,
        stream=c.stream,
        port=c.port,
        rx_port=c.rx_port,
        protocol=c.protocol,
        cc=c.cc,
        worker=c.worker,
        core=c.core,
        state=FF.state_name(int(row[FC.FC_STATE])) if alive else "failed",
        on=bool(row[FC.FC_ON]) and alive,
        tx_bytes=int(row[FC.FC_TX_BYTES]),
        rx_bytes=int(row[FC.FC_RX_BYTES]),
        goodput_bps=max(0.0, rates[0]),
        tx_bps=max(0.0, rates[1]),
        goodput_run_bps=good_run,
        active_s=int(row[FC.FC_ACTIVE_NS]) / 1e9,
        errors=int(row[FC.FC_ERRORS]),
        **part,
    )


__all__ = ["FlowCtx", "FlowSampler", "flow_stats"]
