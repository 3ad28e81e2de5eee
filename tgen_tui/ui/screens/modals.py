"""The small screens on top of a view: quit while traffic runs, an exact rate, the
profile picker (``tgen tui`` without a profile).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Label, OptionList, Static

from tgen_tui.ui.rates import BIT_HINT, FRAME_HINT
from tgen_tui.ui.widgets import OrderedFooter


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
    """Type an exact rate: for frames 50kpps, 200Mbit, 10% or plain frames/s; for a UDP
    flow (or a port with only UDP flows) a bit rate (``hint`` says which)."""

    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, port: str, current: str, hint: str = FRAME_HINT) -> None:
        super().__init__()
        self.port = port  # what the rate is of: "p0", "p1's UDP flows", "flow background"
        self.current = current
        self.hint = hint

    def compose(self) -> ComposeResult:
        example = "e.g. 2M" if self.hint == BIT_HINT else "e.g. 50kpps"
        yield Vertical(
            Label(f"Rate of {self.port} (now {self.current}): {self.hint}"),
            Input(placeholder=example, id="rate"),
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


__all__ = ["ConfirmQuit", "ProfilePicker", "RatePrompt"]
