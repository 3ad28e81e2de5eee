"""What every view screen is: a title line, tables built once from the engine's
description (``setup``), cells updated from each snapshot (``update_view``).

The app's 10 Hz tick calls ``update_view`` of the visible screen only. Columns that change
have fixed widths, so an update never re-measures a column (CONSOLE.md).
"""

from __future__ import annotations

from rich.text import Text
from textual.screen import Screen

from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.ui.widgets import TextWidget


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


def narrow(screen: Screen) -> bool:
    return screen.app.size.width < 120


__all__ = ["ViewScreen", "narrow"]
