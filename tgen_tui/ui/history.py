"""The console's history: ring buffers of the figures the charts draw.

Every new snapshot (up to 10 Hz) appends one sample to each series' fine ring, with the
snapshot's time ``t`` (engine seconds since the first start) in a shared time ring; each
whole second of ``t`` also closes one point of the coarse ring (the mean of that second's
samples), which holds 10 min. Charts place samples by their time, not by their position,
so a console that samples less often under load still draws a true 60 s or 10 min axis.
Opening a chart, or switching its window, shows the past at once. The rings live on the
app, not on a screen, so they fill while another screen is shown.

Series keys: ``("tx", port)``, ``("rx", port)`` pps; ``("lost", port)`` frames lost per
second on the streams a port sends; ``("p50", stream)``, ``("p99", stream)`` latency in
µs; ``("ct", "")`` conntrack entries and ``("ct_max", "")`` its max; ``("goodput", flow)``
a socket flow's goodput (bit/s), ``("rtt", flow)`` a TCP flow's smoothed RTT (ms) while
it sends (a gap while not: the kernel's figure then is the last one), and
``("goodput", "port:" + port)`` the goodput of the flows a port sends.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from tgen_tui.engine.snapshot import StatsSnapshot

FINE = 600  # samples in the fine ring: 60 s at 10 Hz (more time when sampled less often)
COARSE = 600  # points in the coarse ring: 10 min at one point a second


@dataclass(frozen=True)
class Window:
    """A chart window: its label, the ring it reads and the seconds it spans."""

    name: str
    coarse: bool
    seconds: int


WINDOWS = (Window("60 s", False, 60), Window("10 min", True, 600))

Key = tuple[str, str]


class Series:
    """One figure's two rings. ``None`` samples (no value yet) are kept as gaps."""

    __slots__ = ("_acc", "_n", "coarse", "fine")

    def __init__(self) -> None:
        self.fine: deque[float | None] = deque(maxlen=FINE)
        self.coarse: deque[float | None] = deque(maxlen=COARSE)
        self._acc = 0.0
        self._n = 0

    def add(self, value: float | None, close_point: bool) -> None:
        """Append a sample; ``close_point``: it starts a new second, so the samples of the
        previous one become a coarse point first."""
        if close_point:
            self.coarse.append(self._acc / self._n if self._n else None)
            self._acc, self._n = 0.0, 0
        self.fine.append(value)
        if value is not None:
            self._acc += value
            self._n += 1

    def values(self, window: Window) -> deque[float | None]:
        return self.coarse if window.coarse else self.fine


class History:
    """The rings of every series, filled from snapshots (``add``)."""

    def __init__(self) -> None:
        self.series: dict[Key, Series] = {}
        self.fine_t: deque[float] = deque(maxlen=FINE)  # the fine samples' times
        self.coarse_t: deque[float] = deque(maxlen=COARSE)  # the coarse points' times
        self.samples = 0  # snapshots added
        self.points = 0  # coarse points closed
        self._second: int | None = None
        self._lost: dict[str, tuple[float, int]] = {}  # port -> (t, lost) of the last snapshot

    def get(self, key: Key) -> Series:
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = Series()
            # a series that appears late (a reload) lines up with the others: gaps before it
            s.fine.extend([None] * min(max(self.samples - 1, 0), FINE))
            s.coarse.extend([None] * min(self.points, COARSE))
        return s

    def values(self, key: Key, window: Window) -> list[float | None]:
        s = self.series.get(key)
        return list(s.values(window)) if s is not None else []

    def times(self, window: Window) -> list[float]:
        return list(self.coarse_t if window.coarse else self.fine_t)

    def add(self, snap: StatsSnapshot) -> None:
        self.samples += 1
        second = int(snap.t)
        close = self._second is not None and second > self._second
        if close:
            self.points += 1
            self.coarse_t.append(float(self._second) + 0.5)  # type: ignore[arg-type]
        if self._second is None or second > self._second:
            self._second = second
        self.fine_t.append(snap.t)
        lost_by_port: dict[str, int] = {}
        for st in snap.streams:
            lost_by_port[st.port] = lost_by_port.get(st.port, 0) + st.lost
            lat = st.latency_ns
            self.get(("p50", st.name)).add(_us(lat.p50), close)
            self.get(("p99", st.name)).add(_us(lat.p99), close)
        for p in snap.ports:
            self.get(("tx", p.name)).add(p.tx_pps, close)
            self.get(("req", p.name)).add(p.requested_pps, close)
            self.get(("rx", p.name)).add(p.rx_pps, close)
            self.get(("lost", p.name)).add(self._lost_rate(p.name, snap.t, lost_by_port), close)
        self._flows(snap, close)
        d = snap.dut
        count = None if d is None else d.conntrack_count
        self.get(("ct", "")).add(None if count is None else float(count), close)
        mx = None if d is None else d.conntrack_max
        self.get(("ct_max", "")).add(None if mx is None else float(mx), close)

    def _flows(self, snap: StatsSnapshot, close: bool) -> None:
        by_port: dict[str, float] = {}
        for f in snap.flows:
            self.get(("goodput", f.name)).add(f.goodput_bps, close)
            if f.app is not None:  # connections per second and open connections
                self.get(("cps", f.name)).add(f.established_per_s, close)
                self.get(("open", f.name)).add(float(f.concurrent or 0), close)
            elif f.protocol == "tcp":
                self.get(("rtt", f.name)).add(f.rtt_ms if f.on else None, close)
            by_port[f.port] = by_port.get(f.port, 0.0) + f.goodput_bps
        for port, bps in by_port.items():
            self.get(port_goodput(port)).add(bps, close)

    def _lost_rate(self, port: str, t: float, lost_by_port: dict[str, int]) -> float:
        """Frames lost per second since the previous snapshot (0 after a clear)."""
        now = lost_by_port.get(port, 0)
        prev = self._lost.get(port)
        self._lost[port] = (t, now)
        if prev is None or t <= prev[0] or now < prev[1]:
            return 0.0
        return (now - prev[1]) / (t - prev[0])


def port_goodput(port: str) -> Key:
    """The series of the goodput of the flows ``port`` sends."""
    return ("goodput", "port:" + port)


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1000.0


__all__ = ["COARSE", "FINE", "WINDOWS", "History", "Series", "Window", "port_goodput"]
