"""The Help screen: every key as the keymap file remapped it, its binding id, and
what each counter counts (ui/glossary.py).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable

from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.ui.actions import help_rows
from tgen_tui.ui.screens.base import ViewScreen, narrow
from tgen_tui.ui.widgets import OrderedFooter


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


__all__ = ["HelpScreen"]
