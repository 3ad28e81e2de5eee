"""The console's DUT events: key ``x`` picks one of the profile's named DUT commands
(``dut.events: {name: command}``) and runs it over the DUT channel, off the event loop.
The Log screen gets a line with its status and how long it took; the outage it causes
shows in the run's result (``streams.<name>.outage_ms``, :mod:`tgen_tui.engine.stateful`).
"""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList


class DutEventPicker(ModalScreen[str | None]):
    """Choose one named DUT event (enter runs it, escape cancels)."""

    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, events: dict[str, str]) -> None:
        super().__init__()
        self.events = events

    def compose(self) -> ComposeResult:
        yield Vertical(
            Label("Run a DUT event (enter), escape cancels"),
            OptionList(*(f"{n}: {c}" for n, c in self.events.items()), id="dut-events"),
            id="dialog",
        )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(list(self.events)[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)


def event_text(name: str, rec: dict) -> str:
    status = "ok" if rec.get("ok") else f"FAILED (rc {rec.get('rc')}) {rec.get('error', '')}"
    out = (rec.get("output") or "").strip().splitlines()
    tail = f": {out[-1]}" if out and not rec.get("ok") else ""
    return f"DUT event {name}: {status.strip()} in {rec.get('took_ms', 0):.0f} ms{tail}"


def run_named_event(app: Any) -> None:
    """Pick one of the compiled profile's DUT events and run it in a thread."""
    compiled = app.compiled
    events = dict(getattr(compiled, "dut_events", None) or {})
    if not events:
        app.notify("no DUT events: add dut.events {name: command} to the profile")
        return
    from tgen_tui.dut.channel import DutChannel, pick_dut

    cli_netns, cli_ssh = app.cli_dut
    channel = DutChannel.of(*pick_dut(cli_netns, cli_ssh, compiled.dut_netns, compiled.dut_ssh))
    if channel is None:
        app.notify("DUT events need a DUT: dut.netns in the profile, --dut-netns or --dut-ssh")
        return

    def run(name: str) -> None:
        from tgen_tui.engine.dut_events import run_event

        rec = run_event(channel, events[name], time.monotonic(), name)
        stamp = time.strftime("%H:%M:%S")
        app.call_from_thread(app.dut_event_done, f"{stamp} {event_text(name, rec)}", rec)

    def chosen(name: str | None) -> None:
        if name:
            app.run_worker(lambda: run(name), thread=True, group="dut-event")

    app.push_screen(DutEventPicker(events), chosen)


__all__ = ["DutEventPicker", "event_text", "run_named_event"]
