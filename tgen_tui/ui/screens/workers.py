"""The Workers screen: which core serves which ports and streams (or socket flows),
how busy it is (its process's CPU per frame sent or received, µs/fr), and which send path
and pacing each worker uses and why.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.ui.screens.base import ViewScreen, narrow
from tgen_tui.ui.widgets import OrderedFooter

WORKER_COLS = [
    ("id", "Worker", 6, True),
    ("core", "Core", 4, True),
    ("ports", "Ports", 8, True),
    ("streams", "Streams", 14, False),
    ("pps", "Tx pps", 9, True),
    ("cpu", "CPU %", 5, True),
    ("proc", "Proc %", 6, False),
    ("busy", "Busy %", 6, True),
    ("per", "µs/fr", 6, True),
    ("hb", "Heartbeat", 8, True),
    ("path", "Path", 8, True),
    ("pace", "Pacing", 6, False),
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
                "pace": w.pacing or "-",
                "per": "-" if w.cpu_us_per_frame is None else f"{w.cpu_us_per_frame:.1f}",
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


__all__ = ["WORKER_COLS", "WorkersScreen"]
