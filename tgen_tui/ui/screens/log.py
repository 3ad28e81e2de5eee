"""The Log screen: the engine's typed events with their times (bounded)."""

from __future__ import annotations

from collections import deque

from textual.app import ComposeResult
from textual.widgets import Log

from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.ui.screens.base import ViewScreen
from tgen_tui.ui.widgets import OrderedFooter


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


__all__ = ["LogScreen"]
