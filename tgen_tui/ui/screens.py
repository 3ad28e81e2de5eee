"""The console's screens: Main, Streams, DUT, Workers, Log, Help, and the small modals.

Every view screen builds its tables once from the engine's description (``setup``) and
then only updates cells from each snapshot (``update_view``), called by the app's 10 Hz
tick for the visible screen only. Columns that change have fixed widths, so an update
never re-measures a column.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Input, Label, Log, OptionList, Static

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.flowstats import short_text
from tgen_tui.engine.snapshot import PortStats, StatsSnapshot, StreamStats
from tgen_tui.ui.actions import bindings, help_rows
from tgen_tui.ui.charts import Chart, draw_main_charts, show_charts
from tgen_tui.ui.dut_counters import DutCounters, stream_why
from tgen_tui.ui.widgets import ConntrackGauge, Grid, OrderedFooter, Spark, TextWidget, state_text

COL = 13  # width of a port column on the Main screen


class ViewScreen(Screen):
    """A screen the tick redraws. Subclasses fill ``setup`` and ``update_view``."""

    VIEW = ""

    def __init__(self) -> None:
        super().__init__(name=self.VIEW)
        self.desc: EngineDescription | None = None

    def compose_title(self) -> TextWidget:
        return TextWidget("tgen-tui: starting the engine…", id="title", classes="title")

    def setup(self, desc: EngineDescription) -> None:
        self.desc = desc

    def update_view(self, snap: StatsSnapshot) -> None:  # pragma: no cover - overridden
        pass

    def set_title(self, text: str | Text) -> None:
        self.query_one("#title", TextWidget).show_text(text)


# ------------------------------------------------------------------------ Main
Cell = Text | str
SUM = "sum"  # Total: the row's format applied to the sum of the ports' values
BLANK = ""  # Total: empty


@dataclass(frozen=True)
class MainRow:
    """One row of the Main screen, declared once: the per-port cells and the Total cell
    both come from it. ``value(port, lost)`` reads a port (``lost``: the frames lost on
    its streams), ``show`` formats a value, ``total`` is SUM, BLANK or a function of the
    snapshot; ``large`` rows appear from 40 lines up."""

    key: str
    label: str
    value: Callable[[PortStats, int], Any]
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
    achieved, requested = sent_and_due
    return fmt.pct(100 * achieved / requested, 1) if requested else "-"


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
    MainRow("lost", "Lost frames", lambda _, lost: lost, _lost),
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


def lost_by_port(snap: StatsSnapshot) -> dict[str, int]:
    """Frames lost on the streams each port sends."""
    out: dict[str, int] = {}
    for s in snap.streams:
        out[s.port] = out.get(s.port, 0) + s.lost
    return out


class MainScreen(ViewScreen):
    """Pktgen's layout: one column per port plus Total, metrics in rows, pps sparklines."""

    VIEW = "main"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        with Horizontal(id="main-top"):
            yield Grid(id="ports")
            with Vertical(id="chart-pps"):
                yield Chart("Tx rate", "pps", id="chart-tx")
                yield Chart("Rx rate", "pps", id="chart-rx")
        yield Vertical(id="sparks")
        with Horizontal(id="main-charts"):  # above 80x24; ui/charts.py
            yield Chart("Lost", "frames/s", id="chart-lost")
            yield Chart("Latency", "µs", id="chart-lat")
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
        if getattr(self, "_has_gateway", False):
            self._rows.append(GATEWAY_ROW)
        columns = [(p.name, p.name) for p in desc.ports] + [("total", "Total")]
        t.define(columns, [(r.key, r.label) for r in self._rows])
        self._charts_on = show_charts(self, t, len(self._rows) + 1, len(columns))
        sparks = self.query_one("#sparks", Vertical)
        sparks.remove_children()
        kinds = () if self._charts_on else ("tx", "rx") if self._large() else ("tx",)
        for p in desc.ports:
            for kind in kinds:
                sparks.mount(
                    Horizontal(
                        Label(f"{p.name} {kind} pps", classes="spark-label"),
                        Spark(id=f"spark-{kind}-{p.name}"),
                        classes="spark-row",
                    )
                )

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
        lost = lost_by_port(snap)
        ports = [p for p in snap.ports if p.name in t.columns]
        for row in self._rows:
            values = [row.value(p, lost.get(p.name, 0)) for p in ports]
            for p, v in zip(ports, values, strict=True):
                t.set(row.key, p.name, row.show(v))
            t.set(row.key, "total", row.total_cell(values, snap))
        self._spark_tick = getattr(self, "_spark_tick", 0) + 1
        moved = getattr(self, "_chart_window", None) is not app.window  # g: at once
        if self._charts_on and (self._spark_tick % 5 == 1 or moved):  # charts at ~2 Hz
            self._chart_window = app.window
            draw_main_charts(self, app.history, app.window, snap)
        elif self._spark_tick % 3 == 1 and not self._charts_on:  # sparklines at ~3 Hz
            self._sparks(snap, app.port_history)
        t.flush()
        self.query_one("#gauge", ConntrackGauge).show(snap.dut)

    def _sparks(self, snap: StatsSnapshot, hist: dict[tuple[str, str], deque[float]]) -> None:
        for p in snap.ports:
            for kind in ("tx", "rx"):
                found = self.query(f"#spark-{kind}-{p.name}")
                buf = hist.get((p.name, kind))
                if not found or not buf:
                    continue
                found.first(Spark).set_data(list(buf))


# ------------------------------------------------------------------------ Streams
# key, label, width, shown below 120 columns
STREAM_COLS = [
    ("name", "Stream", 12, True),
    ("port", "Port", 9, False),
    ("rate", "Req. rate", 11, False),
    ("tx", "Tx frames", 12, True),
    ("rx", "Rx frames", 12, True),
    ("lost", "Lost", 9, True),
    ("loss", "Loss", 10, True),
    ("ooo", "OOO", 6, False),
    ("dup", "Dup", 6, False),
    ("lmin", "Lat min", 9, False),
    ("lavg", "avg", 9, False),
    ("l50", "p50", 9, False),
    ("l99", "p99", 9, True),
    ("lmax", "max", 9, False),
    ("jit", "Jitter", 9, False),
    ("flows", "Flows", 10, False),  # verified/sent, or L learned (engine/flowstats.py)
    ("state", "", 7, True),
]


def narrow(screen: Screen) -> bool:
    return screen.app.size.width < 120


class StreamsScreen(ViewScreen):
    """Per stream: Tx, Rx, loss, reordering, duplicates, latency and jitter; ``p`` pauses."""

    VIEW = "streams"
    BINDINGS = bindings("streams")

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        yield DataTable(id="streams", cursor_type="row", zebra_stripes=True)
        yield Static("", id="stream-detail")
        yield OrderedFooter()

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        t = self.query_one("#streams", DataTable)
        t.clear(columns=True)
        t.fixed_columns = 1
        small = narrow(self)
        cols = [c for c in STREAM_COLS if c[3] or not small]
        self._cols = {c[0] for c in cols}
        t.cell_padding = 0  # widths include one trailing space: 16 columns fit in 160
        for key, label, w, _ in cols:
            t.add_column(" " + label, width=(10 if small and key == "name" else w), key=key)
        for s in desc.streams:
            first = {"name": f" {s.name}", "port": f" {s.port}→{s.rx_port or '-'}"}
            t.add_row(*[first.get(c[0], " -") for c in cols], key=s.name)
        self._cells: dict[tuple[str, str], object] = {}
        self._width = self.app.size.width
        self._floor = _tester_floor()

    def on_resize(self) -> None:
        if self.desc is not None and narrow(self) != (self._width < 120):
            self.setup(self.desc)

    def selected_stream(self) -> str | None:
        t = self.query_one("#streams", DataTable)
        if not t.row_count:
            return None
        row_key, _ = t.coordinate_to_cell_key(Coordinate(t.cursor_row, 0))
        return row_key.value

    def update_view(self, snap: StatsSnapshot) -> None:
        t = self.query_one("#streams", DataTable)
        for s in snap.streams:
            if s.name not in t.rows:  # type: ignore[operator]
                continue
            lat = s.latency_ns
            vals: dict[str, Text | str] = {
                "rate": fmt.pps(s.requested_pps),
                "tx": fmt.count(s.tx_frames),
                "rx": fmt.count(s.rx_frames),
                "lost": Text(fmt.count(s.lost), style="bold red" if s.lost else ""),
                "loss": fmt.pct(s.loss_pct, 3),
                "ooo": fmt.count(s.out_of_order),
                "dup": fmt.count(s.duplicates),
                "lmin": fmt.ns(lat.min),
                "lavg": fmt.ns(lat.avg),
                "l50": fmt.ns(lat.p50),
                "l99": fmt.ns(lat.p99),
                "lmax": fmt.ns(lat.max),
                "jit": fmt.ns(lat.jitter),
                "flows": short_text(s),
                "state": Text("PAUSED", style="bold yellow") if s.paused else Text(""),
            }
            for col, v in vals.items():
                if col in self._cols and self._cells.get((s.name, col)) != v:
                    self._cells[(s.name, col)] = v
                    t.update_cell(s.name, col, Text(" ") + (v if isinstance(v, Text) else Text(v)))
        self._detail(snap)

    def _detail(self, snap: StatsSnapshot) -> None:
        """Every figure of the selected stream, below the table: the columns a narrow
        terminal leaves out are all here."""
        name = self.selected_stream()
        if name is None:
            return
        s = snap.stream(name)
        lat = s.latency_ns
        achieved = f"{100.0 * s.achieved_pps / s.requested_pps:.1f} %" if s.requested_pps else "-"
        lines = [
            f"{s.name}  {s.port} → {s.rx_port or '-'}" + ("   PAUSED" if s.paused else ""),
            f"  rate      {fmt.pps(s.requested_pps)} requested, achieved {achieved}"
            f"   tx {fmt.pps(s.tx_pps)}  rx {fmt.pps(s.rx_pps)}",
            f"  frames    tx {fmt.count(s.tx_frames)}  rx {fmt.count(s.rx_frames)}"
            f"  due {fmt.count(s.due_frames)}",
            f"  loss      lost {fmt.count(s.lost)} ({fmt.pct(s.loss_pct, 3)})"
            f"  out of order {fmt.count(s.out_of_order)}  duplicates {fmt.count(s.duplicates)}",
            f"  why       {stream_why(s)}",
            f"  latency   min {fmt.ns(lat.min)}  avg {fmt.ns(lat.avg)}  p50 {fmt.ns(lat.p50)}",
            f"            p99 {fmt.ns(lat.p99)}  p99.9 {fmt.ns(lat.p999)}  max {fmt.ns(lat.max)}",
            f"  floor     {fmt.ns(self._floor)} (the tester's own, back to back: tgen calibrate)"
            if self._floor is not None
            else "  floor     not measured on this host (tgen calibrate measures it)",
            f"  jitter    {fmt.ns(lat.jitter)}   source "
            + (
                f"kernel tx stamps, 1 in {s.latency_every} frames"
                if s.latency_every
                else "signature stamps (user space)"
            )
            + (f"   VLAN TCI {s.vlan_tci}" if s.vlan_tci is not None else ""),
        ]
        if s.latency_note:
            lines.append(f"  note      {s.latency_note}")
        lines += stateful_lines(s)
        text = "\n".join(lines)
        if self._cells.get(("#detail", "")) != text:
            self._cells[("#detail", "")] = text
            self.query_one("#stream-detail", Static).update(text)


def stateful_lines(s: StreamStats) -> list[str]:
    """The selected stream's stateful figures (learned tuples and samples, flows verified,
    setup latency) and its longest receive gap."""
    out = []
    if s.learned is not None:
        out.append(f"  learned   {fmt.count(s.learned)} tuples")
        out += [f"            {t}" for t in (s.learned_samples or ())[:3]]
    if s.flows is not None:
        sl = s.setup_latency_ns
        setup = ""
        if sl is not None:
            setup = f"   setup p50 {fmt.ns(sl.p50)}  p99 {fmt.ns(sl.p99)}"
        ok = fmt.count(s.flows_verified or 0)
        out.append(f"  flows     verified {ok} of {fmt.count(s.flows)}" + setup)
    if s.outage_ms is not None:
        at = f" at {s.outage_at_s:.3f} s" if s.outage_at_s is not None else ""
        out.append(f"  outage    longest receive gap {s.outage_ms:,.1f} ms{at}")
    return out


def _tester_floor() -> float | None:
    """This host's measured latency floor (p50, ns), shown next to the latency figures."""
    try:
        from tgen_tui.calibrate.floor import cached_floor

        e = cached_floor()
    except Exception:  # noqa: BLE001 - a cache problem must not break the screen
        return None
    return None if e is None else float(e["p50_ns"])


# ------------------------------------------------------------------------ DUT
class DutScreen(ViewScreen):
    """Conntrack count against max (gauge and history), new entries/s, when it filled, memory, settings."""

    VIEW = "dut"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        yield ConntrackGauge(id="gauge")
        yield Label("conntrack entries (history, 10 Hz)", id="ct-label", classes="dim")
        yield Vertical(id="ct-history")
        yield DataTable(id="dut", cursor_type="none", show_header=False)
        yield DutCounters(id="dut-counters")
        yield OrderedFooter()

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        t = self.query_one("#dut", DataTable)
        t.clear(columns=True)
        t.add_column("what", width=22, key="k")
        t.add_column("value", width=40, key="v")
        self._rows: set[str] = set()
        self._cells: dict[str, object] = {}

    def _kv(self, key: str, value: str) -> None:
        t = self.query_one("#dut", DataTable)
        if key not in self._rows:
            self._rows.add(key)
            t.add_row(key, value, key=key)
            self._cells[key] = value
        elif self._cells.get(key) != value:
            self._cells[key] = value
            t.update_cell(key, "v", value)

    @staticmethod
    def _history_bars(values: list[float], rows: list, top: float | None = None) -> None:
        """A multi-row bar chart: each row shows its slice of the 0..top range (``top``:
        the conntrack max, so the height is the table's fill; else the largest value)."""
        if not rows:
            return
        width = rows[0].size.width
        if width <= 0:
            return
        vals = values[-width:]
        top = max(top or 0.0, max(vals, default=0.0)) or 1.0
        n = len(rows)
        for r, sp in enumerate(rows):  # r = 0 is the top row
            lo = (n - 1 - r) / n
            scaled = [max(0.0, min(1.0, (v / top - lo) * n)) for v in vals]
            s = "".join(" ▁▂▃▄▅▆▇█"[round(8 * x)] for x in scaled).rjust(width)
            if s != sp._last:
                sp._last = s
                sp.update(s)

    def update_view(self, snap: StatsSnapshot) -> None:
        d = snap.dut
        self.query_one("#gauge", ConntrackGauge).show(d)
        self.query_one("#dut-counters", DutCounters).show(d)
        box = self.query_one("#ct-history", Vertical)
        rows = 6 if self.app.size.height >= 40 else 2
        if len(box.children) != rows:
            box.remove_children()
            box.mount_all([Spark(classes="ct-row") for _ in range(rows)])
            box.styles.height = rows
        top = float(d.conntrack_max) if d is not None and d.conntrack_max else None
        self._history_bars(list(self.app.ct_history), list(box.query(Spark)), top)  # type: ignore[attr-defined]
        label = "conntrack entries (history, 10 Hz" + (
            f"; full height = max {fmt.count(top)})" if top else ")"
        )
        if self._cells.get("#label") != label:
            self._cells["#label"] = label
            self.query_one("#ct-label", Label).update(label)
        if d is None:
            self._kv("source", "none: the profile has no dut: (add dut: {netns: …})")
            return
        self._kv("source", d.source)
        self._kv("conntrack entries", fmt.count(d.conntrack_count))
        self._kv("conntrack max", fmt.count(d.conntrack_max))
        self._kv("fill", fmt.pct(d.fill_pct, 1))
        self._kv("peak entries", fmt.count(d.conntrack_peak))
        rise = None if d.conntrack_start is None else d.conntrack_peak - d.conntrack_start
        self._kv("rise since start", "-" if rise is None else f"{rise:+,} entries")
        self._kv("new entries/s", f"{d.new_per_s:,.0f}")
        self._kv(
            "table filled at", fmt.seconds(d.full_at_s) if d.full_at_s is not None else "not full"
        )
        self._kv("free memory", fmt.nbytes(d.mem_available_bytes))
        for k, v in d.settings:
            self._kv(k.replace("_", " "), str(v))
        if d.error:
            self._kv("probe error", d.error)


# ------------------------------------------------------------------------ Workers
WORKER_COLS = [
    ("id", "Worker", 6, True),
    ("core", "Core", 4, True),
    ("ports", "Ports", 8, True),
    ("streams", "Streams", 14, False),
    ("pps", "Tx pps", 9, True),
    ("cpu", "CPU %", 5, True),
    ("proc", "Proc %", 6, False),
    ("busy", "Busy %", 6, True),
    ("hb", "Heartbeat", 8, True),
    ("path", "Path", 8, True),
    ("alive", "", 7, False),
]


class WorkersScreen(ViewScreen):
    """Which core serves which ports and streams, and how busy it is."""

    VIEW = "workers"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        yield DataTable(id="workers", cursor_type="row", zebra_stripes=True)
        yield Static("", id="plan-notes", classes="dim")
        yield OrderedFooter()

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        t = self.query_one("#workers", DataTable)
        t.clear(columns=True)
        cols = [c for c in WORKER_COLS if c[3] or not narrow(self)]
        self._cols = {c[0] for c in cols}
        for key, label, width, _ in cols:
            t.add_column(label, width=width, key=key)
        for w in desc.workers:
            first = {
                "id": str(w.id),
                "core": str(w.core),
                "ports": ", ".join(w.ports) + (f" L{w.lane}/{w.lanes}" if w.lanes > 1 else ""),
                "streams": ", ".join(w.streams) or "(rx only)",
            }
            t.add_row(*[first.get(c[0], "-") for c in cols], key=str(w.id))
        self._width = self.app.size.width
        self.query_one("#plan-notes", Static).update(
            "\n".join(f"warning: {x}" for x in desc.warnings)
        )
        self._cells: dict[tuple[str, str], object] = {}

    def on_resize(self) -> None:
        if self.desc is not None and narrow(self) != (self._width < 120):
            self.setup(self.desc)

    def update_view(self, snap: StatsSnapshot) -> None:
        t = self.query_one("#workers", DataTable)
        for w in snap.workers:
            k = str(w.id)
            if k not in t.rows:  # type: ignore[operator]
                continue
            hb = "-" if w.heartbeat_age_s is None else fmt.seconds(w.heartbeat_age_s)
            vals = {
                "pps": fmt.count(round(w.tx_pps)),
                "cpu": f"{w.core_cpu_pct:.0f}",
                "proc": f"{w.proc_cpu_pct:.0f}",
                "busy": f"{w.busy_pct:.0f}",
                "hb": hb,
                "path": w.tx_path or "-",
                "alive": Text("alive", style="green")
                if w.alive
                else Text(w.exit_reason or "dead", style="bold red"),
            }
            for col, v in vals.items():
                if col in self._cols and self._cells.get((k, col)) != v:
                    self._cells[(k, col)] = v
                    t.update_cell(k, col, v)
        # which send path each worker uses and why (tgen calibrate's cache, profile, default)
        notes = [f"warning: {x}" for x in (self.desc.warnings if self.desc else ())]
        notes += [
            f"worker {w.id} sends with {w.tx_path}: {w.tx_path_why}"
            for w in snap.workers
            if w.tx_path and w.tx_path_why
        ]
        text = "\n".join(notes)
        if self._cells.get(("notes", "")) != text:
            self._cells[("notes", "")] = text
            self.query_one("#plan-notes", Static).update(text)


# ------------------------------------------------------------------------ Log
class LogScreen(ViewScreen):
    """The engine's typed events with their times (bounded)."""

    VIEW = "log"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        yield Log(id="log", max_lines=2000, auto_scroll=True)
        yield OrderedFooter()

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        self._shown = 0

    def update_view(self, snap: StatsSnapshot) -> None:
        lines: deque = self.app.log_lines  # type: ignore[attr-defined]
        total = self.app.log_total  # type: ignore[attr-defined]
        new = total - getattr(self, "_shown", 0)
        if new > 0:
            self.query_one("#log", Log).write_lines(list(lines)[-min(new, len(lines)) :])
            self._shown = total


# ------------------------------------------------------------------------ Help
class HelpScreen(ViewScreen):
    """Every key, as remapped by the keymap file, with its binding id."""

    VIEW = "help"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        yield DataTable(id="help", cursor_type="row", zebra_stripes=True)
        yield OrderedFooter()

    def on_mount(self) -> None:
        self.fill()

    def fill(self) -> None:
        keymap: dict[str, str] = getattr(self.app, "keymap_overrides", {})
        t = self.query_one("#help", DataTable)
        t.clear(columns=True)
        small = narrow(self)
        t.add_column("Keys", width=12, key="keys")
        t.add_column("Does", width=44 if small else 70, key="does")
        t.add_column("Binding id", width=16, key="id")
        for i, (keys, does, id_) in enumerate(help_rows(keymap)):
            # height None: a long text wraps in its column instead of being cut (80x24)
            t.add_row(keys, Text(does), id_, key="digits" if i == 0 else id_, height=None)
        t.add_row(
            "ctrl+p",
            "command palette: every action, every port, every profile",
            "(Textual)",
            key="palette",
        )
        from tgen_tui.ui.glossary import glossary_rows

        t.add_row(Text("Counters", style="bold"), Text("what each figure counts", style="bold"), "")
        for i, (label, line) in enumerate(glossary_rows()):
            t.add_row(label, line, "", key=f"glossary-{i}")

    def update_view(self, snap: StatsSnapshot) -> None:
        pass


VIEW_SCREENS: dict[str, type[ViewScreen]] = {
    cls.VIEW: cls
    for cls in (MainScreen, StreamsScreen, DutScreen, WorkersScreen, LogScreen, HelpScreen)
}


# ------------------------------------------------------------------------ modals
class ConfirmQuit(ModalScreen[bool]):
    """Traffic is running: stop every port and quit?"""

    BINDINGS = [("y,enter", "answer(True)", "Yes"), ("n,escape", "answer(False)", "No")]

    def __init__(self, running: list[str]) -> None:
        super().__init__()
        self.running = running

    def compose(self) -> ComposeResult:
        yield Vertical(
            Label(f"Traffic is running on {', '.join(self.running)}."),
            Label("Stop every port and quit?  [b]y[/b]es / [b]n[/b]o"),
            id="dialog",
        )

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class RatePrompt(ModalScreen[str | None]):
    """Type an exact rate for a port: 50kpps, 200Mbit, 10% or plain frames/s."""

    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, port: str, current: str) -> None:
        super().__init__()
        self.port = port
        self.current = current

    def compose(self) -> ComposeResult:
        yield Vertical(
            Label(f"Rate of {self.port} (now {self.current}): 50kpps, 200Mbit, 10%, or fps"),
            Input(placeholder="e.g. 50kpps", id="rate"),
            id="dialog",
        )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ProfilePicker(Screen[str]):
    """No profile was given: choose one of profiles/*.yaml."""

    BINDINGS = [("q,escape", "app.exit", "Quit")]

    def __init__(self, files: list[str]) -> None:
        super().__init__()
        self.files = files

    def compose(self) -> ComposeResult:
        yield Static(
            "tgen-tui: choose a profile (enter opens it; every port starts idle)", classes="title"
        )
        yield OptionList(*self.files, id="profiles")
        yield Static("", id="picker-error", classes="error")
        yield OrderedFooter()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.files[event.option_index])


__all__ = [
    "VIEW_SCREENS",
    "ConfirmQuit",
    "DutScreen",
    "HelpScreen",
    "LogScreen",
    "MainScreen",
    "ProfilePicker",
    "RatePrompt",
    "StreamsScreen",
    "ViewScreen",
    "WorkersScreen",
]
