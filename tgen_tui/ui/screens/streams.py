"""The Streams screen: per stream Tx, Rx, loss, reordering, duplicates, latency,
jitter and spacing (the share of gaps within 10 % of the asked gap); ``p`` pauses the highlighted stream; every figure of it below the table.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.figures import achieved_pct
from tgen_tui.engine.flowstats import short_text
from tgen_tui.engine.snapshot import Spacing, StatsSnapshot, StreamStats
from tgen_tui.ui.actions import bindings
from tgen_tui.ui.dut_counters import stream_why
from tgen_tui.ui.screens.base import ViewScreen, narrow
from tgen_tui.ui.widgets import OrderedFooter

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
    ("spaced", "Spaced", 8, True),  # gaps within 10 % of the asked gap (engine/spacing.py)
    ("flows", "Flows", 10, False),  # verified/sent, or L learned (engine/flowstats.py)
    ("state", "", 7, True),
]


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
                "spaced": spaced_text(s.spacing),
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
        pct = achieved_pct(s.achieved_pps, s.requested_pps)  # the engine's one definition
        achieved = f"{pct:.1f} %" if pct is not None else "-"
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
        lines.append(spacing_line(s.spacing))
        if s.latency_note:
            lines.append(f"  note      {s.latency_note}")
        lines += stateful_lines(s)
        text = "\n".join(lines)
        if self._cells.get(("#detail", "")) != text:
            self._cells[("#detail", "")] = text
            self.query_one("#stream-detail", Static).update(text)


def spaced_text(sp: Spacing) -> str:
    """The share of gaps within 10 % of the asked gap: '97.1%', or '-' when not known."""
    return "-" if sp.within_10pct is None else f"{100 * sp.within_10pct:.1f}%"


def spacing_line(sp: Spacing) -> str:
    """The selected stream's spacing at its receiver, in one line."""
    if not sp.gaps:
        return "  spacing   no gaps measured yet"
    asked = f" of {fmt.ns(sp.asked_gap_ns)}" if sp.asked_gap_ns else " (asked gap unknown)"
    ks = f"  KS {sp.ks:.3f} ({sp.law})" if sp.ks is not None else ""
    return (
        f"  spacing   {spaced_text(sp)} within 10 %{asked}  gap {fmt.ns(sp.mean_gap_ns)}"
        f"  MAE {fmt.ns(sp.mae_ns)}  p99 {fmt.ns(sp.p99_ns)}{ks}"
    )


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


__all__ = ["STREAM_COLS", "StreamsScreen", "spaced_text", "spacing_line", "stateful_lines"]
