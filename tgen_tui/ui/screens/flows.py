"""The Flows screen (``n``): the profile's kernel socket flows (``transport:``), one row
each: goodput, RTT, retransmits, UDP loss and state at 80 columns; its ports, goodput over
the run, min RTT, cwnd and jitter from 120; the requested rate, the kernel's delivery rate
and the throughput equation's figure (Reno) from 160. Below: Jain's fairness index (live
and over the run), every figure of the highlighted flow, and goodput and RTT charts per
flow (a sparkline of the highlighted flow's goodput at 80x24).

A profile with request/response (app) flows shows their columns instead: connections set
up per second, open connections, failed, transactions per second and setup p99 at 80
columns (goodput, transaction p99 and retransmits from 120), their figures below (counts,
failures by reason, setup and transaction percentiles), and the charts become connections
per second and concurrent connections (the sparkline: the highlighted flow's conn/s).

Every figure is the snapshot's (:mod:`tgen_tui.engine.flowfigures` and
:mod:`tgen_tui.engine.appfigures` define them); the screen only formats them. ``r``, ``+`` and ``-`` act on the highlighted flow: a UDP flow
takes a bit rate, a TCP flow is refused (ui/rates.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Label

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription, FlowInfo
from tgen_tui.engine.appfigures import failure_text
from tgen_tui.engine.snapshot import FlowStats, StatsSnapshot
from tgen_tui.ui.charts import Chart, app_lines, charts_fit, goodput_lines, rtt_lines, timebase
from tgen_tui.ui.screens.base import ViewScreen
from tgen_tui.ui.widgets import OrderedFooter, Spark, TextWidget

FLOW_STATE_STYLE = {
    "idle": "dim",
    "connecting": "yellow",
    "sending": "bold green",
    "off": "dim",
    "draining": "yellow",
    "stopped": "cyan",
    "failed": "bold red",
}
NO_FLOWS = " no socket flows: the profile has no transport: entries (see cc-regression.yaml)"


#: what the screen shows besides the table, a line each: title, fairness, the detail's
#: margin and 8 lines, the sparkline's margin and row, footer
FIXED_LINES = ("title", "fairness", "", *["detail"] * 8, "", "spark", "footer")


def ms(v: float | None) -> str:
    """Milliseconds in the unit that reads best: '2.26 ms', '812.0 µs'."""
    return fmt.ns(None if v is None else v * 1e6)


def proto(f: FlowStats | FlowInfo) -> str:
    if f.app is not None:
        return f"{f.app} {f.protocol}" if f.app != "request-response" else f"rr {f.protocol}"
    return f"{f.protocol} {f.cc}" if f.cc else f.protocol


def flow_state(f: FlowStats) -> Text:
    return Text(f.state, style=FLOW_STATE_STYLE.get(f.state, ""))


def _udp(f: FlowStats, show: Callable[[FlowStats], str]) -> str:
    return show(f) if f.protocol == "udp" else "-"


def _tcp(f: FlowStats, show: Callable[[FlowStats], str]) -> str:
    return show(f) if f.protocol == "tcp" else "-"


# key, label, width (one leading space included), shown from this many columns, value
FLOW_COLS: tuple[tuple[str, str, int, int, Callable[[FlowStats], Text | str]], ...] = (
    ("name", "Flow", 13, 0, lambda f: f.name),
    ("proto", "Proto", 10, 0, proto),
    ("state", "State", 11, 0, flow_state),
    ("good", "Goodput", 13, 0, lambda f: fmt.bps(f.goodput_bps)),
    ("rtt", "RTT", 9, 0, lambda f: _tcp(f, lambda f: ms(f.rtt_ms))),
    ("retr", "Retr.", 7, 0, lambda f: _tcp(f, lambda f: fmt.count(f.retransmits))),
    ("loss", "Loss", 9, 0, lambda f: _udp(f, lambda f: fmt.pct(f.loss_pct))),
    ("ports", "Ports", 8, 120, lambda f: f"{f.port}→{f.rx_port}"),
    ("run", "Run mean", 13, 120, lambda f: fmt.bps(f.goodput_run_bps)),
    ("min", "min RTT", 9, 120, lambda f: _tcp(f, lambda f: ms(f.min_rtt_ms))),
    ("cwnd", "cwnd", 6, 120, lambda f: _tcp(f, lambda f: fmt.count(f.cwnd))),
    ("jit", "Jitter", 9, 120, lambda f: _udp(f, lambda f: ms(f.jitter_ms))),
    ("req", "Requested", 13, 160, lambda f: _udp(f, lambda f: fmt.bps(f.requested_bps))),
    ("deliv", "Delivery", 13, 160, lambda f: _tcp(f, lambda f: fmt.bps(f.delivery_rate_bps))),
    ("mathis", "Mathis", 13, 160, lambda f: fmt.bps(f.mathis_bps) if f.mathis_bps else "-"),
)


def _app(f: FlowStats, show: Callable[[FlowStats], str]) -> str:
    return show(f) if f.app is not None else "-"


def _rate(v: float | None) -> str:
    return "-" if v is None else fmt.count(round(v))


def _p(lat, q: str) -> str:
    v = getattr(lat, q) if lat is not None else None
    return fmt.ns(v)


#: the columns of a profile with request/response flows (same shape as FLOW_COLS)
APP_COLS: tuple[tuple[str, str, int, int, Callable[[FlowStats], Text | str]], ...] = (
    ("name", "Flow", 13, 0, lambda f: f.name),
    ("proto", "Proto", 10, 0, proto),
    ("state", "State", 11, 0, flow_state),
    ("cps", "Conn/s", 9, 0, lambda f: _app(f, lambda f: _rate(f.established_per_s))),
    ("open", "Open", 8, 0, lambda f: _app(f, lambda f: fmt.count(f.concurrent))),
    ("fail", "Failed", 8, 0, lambda f: _app(f, lambda f: fmt.count(f.failed))),
    ("tps", "Txn/s", 9, 0, lambda f: _app(f, lambda f: _rate(f.transactions_per_s))),
    ("setup", "Setup p99", 10, 0, lambda f: _app(f, lambda f: _p(f.setup_ns, "p99"))),
    ("good", "Goodput", 13, 120, lambda f: fmt.bps(f.goodput_bps)),
    ("txn", "Txn p99", 10, 120, lambda f: _app(f, lambda f: _p(f.transaction_ns, "p99"))),
    ("retr", "Retr.", 7, 120, lambda f: fmt.count(f.retransmits)),
    ("ports", "Ports", 8, 160, lambda f: f"{f.port}→{f.rx_port}"),
    ("att", "Attempted", 11, 160, lambda f: _app(f, lambda f: fmt.count(f.attempted))),
)


def tier(width: int) -> int:
    """Which columns a terminal this wide shows: 0, 120 or 160."""
    return 160 if width >= 160 else 120 if width >= 120 else 0


def fairness_text(snap: StatsSnapshot) -> Text:
    """Jain's index, live (over the interval's goodput) and over the run."""
    t = Text(" fairness (Jain's index, 1 = equal shares): ", style="bold")
    live, run = snap.fairness_jain, snap.fairness_jain_run
    t.append(f"live {live:.3f}" if live is not None else "live -")
    t.append(f" · over the run {run:.3f}" if run is not None else " · over the run -")
    t.append("  (TCP flows due to send; UDP when none)", style="dim")
    return t


def detail_lines(f: FlowStats, info: FlowInfo | None) -> list[str]:
    """Every figure of one flow, in lines that fit 80 columns."""
    where = f"worker {f.worker} on core {f.core}" if f.worker is not None else ""
    out = [f" {f.name}  {proto(f)}  {f.port} → {f.rx_port}  {f.state}  {where}"]
    if info is not None:
        out.append(f"  from {info.src} to {info.dst}")
    out.append(
        f"  goodput   {fmt.bps(f.goodput_bps)} now · {fmt.bps(f.goodput_run_bps)} over the "
        f"run ({fmt.seconds(f.active_s)} due to send)"
    )
    out.append(
        f"  bytes     sent {fmt.nbytes(f.tx_bytes)} · read {fmt.nbytes(f.rx_bytes)}"
        f" · errors {fmt.count(f.errors)}"
    )
    if f.app is not None:
        return out[:1] + app_lines_text(f)
    return out + (tcp_lines(f) if f.protocol == "tcp" else udp_lines(f))


LOAD_TEXT = {"cps": "conn/s", "concurrent": "open", "tps": "transactions/s"}


def app_lines_text(f: FlowStats) -> list[str]:
    """A request/response flow's figures: connections, failures, rates, times (7 lines)."""
    sl, tl = f.setup_ns, f.transaction_ns
    return [
        f"  load      {fmt.count(round(f.target or 0))} {LOAD_TEXT.get(f.load or '', '')} asked"
        + (f" · achieved {fmt.pct(f.achieved_pct, 1)}" if f.achieved_pct is not None else "")
        + f" · open {fmt.count(f.concurrent)} · goodput {fmt.bps(f.goodput_bps)}",
        f"  conns     attempted {fmt.count(f.attempted)} · established "
        f"{fmt.count(f.established)} · closed {fmt.count(f.closed)}",
        f"  failed    {fmt.count(f.failed)}: {failure_text(f)}",
        f"  now       {_rate(f.established_per_s)} conn/s · {_rate(f.transactions_per_s)} "
        f"transactions/s · {fmt.count(f.transactions)} done · retr. {fmt.count(f.retransmits)}",
        f"  setup     p50 {_p(sl, 'p50')} · p99 {_p(sl, 'p99')} · max {_p(sl, 'max')}"
        " (connect to writable)",
        f"  txn       p50 {_p(tl, 'p50')} · p99 {_p(tl, 'p99')} · max {_p(tl, 'max')}"
        " (request to response)",
        f"  server    {fmt.count(f.served)} responses written",
    ]


def tcp_lines(f: FlowStats) -> list[str]:
    out = [
        f"  RTT       {ms(f.rtt_ms)} · mean {ms(f.rtt_mean_ms)} · min {ms(f.min_rtt_ms)}"
        f" · var {ms(f.rttvar_ms)}",
        f"  segments  retransmitted {fmt.count(f.retransmits)} of {fmt.count(f.data_segs_out)}"
        f" ({fmt.pct(f.retransmit_pct, 3)}) · connections {fmt.count(f.connections)}",
        f"  window    cwnd {fmt.count(f.cwnd)} × {fmt.count(f.mss)} B · delivery rate "
        f"{fmt.bps(f.delivery_rate_bps)} (the kernel's)",
    ]
    if f.cc == "reno":
        if f.mathis_bps:
            ratio = f"{f.mathis_ratio:.2f}" if f.mathis_ratio is not None else "-"
            out.append(
                f"  Mathis    {fmt.bps(f.mathis_bps)} for Reno (MSS/RTT × 1.22/√p)"
                f" · goodput {ratio} of it"
            )
        else:
            out.append("  Mathis    - (needs retransmits: p is their share)")
    return out


def udp_lines(f: FlowStats) -> list[str]:
    return [
        f"  rate      requested {fmt.bps(f.requested_bps)} · datagrams sent "
        f"{fmt.count(f.tx_packets)} · received {fmt.count(f.rx_packets)}",
        f"  loss      {fmt.count(f.lost)} lost ({fmt.pct(f.loss_pct, 3)}) · jitter "
        f"{ms(f.jitter_ms)}",
    ]


class FlowsScreen(ViewScreen):
    """Per socket flow: goodput, RTT, cwnd, retransmits, UDP loss and jitter; fairness."""

    VIEW = "flows"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        yield DataTable(id="flows", cursor_type="row", zebra_stripes=True)
        yield TextWidget("", id="flow-fairness")
        yield TextWidget("", id="flow-detail")
        yield Horizontal(
            Label("goodput", classes="spark-label"),
            Spark(id="flow-spark"),
            id="flow-spark-row",
            classes="spark-row",
        )
        with Horizontal(id="flow-charts"):
            yield Chart("Goodput", "bit/s", id="fchart-good")
            yield Chart("RTT", "ms", id="fchart-rtt")
        yield OrderedFooter()

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        t = self.query_one("#flows", DataTable)
        t.clear(columns=True)
        t.fixed_columns = 1
        t.cell_padding = 0  # widths include one leading space
        self._tier = tier(self.app.size.width)
        self._apps = any(f.app is not None for f in desc.flows)
        self._cols = [c for c in (APP_COLS if self._apps else FLOW_COLS) if c[3] <= self._tier]
        for key, label, width, _, _ in self._cols:
            t.add_column(" " + label, width=width, key=key)
        for f in desc.flows:
            first = {"name": f.name, "proto": proto(f), "ports": f"{f.port}→{f.rx_port}"}
            t.add_row(*[" " + first.get(c[0], "-") for c in self._cols], key=f.name)
        # every flow a row, as far as the terminal leaves room for the lines below it
        room = max(3, self.app.size.height - len(FIXED_LINES))
        t.styles.height = min(len(desc.flows) + 1, room) if desc.flows else 1
        self._cells: dict[tuple[str, str], object] = {}
        self._charts_on = charts_fit(self.app.size.width, self.app.size.height)
        self.query_one("#flow-charts").display = self._charts_on and bool(desc.flows)
        self.query_one("#flow-spark-row").display = not self._charts_on and bool(desc.flows)
        titles = ((("Connections/s", "conn/s"), ("Concurrent", "connections")) if self._apps
                  else (("Goodput", "bit/s"), ("RTT", "ms")))  # fmt: skip
        for cid, (title, unit) in zip(("#fchart-good", "#fchart-rtt"), titles, strict=True):
            chart = self.query_one(cid, Chart)
            chart.title, chart.unit = title, unit
        self.query_one("#flow-spark-row Label", Label).update("conn/s" if self._apps else "goodput")
        self._tick = 0

    def on_resize(self) -> None:
        if self.desc is not None:
            self.setup(self.desc)

    def selected_flow(self) -> str | None:
        """The highlighted flow's name (None: the profile has no flow)."""
        found = self.query("#flows")  # not composed yet: none (the app asks early)
        t = found.first(DataTable) if found else None
        if t is None or not t.row_count:
            return None
        row_key, _ = t.coordinate_to_cell_key(Coordinate(t.cursor_row, 0))
        return row_key.value

    def update_view(self, snap: StatsSnapshot) -> None:
        t = self.query_one("#flows", DataTable)
        for f in snap.flows:
            if f.name not in t.rows:  # type: ignore[operator]
                continue
            for key, _, _, _, value in self._cols[1:]:
                v = value(f)
                if self._cells.get((f.name, key)) != v:
                    self._cells[(f.name, key)] = v
                    t.update_cell(f.name, key, Text(" ") + (v if isinstance(v, Text) else Text(v)))
        self._text(snap)
        self._tick += 1
        app: Any = self.app
        moved = getattr(self, "_chart_window", None) is not app.window  # g: at once
        if self._tick <= 3 or self._tick % (5 if self._charts_on else 3) == 1 or moved:
            self._chart_window = app.window
            self._history(snap, app)

    def _text(self, snap: StatsSnapshot) -> None:
        """The fairness line and the highlighted flow's figures (only when they changed)."""
        desc = self.desc
        if desc is None or not desc.flows:
            self._show("#flow-fairness", Text(NO_FLOWS, style="dim"))
            return
        self._show("#flow-fairness", fairness_text(snap))
        name = self.selected_flow()
        f = next((x for x in snap.flows if x.name == name), None)
        if f is not None:
            info = next((x for x in desc.flows if x.name == name), None)
            # a fixed height (tgen.tcss: the most lines a flow has): the charts below
            # keep their size when another flow is highlighted
            self._show("#flow-detail", "\n".join(detail_lines(f, info)))

    def _show(self, widget: str, text: Text | str) -> None:
        if self._cells.get((widget, "")) != text:
            self._cells[(widget, "")] = text
            self.query_one(widget, TextWidget).show_text(text)

    def _history(self, snap: StatsSnapshot, app: Any) -> None:
        hist, win = app.history, app.window
        names = [f.name for f in snap.flows]
        if not names:
            return
        if not self._charts_on:
            name = self.selected_flow() or names[0]  # the flow whose figures are above
            key = ("cps", name) if ("cps", name) in hist.series else ("goodput", name)
            vals = [v or 0.0 for v in hist.values(key, win)]
            self.query_one("#flow-spark", Spark).set_data(vals)
            return
        n = timebase(hist, win)
        if self._apps:
            cps, conc = app_lines(hist, names, win, "cps"), app_lines(hist, names, win, "open")
            self.query_one("#fchart-good", Chart).plot(cps, n, win.name)
            self.query_one("#fchart-rtt", Chart).plot(conc, n, win.name)
            return
        self.query_one("#fchart-good", Chart).plot(goodput_lines(hist, names, win), n, win.name)
        note = "" if any(f.protocol == "tcp" for f in snap.flows) else "no TCP flow"
        rtt = rtt_lines(hist, names, win)
        self.query_one("#fchart-rtt", Chart).plot(rtt, n, win.name, note=note)


__all__ = [
    "APP_COLS",
    "FLOW_COLS",
    "app_lines_text",
    "FlowsScreen",
    "detail_lines",
    "fairness_text",
    "flow_state",
    "ms",
    "proto",
    "tier",
]
