"""The DUT screen: conntrack count against max (gauge and history), new entries/s,
when it filled, free memory, the DUT's settings and drop counters.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.ui.dut_counters import DutCounters
from tgen_tui.ui.screens.base import ViewScreen
from tgen_tui.ui.widgets import ConntrackGauge, OrderedFooter, Spark


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
        if d.conntrack_states:  # request/response flows: the entries by state
            by_state = ", ".join(f"{k} {fmt.count(v)}" for k, v in d.conntrack_states[:4])
            self._kv("entries by state", by_state)
        for k, v in d.settings:
            self._kv(k.replace("_", " "), str(v))
        if d.error:
            self._kv("probe error", d.error)


__all__ = ["DutScreen"]
