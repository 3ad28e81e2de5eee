"""What ``tgen tui --json`` writes: the ``tgen run`` result document for the whole session.

The console can start and stop ports many times and clear counters in between. The
console's record adds the counters seen just before each clear back into the final snapshot,
so the result covers everything sent while the console was open, and it takes as the
duration the time during which at least one port was running.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from tgen_tui.dut.channel import DutChannel
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.snapshot import StatsSnapshot

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


class ConsoleRecord:
    """What the console saw: its sending time and the counters carried over clears, from
    which it builds the session's result."""

    def __init__(self) -> None:
        self.active_s = 0.0
        self._last: float | None = None
        self._was_running = False
        self.clears = 0
        self.carry_ports: dict[str, dict[str, int]] = {}
        self.carry_streams: dict[str, dict[str, int]] = {}

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
        return dataclasses.replace(final, ports=ports, streams=tuple(streams))

    def result(
        self,
        compiled,
        final: StatsSnapshot,
        profile_path: str,
        desc: EngineDescription | None,
        log_lines: Iterable[str],
    ) -> dict:
        from tgen_tui.engine.result import build_result

        plan = []
        if desc is not None:
            plan = [
                f"worker {w.id}: core {w.core}: port {', '.join(w.ports)}: {', '.join(w.streams) or '(receive only)'}"
                for w in desc.workers
            ] + [f"warning: {x}" for x in desc.warnings]
        res = build_result(
            compiled,
            self.merged(final),
            duration_s=self.active_s,
            partial=False,
            profile_path=profile_path,
            events=list(log_lines),
            plan=plan,
            dut_channel=DutChannel.of(compiled.dut_netns, compiled.dut_ssh),
        )
        res.session = {
            "front_end": "tgen tui",
            "clears": self.clears,
            "sending_s": round(self.active_s, 3),
        }
        return res.to_doc()


def sent_nothing(result: dict) -> bool:
    """True when the session's result counts no frame sent on any port (clears included)."""
    return not any((p or {}).get("tx_frames") for p in (result.get("ports") or {}).values())


def store_session(args, result: dict) -> int | None:
    """Record the session in the results store, unless nothing was sent: then say so on
    stderr and store nothing (an idle console leaves no run). Returns the run id."""
    import sys

    from tgen_tui.results.record import record_from_args

    if sent_nothing(result):
        if not getattr(args, "no_store", False) and not getattr(args, "quiet", False):
            print("tgen tui: nothing was sent: no run stored", file=sys.stderr)
        return None
    return record_from_args(args, result, test="tui")


__all__ = ["ConsoleRecord", "sent_nothing", "store_session"]
