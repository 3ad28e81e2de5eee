"""The console's Results screen: recent runs from the results store, a trend sparkline per
metric for the selected run's DUT, and a mark on every run that is worse than the previous
build of the same DUT (the same rules as ``tgen results check``).

Self-contained: it imports nothing else from ``tgen_tui.ui`` so that the console binds it
to a key with ``app.push_screen(ResultsScreen(db))``. It reads the database itself (WAL:
reading never blocks a run that is writing) and reloads when new runs appear.
"""

from __future__ import annotations

import sqlite3

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tgen_tui.results import analysis as A
from tgen_tui.results import metrics as M
from tgen_tui.results import store
from tgen_tui.results.plot import sparkline

SPARK_METRICS = ("rx_pps", "tx_pps", "loss_pct", "p99_ns")
COLUMNS = (
    ("id", 5),
    ("started (UTC)", 16),
    ("test", 7),
    ("DUT", 14),
    ("build", 10),
    ("profile", 10),
    ("rx pps", 10),
    ("loss", 9),
    ("p99", 9),
    ("vs previous build", 44),
)


def _cut(s: str | None, n: int) -> str:
    s = s or "-"
    return s if len(s) <= n else s[: n - 1] + "…"


class ResultsScreen(Screen):
    """Recent runs, newest first; Enter shows the selected run's check against its last build."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reload", "Reload"),
        Binding("enter", "details", "Details", show=False),
    ]
    DEFAULT_CSS = """
    ResultsScreen { layout: vertical; }
    ResultsScreen #rs-title { height: 1; background: $boost; text-style: bold; padding: 0 1; }
    ResultsScreen #rs-trends { height: auto; max-height: 6; padding: 0 1; }
    ResultsScreen .rs-trend { height: 1; }
    ResultsScreen #rs-table { height: 1fr; }
    ResultsScreen #rs-detail { height: auto; max-height: 8; padding: 0 1; border-top: solid $primary; }
    """
    LIMIT = 200

    def __init__(self, db: str | None = None) -> None:
        super().__init__(name="results")
        self.db = db
        self.runs: list[dict] = []
        self.verdicts: dict[int, A.Verdict | None] = {}
        self._last_id: int | None = None
        self.trends: dict[str, list[float]] = {}

    def compose(self) -> ComposeResult:
        yield Static("Results", id="rs-title")
        with Vertical(id="rs-trends"):
            for name in SPARK_METRICS:
                yield Static("", id=f"rs-trend-{name}", classes="rs-trend")
        table: DataTable[str] = DataTable(id="rs-table", cursor_type="row", zebra_stripes=True)
        for label, width in COLUMNS:
            table.add_column(label, width=width, key=label)
        yield table
        yield Static("", id="rs-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.reload()
        self.set_interval(5.0, self._poll)

    # ------------------------------------------------------------ data

    def _connect(self) -> sqlite3.Connection | None:
        try:
            return store.connect(self.db, create=False)
        except store.StoreError as e:
            self.query_one("#rs-title", Static).update(f"Results: {e}")
            return None

    def _poll(self) -> None:
        conn = self._connect()
        if conn is None:
            return
        try:
            newest = conn.execute("SELECT max(id) FROM runs").fetchone()[0]
        finally:
            conn.close()
        if newest != self._last_id:
            self.reload()

    def action_reload(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Read the newest runs and their verdicts, and refill the table."""
        conn = self._connect()
        table = self.query_one("#rs-table", DataTable)
        if conn is None:
            table.clear()
            return
        try:
            self.runs = store.list_runs(conn, limit=self.LIMIT)
            self._last_id = max((r["id"] for r in self.runs), default=None)
            heads = {r["id"]: store.run_metrics(conn, r["id"]) for r in self.runs}
            self.verdicts = {r["id"]: A.run_verdict(conn, r) for r in self.runs}
        finally:
            conn.close()
        worse = sum(1 for v in self.verdicts.values() if v and v.sentences)
        self.query_one("#rs-title", Static).update(
            f"Results: {len(self.runs)} recent runs in {store.resolve(self.db)}"
            + (f"  ({worse} worse than their previous build)" if worse else "")
        )
        table.clear()
        for r in self.runs:
            m = heads[r["id"]]
            table.add_row(
                str(r["id"]),
                r["started_at"][:16].replace("T", " "),
                _cut(r["test"], 7),
                _cut(r["dut"], 14),
                _cut(r["build"], 10),
                _cut(r["profile"], 10),
                M.metric("rx_pps").fmt(m.get("rx_pps")),
                M.metric("loss_pct").fmt(m.get("loss_pct")),
                M.metric("p99_ns").fmt(m.get("p99_ns")),
                self._verdict_cell(r),
                key=str(r["id"]),
            )
        if self.runs:
            self._show_trends(self.runs[0])

    def _verdict_cell(self, run: dict) -> Text:
        if run["partial"]:
            return Text("interrupted (not judged)", style="dim")
        v = self.verdicts.get(run["id"])
        if v is None:
            return Text("- (first build)", style="dim")
        if v.sentences:
            return Text(f"▼ worse vs {v.since}: {v.short()}", style="bold red")
        return Text(f"ok vs {v.since}", style="green")

    def _show_trends(self, run: dict) -> None:
        """Sparklines of the run's DUT over its builds (medians), same test and profile."""
        conn = self._connect()
        if conn is None:
            return
        try:
            builds = A.builds_in_order(
                conn, dut=run["dut"], test=run["test"], profile_hash=run["profile_hash"]
            )
            series: dict[str, list[float]] = {n: [] for n in SPARK_METRICS}
            for b in builds:
                g = A.group_of(
                    conn,
                    dut=run["dut"],
                    build=b,
                    test=run["test"],
                    profile_hash=run["profile_hash"],
                )
                s = A.group_samples(conn, g.run_ids)
                for n in SPARK_METRICS:
                    med = s[n].median if n in s else None
                    if med is not None:
                        series[n].append(med)
        finally:
            conn.close()
        self.trends = series
        head = f"DUT {run['dut']}, {run['test']} {run['profile'] or '-'}: medians by build"
        for n in SPARK_METRICS:
            md = M.metric(n)
            vals = series[n]
            line = Text(f"{md.label:<12}", style="bold")
            last: list[float | None] = [*vals[-8:]]
            wide = "".join(ch * 2 + " " for ch in sparkline(last))  # one bar per build
            line.append(f"{wide:<25}", style="cyan")
            if vals:
                line.append(f" {md.fmt(vals[0])} → {md.fmt(vals[-1])}  ({len(vals)} builds")
                line.append(f": {builds[0]} … {builds[-1]})" if len(builds) > 1 else ")")
            if n == SPARK_METRICS[0]:
                line.append(f"   {head}", style="dim")
            self.query_one(f"#rs-trend-{n}", Static).update(line)

    # ------------------------------------------------------------ selection

    def _selected(self) -> dict | None:
        table = self.query_one("#rs-table", DataTable)
        if not self.runs or table.cursor_row is None or table.cursor_row >= len(self.runs):
            return None
        return self.runs[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        run = self._selected()
        if run is not None:
            self._show_trends(run)
            self._show_detail(run)

    def action_details(self) -> None:
        run = self._selected()
        if run is not None:
            self._show_detail(run)

    def _show_detail(self, run: dict) -> None:
        v = self.verdicts.get(run["id"])
        head = (
            f"run {run['id']}: DUT {run['dut']}, build {run['build']}, {run['test']} "
            f"{run['profile'] or '-'}  (tgen results show {run['id']})"
        )
        if v is None:
            body = "no earlier build of this DUT with the same test and profile"
        elif v.sentences:
            body = "\n".join(v.sentences)
        else:
            body = f"no regression against build {v.since}"
        self.query_one("#rs-detail", Static).update(f"{head}\n{body}")
