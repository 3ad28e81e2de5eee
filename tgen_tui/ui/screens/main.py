"""The Main screen: Pktgen's layout, one column per port plus Total, metrics in rows
(each row declared once, :class:`MainRow`), sparklines at 80x24 and charts above.

A profile with socket flows gets a Goodput row (the goodput of the flows each port
sends), goodput sparklines, and goodput and RTT charts per flow: beside the frame charts
in a mixed profile, in the frame charts' place in a transport-only one (ui/charts.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.figures import achieved_pct
from tgen_tui.engine.snapshot import PortStats, StatsSnapshot
from tgen_tui.ui.charts import Chart, draw_main_charts, main_layout, show_charts
from tgen_tui.ui.history import port_goodput
from tgen_tui.ui.screens.base import ViewScreen
from tgen_tui.ui.widgets import ConntrackGauge, Grid, OrderedFooter, Spark, state_text

COL = 13  # width of a port column on the Main screen


Cell = Text | str


@dataclass(frozen=True)
class PortSums:
    """What a port's column adds up from what it sends: the frames lost on its streams,
    the goodput of its socket flows (None: it sends no flow)."""

    lost: int = 0
    goodput_bps: float | None = None


SUM = "sum"  # Total: the row's format applied to the sum of the ports' values
BLANK = ""  # Total: empty


@dataclass(frozen=True)
class MainRow:
    """One row of the Main screen, declared once: the per-port cells and the Total cell
    both come from it. ``value(port, sums)`` reads a port (``sums``: :class:`PortSums`),
    ``show`` formats a value, ``total`` is SUM, BLANK or a function of the
    snapshot; ``large`` rows appear from 40 lines up."""

    key: str
    label: str
    value: Callable[[PortStats, PortSums], Any]
    show: Callable[[Any], Cell]
    total: str | Callable[[StatsSnapshot], Cell] = SUM
    large: bool = False

    def total_cell(self, values: list[Any], snap: StatsSnapshot) -> Cell:
        if callable(self.total):
            return self.total(snap)
        if self.total == BLANK:
            return ""
        return self.show(_sum(values))


def _sum(values: list[Any]) -> Any:
    """Numbers add; tuples add element by element (a ratio's numerator and denominator)."""
    if values and isinstance(values[0], tuple):
        return tuple(sum(x) for x in zip(*values, strict=True))
    return sum(values)


def _achieved(sent_and_due: tuple[float, float]) -> str:
    """Achieved against requested, over the ports that sent (requested 0 where none sent)."""
    pct = achieved_pct(*sent_and_due)  # the engine's one definition
    return fmt.pct(pct, 1) if pct is not None else "-"


def _lost(n: int) -> Text:
    return Text(fmt.count(n), style="bold red" if n else "")


def _running(snap: StatsSnapshot) -> Text:
    running = sum(p.state == "running" for p in snap.ports)
    return Text(f"{running} running", style="bold green" if running else "dim")


def _rounded(v: float) -> str:
    return fmt.count(round(v))


# fmt: off
MAIN_ROWS: tuple[MainRow, ...] = (
    MainRow("state", "State", lambda p, _: p.state, state_text, _running),
    MainRow("link", "Link / core",
            lambda p, _: f"{p.link} · c{p.core if p.core is not None else '-'}", str,
            lambda snap: f"{len(snap.workers)} workers"),
    MainRow("tx_pps", "Tx pps", lambda p, _: p.tx_pps, _rounded),
    MainRow("rx_pps", "Rx pps", lambda p, _: p.rx_pps, _rounded),
    MainRow("tx_mbps", "Tx Mbit/s", lambda p, _: p.tx_bps, fmt.mbps),
    MainRow("rx_mbps", "Rx Mbit/s", lambda p, _: p.rx_bps, fmt.mbps),
    MainRow("req", "Requested", lambda p, _: p.requested_pps, fmt.pps),
    MainRow("ach", "Achieved",
            lambda p, _: (p.achieved_pps, p.requested_pps if p.tx_frames else 0.0), _achieved),
    MainRow("tx", "Tx frames", lambda p, _: p.tx_frames, fmt.count),
    MainRow("rx", "Rx frames", lambda p, _: p.rx_frames, fmt.count),
    MainRow("lost", "Lost frames", lambda _, x: x.lost, _lost),
    MainRow("errors", "Tx retries", lambda p, _: p.tx_errors, fmt.count),  # Help: ui/glossary.py
    MainRow("drops", "Rx drops", lambda p, _: p.rx_drops + p.if_rx_dropped, fmt.count),
    MainRow("if_tx", "If tx frames", lambda p, _: p.if_tx_frames, fmt.count, large=True),
    MainRow("if_rx", "If rx frames", lambda p, _: p.if_rx_frames, fmt.count, large=True),
    MainRow("tx_bytes", "Tx bytes", lambda p, _: p.tx_bytes, fmt.nbytes, large=True),
    MainRow("rx_bytes", "Rx bytes", lambda p, _: p.rx_bytes, fmt.nbytes, large=True),
    MainRow("backlog", "Due unsent", lambda p, _: p.backlog, fmt.count, large=True),
    MainRow("late", "Late max", lambda p, _: p.late_max_ns, fmt.ns, BLANK, large=True),
    MainRow("speed", "Line rate", lambda p, _: p.speed_bps, fmt.bps, BLANK, large=True),
)
# fmt: on


def _gateway(p: PortStats) -> str:
    """The gateway's MAC; where it does not fit a column (13 characters), its last octets
    after an ellipsis: "…00:00:fe", or "…00:fe/…00:fd" for two (the port page shows them
    whole)."""
    g4, g6 = getattr(p, "gateway_mac", None), getattr(p, "gateway6_mac", None)
    macs = list(dict.fromkeys(g for g in (g4, g6) if g))
    text = "/".join(macs)
    if len(text) > 13:
        tail = 8 if len(macs) == 1 else 5
        text = "/".join("…" + m[-tail:] for m in macs)
    return text or "-"


#: the resolved gateway MAC of ports with a gateway (issue 19): shown once a port has one
GATEWAY_ROW = MainRow("gw", "Gateway MAC", lambda p, _: _gateway(p), str, BLANK)


def _goodput_total(snap: StatsSnapshot) -> str:
    return fmt.mbps(sum(f.goodput_bps for f in snap.flows))


#: the goodput of the socket flows each port sends (profiles with transport: entries)
GOODPUT_ROW = MainRow(
    "goodput", "Goodput Mb/s", lambda _, x: x.goodput_bps, fmt.mbps, _goodput_total
)


def lost_by_port(snap: StatsSnapshot) -> dict[str, int]:
    """Frames lost on the streams each port sends."""
    out: dict[str, int] = {}
    for s in snap.streams:
        out[s.port] = out.get(s.port, 0) + s.lost
    return out


def port_sums(snap: StatsSnapshot) -> dict[str, PortSums]:
    """Each port's :class:`PortSums`."""
    lost = lost_by_port(snap)
    good: dict[str, float] = {}
    for f in snap.flows:
        good[f.port] = good.get(f.port, 0.0) + f.goodput_bps
    return {p.name: PortSums(lost.get(p.name, 0), good.get(p.name)) for p in snap.ports}


class MainScreen(ViewScreen):
    """Pktgen's layout: one column per port plus Total, metrics in rows, pps sparklines."""

    VIEW = "main"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        with Horizontal(id="main-top"):
            yield Grid(id="ports")
            with Vertical(id="chart-pps"):  # Tx and Rx pps; goodput and RTT without frames
                yield Chart("Tx rate", "pps", id="chart-tx")
                yield Chart("Rx rate", "pps", id="chart-rx")
        yield Vertical(id="sparks")
        with Horizontal(id="main-charts"):  # above 80x24; ui/charts.py
            yield Chart("Lost", "frames/s", id="chart-lost")
            yield Chart("Latency", "µs", id="chart-lat")
            yield Chart("Goodput", "bit/s", id="chart-good")
            yield Chart("RTT", "ms", id="chart-rtt")
            yield Chart("Conntrack", "entries", id="chart-ct")
        yield ConntrackGauge(id="gauge")
        yield OrderedFooter()

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        self._build()

    def on_resize(self) -> None:
        if self.desc is not None:
            self._build()

    def _large(self) -> bool:
        return self.app.size.height >= 40

    def _build(self) -> None:
        desc = self.desc
        assert desc is not None
        t = self.query_one("#ports", Grid)
        self._rows = [r for r in MAIN_ROWS if self._large() or not r.large]
        if desc.flows:  # after Rx Mbit/s
            at = next(i for i, r in enumerate(self._rows) if r.key == "rx_mbps") + 1
            self._rows.insert(at, GOODPUT_ROW)
        if getattr(self, "_has_gateway", False):
            self._rows.append(GATEWAY_ROW)
        columns = [(p.name, p.name) for p in desc.ports] + [("total", "Total")]
        t.define(columns, [(r.key, r.label) for r in self._rows])
        self._layout = main_layout(desc)
        self._charts_on = show_charts(self, t, len(self._rows) + 1, len(columns), self._layout)
        sparks = self.query_one("#sparks", Vertical)
        sparks.remove_children()
        if not self._charts_on:
            sparks.mount_all(self._spark_rows(desc))

    def _spark_rows(self, desc: EngineDescription) -> list[Horizontal]:
        """The sparkline rows at 80x24: each port's Tx pps (and Rx from 40 lines), the
        goodput of the flows it sends; in a profile with flows, pps only of a port that
        sends frame streams."""
        kinds = ("tx", "rx") if self._large() else ("tx",)
        rows = []
        for p in desc.ports:
            shown = [k for k in kinds if p.streams or not desc.flows]
            shown += ["goodput"] if desc.port_flows(p.name) else []
            for kind in shown:
                label = f"{p.name} goodput" if kind == "goodput" else f"{p.name} {kind} pps"
                rows.append(
                    Horizontal(
                        Label(label, classes="spark-label"),
                        Spark(id=f"spark-{kind}-{p.name}"),
                        classes="spark-row",
                    )
                )
        return rows

    def _label(self, selected: int) -> None:
        if self.desc is None:
            return
        t = self.query_one("#ports", Grid)
        for i, p in enumerate(self.desc.ports):
            t.header(
                p.name,
                Text(
                    f"{i}:{p.name}" + (" ◀" if i == selected else ""),
                    style="reverse bold" if i == selected else "bold",
                ),
            )

    def update_view(self, snap: StatsSnapshot) -> None:
        app: Any = self.app
        if not getattr(self, "_has_gateway", False) and any(_gateway(p) != "-" for p in snap.ports):
            self._has_gateway = True
            self._build()
        self._label(app.selected)
        t = self.query_one("#ports", Grid)
        sums = port_sums(snap)
        ports = [p for p in snap.ports if p.name in t.columns]
        for row in self._rows:
            values = [row.value(p, sums[p.name]) for p in ports]
            for p, v in zip(ports, values, strict=True):
                t.set(row.key, p.name, row.show(v))
            t.set(row.key, "total", row.total_cell(values, snap))
        self._spark_tick = getattr(self, "_spark_tick", 0) + 1
        moved = getattr(self, "_chart_window", None) is not app.window  # g: at once
        if self._charts_on and (self._spark_tick % 5 == 1 or moved):  # charts at ~2 Hz
            self._chart_window = app.window
            draw_main_charts(self, app.history, app.window, snap, self._layout)
        elif self._spark_tick % 3 == 1 and not self._charts_on:  # sparklines at ~3 Hz
            self._sparks(snap, app)
        t.flush()
        self.query_one("#gauge", ConntrackGauge).show(snap.dut)

    def _sparks(self, snap: StatsSnapshot, app: Any) -> None:
        for p in snap.ports:
            for kind in ("tx", "rx", "goodput"):
                found = self.query(f"#spark-{kind}-{p.name}")
                if not found:
                    continue
                if kind == "goodput":
                    buf = [v or 0.0 for v in app.history.values(port_goodput(p.name), app.window)]
                else:
                    buf = list(app.port_history.get((p.name, kind)) or ())
                if buf:
                    found.first(Spark).set_data(buf)


__all__ = [
    "COL",
    "GATEWAY_ROW",
    "GOODPUT_ROW",
    "MAIN_ROWS",
    "MainRow",
    "MainScreen",
    "PortSums",
    "lost_by_port",
    "port_sums",
]
