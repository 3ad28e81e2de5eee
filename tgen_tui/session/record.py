"""What an interactive run saw (the console, ``tgen serve``): its sending time and the
counters carried over clears, so its result covers the whole session.

The console can start and stop ports many times and clear counters in between. The
record adds the counters seen just before each clear back into the final snapshot, so
the result covers everything sent while the console was open, and it takes as the
duration the time during which at least one port was running.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tgen_tui.engine import flowfigures as FF
from tgen_tui.engine.snapshot import FlowStats, StatsSnapshot

PORT_COUNTERS = (
    "tx_frames", "rx_frames", "tx_bytes", "rx_bytes", "rx_other", "tx_errors", "rx_drops",
    "late_events", "if_tx_frames", "if_rx_frames", "if_tx_bytes", "if_rx_bytes", "if_rx_dropped",
)  # fmt: skip
STREAM_COUNTERS = (
    "tx_frames",
    "tx_bytes",
    "rx_frames",
    "rx_bytes",
    "lost",
    "out_of_order",
    "duplicates",
    "due_frames",
)
# socket flows: counts that add up over clears (the run goodput is weighted by active time)
FLOW_COUNTERS: tuple[str, ...] = (
    "tx_bytes", "rx_bytes", "active_s", "errors", "retransmits", "data_segs_out", "connections",
    "tx_packets", "rx_packets", "lost",
)  # fmt: skip
# request/response flows' connection counts (their setup and transaction percentiles are
# the ones since the last clear: histograms are not carried)
APP_COUNTERS = (
    "attempted", "due", "established", "failed", "failed_refused", "failed_reset",
    "failed_timeout", "failed_local", "closed", "aborted", "transactions", "served",
)  # fmt: skip
FLOW_COUNTERS += APP_COUNTERS


class InteractiveRecord:
    """What the console saw: its sending time and the counters carried over clears, from
    which it builds the session's result."""

    def __init__(self) -> None:
        self.active_s = 0.0
        self._last: float | None = None
        self._was_running = False
        self.clears = 0
        self.carry_ports: dict[str, dict[str, int]] = {}
        self.carry_streams: dict[str, dict[str, int]] = {}
        self.carry_flows: dict[str, dict[str, float]] = {}  # + "bits_due": goodput x time

    def observe(self, snap: StatsSnapshot, now: float) -> None:
        """Count wall time while any port runs (between two observations)."""
        if self._last is not None and self._was_running:
            self.active_s += min(now - self._last, 1.0)
        self._last = now
        self._was_running = any(p.state in ("running", "stopping") for p in snap.ports)

    def before_clear(self, snap: StatsSnapshot) -> None:
        """Keep the counters a clear is about to zero."""
        self.clears += 1
        for p in snap.ports:
            acc = self.carry_ports.setdefault(p.name, dict.fromkeys(PORT_COUNTERS, 0))
            for k in PORT_COUNTERS:
                acc[k] += getattr(p, k)
        for s in snap.streams:
            acc = self.carry_streams.setdefault(s.name, dict.fromkeys(STREAM_COUNTERS, 0))
            for k in STREAM_COUNTERS:
                acc[k] += getattr(s, k)
        for f in snap.flows:
            fa = self.carry_flows.setdefault(f.name, dict.fromkeys((*FLOW_COUNTERS, "bits_due"), 0))
            for k in FLOW_COUNTERS:
                fa[k] += getattr(f, k) or 0
            fa["bits_due"] += (f.goodput_run_bps or 0.0) * f.active_s

    def merged(self, final: StatsSnapshot) -> StatsSnapshot:
        """The final snapshot with the carried counters added back."""
        if not self.clears:
            return final
        ports = tuple(
            dataclasses.replace(
                p, **{k: getattr(p, k) + v for k, v in self.carry_ports.get(p.name, {}).items()}
            )
            for p in final.ports
        )
        streams = []
        for s in final.streams:
            add = self.carry_streams.get(s.name, {})
            s2 = dataclasses.replace(s, **{k: getattr(s, k) + v for k, v in add.items()})
            loss = 100.0 * s2.lost / s2.tx_frames if s2.tx_frames else 0.0
            streams.append(dataclasses.replace(s2, loss_pct=loss))
        flows = tuple(self._merged_flow(f) for f in final.flows)
        return dataclasses.replace(final, ports=ports, streams=tuple(streams), flows=flows)

    def _merged_flow(self, f: FlowStats) -> FlowStats:
        add = self.carry_flows.get(f.name)
        if not add:
            return f
        kw: dict[str, Any] = {
            k: (getattr(f, k) or 0) + add[k]
            for k in FLOW_COUNTERS
            if getattr(f, k) is not None or add[k]
        }
        active = kw.get("active_s", f.active_s)
        bits = add["bits_due"] + (f.goodput_run_bps or 0.0) * f.active_s
        kw["goodput_run_bps"] = bits / active if active > 0 else f.goodput_run_bps
        for k in (
            "tx_packets",
            "rx_packets",
            "lost",
            "retransmits",
            "data_segs_out",
            *APP_COUNTERS,
        ):
            if k in kw:
                kw[k] = int(kw[k])
        if kw.get("due"):
            kw["achieved_pct"] = 100.0 * kw.get("attempted", 0) / kw["due"]
        if f.protocol == "udp":
            got = kw.get("rx_packets", 0)
            kw["loss_pct"] = FF.udp_loss(got + kw.get("lost", 0), got)[1]
        elif kw.get("data_segs_out"):
            kw["retransmit_pct"] = FF.retransmit_pct(kw.get("retransmits", 0), kw["data_segs_out"])
        return dataclasses.replace(f, **kw)


def sent_nothing(result: dict) -> bool:
    """True when the session's result counts no frame sent on any port and no byte on any
    socket flow (clears included): an idle console leaves no run."""
    frames = any((p or {}).get("tx_frames") for p in (result.get("ports") or {}).values())
    flows = (result.get("transport") or {}).get("streams") or {}
    return not frames and not any((f or {}).get("tx_bytes") for f in flows.values())


__all__ = ["InteractiveRecord", "sent_nothing"]
