"""Line charts in braille, drawn with Textual's Line API.

A :class:`Chart` is one widget: a title line with its window and a coloured legend, a
plot area of braille cells (2 × 4 dots a cell, so a 60-column plot has 120 points across)
with a y axis on the left, and a time axis at the bottom. ``plot`` turns the series into
one Strip per line and refreshes the widget only when the picture changed; ``render_line``
hands back the stored strips. No Rich renderable is built per frame, and nothing is drawn
while the data stand still (textual-plotext rebuilds the whole plot on every refresh:
CONSOLE.md, and issue 24's notes).

Time runs right to left from "now": a window of N samples maps onto the plot's dot
columns, so a chart with little history is drawn at its right end, and gaps (``None``)
stay gaps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.ui.history import History, Window

# the dot bits of a braille cell: DOT[column][row], row 0 at the top
DOT = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
PALETTE = ("green", "cyan", "yellow", "magenta", "bright_blue", "red", "white", "bright_green")
AXIS = 9  # columns of the y axis labels (the widest is "999.9 k ")
BRIDGE_S = 1.5  # a line crosses up to this much time without samples (a slow tick)


@dataclass(frozen=True)
class TimeBase:
    """The times of a window's samples (engine seconds, oldest first) and its span."""

    times: Sequence[float]
    seconds: float


@dataclass(frozen=True)
class Line:
    """One series of a chart: legend label, samples (oldest first), style."""

    label: str
    values: Sequence[float | None]
    style: str


def nice_top(v: float) -> float:
    """The smallest 1-2-5 step at or above ``v`` (the y axis' top)."""
    if v <= 0:
        return 1.0
    e = 10.0 ** math.floor(math.log10(v))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * e >= v * (1 - 1e-9):
            return m * e
    return 10.0 * e  # pragma: no cover - the loop always returns


def short(v: float) -> str:
    """An axis label: 1.5 k, 20 k, 1.2 M, 350, 0.5."""
    for scale, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            x = v / scale
            return f"{x:.1f}".rstrip("0").rstrip(".") + f" {p}"
    return f"{v:.1f}".rstrip("0").rstrip(".") if v % 1 else f"{v:.0f}"


def columns(
    values: Sequence[float | None], times: Sequence[float], seconds: float, dots: int
) -> list[float | None]:
    """``values`` at ``times`` (oldest first) as ``dots`` points across the last
    ``seconds`` up to the newest time: each point is the mean of the samples in its slice
    of time, None where it has none. Vectorised (numpy): it runs for every series."""
    n = min(len(values), len(times))
    if n == 0 or dots <= 0:
        return [None] * max(dots, 0)
    v = np.array([np.nan if x is None else x for x in values[len(values) - n :]], dtype=float)
    t = np.asarray(times[len(times) - n :], dtype=float)
    idx = np.floor((t - (t[-1] - seconds)) * dots / seconds).astype(np.int64)
    idx = np.minimum(idx, dots - 1)  # the newest sample is the last point
    ok = (idx >= 0) & ~np.isnan(v)
    sums = np.bincount(idx[ok], weights=v[ok], minlength=dots)
    cnt = np.bincount(idx[ok], minlength=dots)
    return [float(x) / c if c else None for x, c in zip(sums.tolist(), cnt.tolist(), strict=True)]


@lru_cache(maxsize=64)
def _style(spec: str) -> Style:
    return Style.parse(spec) if spec else Style()


class Chart(Widget):
    """A braille line chart. ``plot(lines, tb, ...)`` draws; nothing else is needed."""

    DEFAULT_CSS = """
    Chart { height: 1fr; width: 1fr; min-height: 4; }
    """

    def __init__(self, title: str, unit: str, **kw) -> None:
        super().__init__(**kw)
        self.title = title
        self.unit = unit
        self._strips: list[Strip] = []
        self._key: tuple | None = None
        self._blank: Strip | None = None

    def plot(
        self,
        lines: Sequence[Line],
        tb: TimeBase,
        window: str,
        *,
        top: float | None = None,
        axis: Callable[[float], str] = short,
        note: str = "",
    ) -> bool:
        """Draw ``lines`` at the times of ``tb`` over its seconds, labelled ``window``.
        ``top``: a fixed y-axis top (the conntrack max), else a 1-2-5 step above the data.
        Returns whether the picture changed."""
        w, h = self.size.width, self.size.height
        last = tb.times[-1] if tb.times else None
        key = (w, h, window, top, note, last, tuple((ln.label, tuple(ln.values)) for ln in lines))
        if key == self._key or w < AXIS + 4 or h < 4:
            return False
        self._key = key
        base = self.rich_style
        strips = self._draw(lines, tb, window, top, axis, note, w, h)
        self._strips = [st.adjust_cell_length(w, base) for st in strips]
        self.refresh()
        return True

    def _draw(self, lines, tb: TimeBase, window, top, axis, note, w, h) -> list[Strip]:
        styles = [self.rich_style + _style(ln.style) for ln in lines]
        head = self._head(lines, window, note, styles, self.rich_style, w)
        pw, ph = w - AXIS - 1, h - 1 - len(head)  # plot cells across and down
        if ph < 1:  # a chart squeezed to its legend: the legend, no plot
            return head[:h]
        dots = 2 * pw
        points = [columns(ln.values, tb.times, tb.seconds, dots) for ln in lines]
        bridge = max(1, round(dots * BRIDGE_S / tb.seconds))  # empty points a line crosses
        peak = max((v for pts in points for v in pts if v is not None), default=0.0)
        top = top if top else nice_top(peak)
        mask = [[0] * pw for _ in range(ph)]
        color = [[-1] * pw for _ in range(ph)]
        levels = 4 * ph
        for i, pts in enumerate(points):
            prev: int | None = None
            gap = 0
            for x, v in enumerate(pts):
                if v is None:  # no sample here: a short gap is crossed, a long one breaks
                    gap += 1
                    if gap > bridge:
                        prev = None
                    continue
                gap = 0
                lv = max(0, min(levels - 1, round(v / top * (levels - 1))))
                lo, hi = (lv, lv) if prev is None else (min(lv, prev), max(lv, prev))
                for level in range(lo, hi + 1):  # join to the previous point: a line
                    row, sub = divmod(levels - 1 - level, 4)
                    mask[row][x // 2] |= DOT[x % 2][sub]
                    color[row][x // 2] = i
                prev = lv
        base = self.rich_style
        dim = base + _style("dim")
        out = list(head)
        for r in range(ph):
            label = axis(top) if r == 0 else ("0" if r == ph - 1 else "")
            if r == ph // 2 and ph >= 5:
                label = axis(top / 2)
            segs = [Segment(label.rjust(AXIS - 1) + " ", dim), Segment("┤" if label else "│", dim)]
            segs += _cells(mask[r], color[r], styles, base)
            out.append(Strip(segs))
        left, mid, right = f"└ -{window}", "-" + _half(window), "now ┘"
        under = list(" " * w)
        for pos, text in ((AXIS, left), (AXIS + 1 + pw // 2 - len(mid) // 2, mid)):
            under[pos : pos + len(text)] = text
        under[w - len(right) : w] = right
        out.append(Strip([Segment("".join(under)[:w], dim)]))
        return out

    def _head(self, lines, window, note, styles, base, w) -> list[Strip]:
        """The title line, then the legend: on the title line when it fits, else packed
        into as few lines as it takes (at most 3), so no series goes unnamed."""
        rows: list[list[Segment]] = [
            [Segment(f" {self.title} ({self.unit}) · {window} ", base + _style("bold"))]
        ]
        items = [
            [Segment("━ ", st), Segment(ln.label + "  ", base)]
            for ln, st in zip(lines, styles, strict=True)
            if ln.label
        ]
        if note:
            items.append([Segment(note, base + _style("dim"))])
        used = rows[0][0].cell_length
        for item in items:
            size = sum(seg.cell_length for seg in item)
            if used + size > w and len(rows) < 3:
                rows.append([Segment(" ", base)])
                used = 1
            rows[-1] += item
            used += size
        return [Strip(r).crop(0, w) for r in rows]

    def render_line(self, y: int) -> Strip:
        # strips are stored at the widget's width; rich_style is not read per line (it
        # resolves the CSS each time: the largest cost of a repaint when profiled)
        if y < len(self._strips):
            return self._strips[y]
        if self._blank is None or self._blank.cell_length != self.size.width:
            self._blank = Strip.blank(self.size.width, self.rich_style)
        return self._blank


def _cells(mask: list[int], color: list[int], styles: list[Style], base: Style) -> list[Segment]:
    """One plot row as segments, a run of cells of one colour per segment."""
    segs: list[Segment] = []
    run: list[str] = []
    run_c = -2
    for m, c in zip(mask, color, strict=True):
        c = c if m else -1
        if c != run_c and run:
            segs.append(Segment("".join(run), styles[run_c] if run_c >= 0 else base))
            run = []
        run_c = c
        run.append(chr(0x2800 + m) if m else " ")
    if run:
        segs.append(Segment("".join(run), styles[run_c] if run_c >= 0 else base))
    return segs


def _half(window: str) -> str:
    n, unit = window.split()
    return f"{int(n) // 2} {unit}"


# ---------------------------------------------------------------------- what is drawn
def pps_lines(hist: History, ports: Sequence[str], win: Window) -> list[Line]:
    """Tx and Rx pps of each port (Tx in the port's first colour, Rx in its second), and
    the requested rate where it changes in the window (a rate shape, a rate key): a dim
    line that the Tx line should follow."""
    out = []
    for i, p in enumerate(ports):
        req = hist.values(("req", p), win)
        asked = {round(v) for v in req if v is not None}
        if len(asked) > 1:
            out.append(Line(f"{p} req", req, "grey50"))
        out.append(Line(f"{p} tx", hist.values(("tx", p), win), PALETTE[(2 * i) % len(PALETTE)]))
        out.append(
            Line(f"{p} rx", hist.values(("rx", p), win), PALETTE[(2 * i + 1) % len(PALETTE)])
        )
    return out


def lost_lines(hist: History, ports: Sequence[str], win: Window) -> list[Line]:
    """Frames lost per second on the streams each port sends."""
    return [
        Line(p, hist.values(("lost", p), win), PALETTE[(2 * i) % len(PALETTE)])
        for i, p in enumerate(ports)
    ]


def latency_lines(hist: History, streams: Sequence[str], win: Window) -> list[Line]:
    """p50 and p99 latency (µs) of each stream."""
    out = []
    for i, s in enumerate(streams):
        c = PALETTE[(2 * i) % len(PALETTE)], PALETTE[(2 * i + 1) % len(PALETTE)]
        out.append(Line(f"{s} p50", hist.values(("p50", s), win), c[0]))
        out.append(Line(f"{s} p99", hist.values(("p99", s), win), c[1]))
    return out


def goodput_lines(hist: History, flows: Sequence[str], win: Window) -> list[Line]:
    """Goodput (bit/s) of each socket flow."""
    return [
        Line(f, hist.values(("goodput", f), win), PALETTE[i % len(PALETTE)])
        for i, f in enumerate(flows)
    ]


def rtt_lines(hist: History, flows: Sequence[str], win: Window) -> list[Line]:
    """Smoothed RTT (ms) of each TCP flow of ``flows`` while it sends (a UDP flow has no
    RTT series); each flow in the colour it has on the goodput chart."""
    return [
        Line(f, hist.values(("rtt", f), win), PALETTE[i % len(PALETTE)])
        for i, f in enumerate(flows)
        if ("rtt", f) in hist.series
    ]


def app_lines(hist: History, flows: Sequence[str], win: Window, what: str) -> list[Line]:
    """An app flow's ``cps`` (connections set up per second) or ``open`` (concurrent
    connections) series, each flow in the colour it has on the other charts."""
    return [
        Line(f, hist.values((what, f), win), PALETTE[i % len(PALETTE)])
        for i, f in enumerate(flows)
        if (what, f) in hist.series
    ]


def draw_conntrack(chart: Chart, hist: History, win: Window) -> None:
    """Conntrack entries against the max: the top of the chart is the max when known."""
    mx = next((v for v in reversed(hist.values(("ct_max", ""), win)) if v), None)
    counts = hist.values(("ct", ""), win)
    if mx:
        note = f"top = max {mx:,.0f} entries"
    elif all(v is None for v in counts):
        note = "no DUT probe (profile has no dut:)"
    else:
        note = "max unknown"
    chart.plot([Line("", counts, "green")], timebase(hist, win), win.name, top=mx, note=note)


def charts_fit(width: int, height: int) -> bool:
    """Charts above 80x24 (from 100x30); smaller terminals keep the sparkline rows."""
    return width >= 100 and height >= 30


FRAMES, MIXED, FLOWS = "frames", "mixed", "flows"  # what a profile sends (main_layout)
TOP = {  # the charts beside Main's port table: (title, unit) of #chart-tx and #chart-rx
    FRAMES: (("Tx rate", "pps"), ("Rx rate", "pps")),
    MIXED: (("Tx rate", "pps"), ("Rx rate", "pps")),
    FLOWS: (("Goodput", "bit/s"), ("RTT", "ms")),
}
BELOW = {  # the charts below it
    FRAMES: ("lost", "lat", "ct"),
    MIXED: ("lost", "lat", "good", "rtt", "ct"),
    FLOWS: ("ct",),
}


def main_layout(desc: EngineDescription) -> str:
    """FRAMES (frame streams only), MIXED (streams and socket flows) or FLOWS (socket
    flows only: goodput and RTT take the pps charts' place beside the table)."""
    if not desc.flows:
        return FRAMES
    return MIXED if desc.streams else FLOWS


def show_charts(
    screen: Widget, grid: Widget, height: int, ncols: int, layout: str = FRAMES
) -> bool:
    """Lay out the Main screen for its size: the port table with two charts beside it and
    the ``layout``'s charts below, or (small) the table alone. Returns whether charts show."""
    on = charts_fit(screen.app.size.width, screen.app.size.height)
    lw, cw = getattr(grid, "label_width", 13), getattr(grid, "col_width", 14)
    grid.styles.width = lw + cw * ncols if on else "1fr"
    screen.query_one("#main-top").styles.height = height
    screen.query_one("#chart-pps").display = on
    screen.query_one("#main-charts").display = on
    for chart, (title, unit) in zip(screen.query("#chart-pps Chart"), TOP[layout], strict=True):
        if isinstance(chart, Chart) and (chart.title, chart.unit) != (title, unit):
            chart.title, chart.unit, chart._key = title, unit, None  # drawn anew
    for chart in screen.query("#main-charts Chart"):
        chart.display = (chart.id or "").removeprefix("chart-") in BELOW[layout]
    return on


def draw_main_charts(
    screen: Widget, hist: History, win: Window, snap: StatsSnapshot, layout: str = FRAMES
) -> None:
    """The Main screen's charts from the history rings (each redraws only if it moved)."""
    ports = [p.name for p in snap.ports]
    flows = [f.name for f in snap.flows]
    n = timebase(hist, win)
    top = screen.query_one("#chart-tx", Chart), screen.query_one("#chart-rx", Chart)
    if layout == FLOWS:
        top[0].plot(goodput_lines(hist, flows, win), n, win.name)
        top[1].plot(rtt_lines(hist, flows, win), n, win.name, note=_no_tcp(snap))
    else:
        for chart, kind in zip(top, ("tx", "rx"), strict=True):  # a port's Tx never hides
            lines = [  # under another's Rx
                Line(p, hist.values((kind, p), win), PALETTE[(2 * i) % len(PALETTE)])
                for i, p in enumerate(ports)
            ]
            chart.plot(lines, n, win.name)
        screen.query_one("#chart-lost", Chart).plot(lost_lines(hist, ports, win), n, win.name)
        streams = [s.name for s in snap.streams]
        screen.query_one("#chart-lat", Chart).plot(latency_lines(hist, streams, win), n, win.name)
    if layout == MIXED:
        screen.query_one("#chart-good", Chart).plot(goodput_lines(hist, flows, win), n, win.name)
        rtt = rtt_lines(hist, flows, win)
        screen.query_one("#chart-rtt", Chart).plot(rtt, n, win.name, note=_no_tcp(snap))
    draw_conntrack(screen.query_one("#chart-ct", Chart), hist, win)


def _no_tcp(snap: StatsSnapshot) -> str:
    return "" if any(f.protocol == "tcp" for f in snap.flows) else "no TCP flow"


def timebase(hist: History, win: Window) -> TimeBase:
    """The sample times of a window's ring and the seconds it spans."""
    return TimeBase(hist.times(win), float(win.seconds))


__all__ = [
    "AXIS",
    "BELOW",
    "FLOWS",
    "FRAMES",
    "MIXED",
    "TOP",
    "PALETTE",
    "Chart",
    "Line",
    "app_lines",
    "charts_fit",
    "columns",
    "draw_main_charts",
    "draw_conntrack",
    "goodput_lines",
    "latency_lines",
    "lost_lines",
    "main_layout",
    "nice_top",
    "pps_lines",
    "rtt_lines",
    "short",
    "show_charts",
    "TimeBase",
    "timebase",
]
