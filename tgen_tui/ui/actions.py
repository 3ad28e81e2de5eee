"""The console's actions, each declared once: id, action, key, label, palette text, help.

Everything that lists actions is built from :data:`ACTIONS`: the app's and the Streams
screen's ``BINDINGS``, the footer's order, the Help screen, the command palette and the
keymap file's validation. A keymap remaps an action by its id; :func:`effective_keys`
gives the keys an action answers to after it, so Help and the palette show those.

Palette text with ``{port}`` makes one command per port ("start p1"), which runs the
action with that port's name as its argument (``start_selected('p1')``), or, for an
action bound to one port (a digit), the action itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from textual.binding import Binding, BindingType

APP = "app"  # the scope of an action bound on the app (every screen)


@dataclass(frozen=True)
class ConsoleAction:
    """One thing an operator can do, with every name it is shown under."""

    id: str  # the binding id a keymap file remaps ("port.start")
    action: str  # the Textual action string ("start_selected", "view('dut')")
    key: str  # the default keys, comma-separated
    label: str  # the footer's label
    palette: str = ""  # the command palette's text ("{port}": one command per port)
    help: str = ""  # the Help screen's text ("": the label)
    show: bool = True  # in the footer
    priority: bool = False
    scope: str = APP  # APP, or the view whose screen binds it ("streams")
    port: int | None = None  # the port position an action is bound to (the digits)

    @property
    def does(self) -> str:
        return self.help or self.label

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.action,
            self.label,
            show=self.show,
            priority=self.priority,
            id=self.id,
        )


def _digit(i: int) -> ConsoleAction:
    """Digits select ports 0-9 (Pktgen numbers ports from 0)."""
    return ConsoleAction(
        f"port.select{i}",
        f"select_port({i})",
        str(i),
        f"port {i}",
        palette="select {port}",
        help="select the port at that position (Pktgen numbers ports from 0)",
        show=False,
        port=i,
    )


def _view(id_: str, screen: str, key: str, label: str, help_: str) -> ConsoleAction:
    return ConsoleAction(id_, f"view('{screen}')", key, label, palette=f"show {label}", help=help_)


# fmt: off
ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction("port.start", "start_selected", "s", "Start", palette="start {port}",
                  help="start the selected port"),
    ConsoleAction("port.stop", "stop_selected", "t", "Stop", palette="stop {port}",
                  help="stop the selected port"),
    ConsoleAction("port.start_all", "start_all", "S", "Start all", palette="start all ports",
                  help="start every port"),
    ConsoleAction("port.stop_all", "stop_all", "T", "Stop all", palette="stop all ports",
                  help="stop every port"),
    ConsoleAction("rate.up", "rate_step(1)", "plus,equals_sign", "Rate+",
                  palette="raise rate of the selected port",
                  help="raise the selected port's rate one step (1-2-5 series); a port with "
                       "only UDP flows: their bit/s; on Flows: the highlighted UDP flow's"),
    ConsoleAction("rate.down", "rate_step(-1)", "minus", "Rate-",
                  palette="lower rate of the selected port",
                  help="lower the selected port's rate one step (as Rate+)"),
    ConsoleAction("rate.set", "rate_prompt", "r", "Rate…", palette="set rate of {port}…",
                  help="type an exact rate: 50kpps, 200Mbit, 10% (of line rate), or fps; "
                       "a UDP flow's (on Flows) or a UDP-only port's: a bit rate, 2M"),
    ConsoleAction("counters.clear", "clear", "c", "Clear", palette="clear counters",
                  help="clear counters (sender and receiver together)"),
    ConsoleAction("profile.edit", "edit", "e", "Edit", palette="edit profile",
                  help="open the profile editor"),
    _view("view.main", "main", "m", "Main", "Main screen: one column per port"),
    _view("view.streams", "streams", "f", "Streams", "Streams screen: loss, latency, jitter"),
    _view("view.flows", "flows", "n", "Flows",
          "Flows screen: socket flows' goodput, RTT, cwnd, retransmits, UDP loss, fairness"),
    _view("view.dut", "dut", "d", "DUT", "DUT screen: conntrack gauge and history"),
    _view("view.workers", "workers", "w", "Workers", "Workers screen: cores, CPU, heartbeat"),
    _view("view.log", "log", "l", "Log", "Log screen: engine events"),
    _view("view.capture", "capture", "P", "Capture",
          "Capture screen (pcap): capture the selected port's frames to a pcapng file "
          "with a filter, the last frames decoded, one in full"),
    _view("view.help", "help", "question_mark", "Help", "this help"),
    ConsoleAction("view.port", "view('port')", "o,enter", "Port", palette="show the port page",
                  help="the selected port's page: link, speed, MAC, gateway, workers, "
                       "streams and charts", show=False),
    ConsoleAction("chart.window", "chart_window", "g", "Window", palette="chart window 60 s / 10 min",
                  help="charts: show the last 60 s or the last 10 min (history is kept for both)",
                  show=False),
    ConsoleAction("view.results", "results", "R", "Results", show=False),
    ConsoleAction("dut.event", "dut_event", "x", "DUT event", show=False,
                  palette="run a DUT event…",
                  help="run one of the profile's named DUT commands (dut.events) on the DUT"),
    ConsoleAction("app.quit", "quit_console", "q", "Quit", palette="quit",
                  help="quit (asks first when traffic runs; stops ports, writes --json)"),
    ConsoleAction("app.interrupt", "quit_console", "ctrl+c", "Quit", show=False, priority=True,
                  help="same as quit"),
    *(_digit(i) for i in range(10)),
    ConsoleAction("stream.pause", "app.toggle_pause", "p", "Pause/resume", scope="streams",
                  help="pause or resume the highlighted stream (Streams screen)"),
    ConsoleAction("capture.toggle", "toggle_capture", "space", "Capture", scope="capture",
                  help="start or stop a capture on the selected port, with the filter "
                       "typed (Capture screen; enter in the filter starts one too)"),
    ConsoleAction("capture.filter", "focus_filter", "slash", "Filter", scope="capture",
                  help="type the capture filter: a tcpdump expression, stream NAME, other "
                       "or arpnd; enter starts, escape leaves it (Capture screen)"),
    ConsoleAction("capture.lost", "toggle_lost", "L", "Lost frames", scope="capture",
                  help="start or stop keeping the tx copies of the frames that never arrive, "
                       "on every port (Capture screen; frames of the last 0.5 s before the "
                       "stop are not judged)"),
    ConsoleAction("capture.direction", "cycle_direction", "v", "Direction", scope="capture",
                  help="capture both directions, rx only or tx only (Capture screen)"),
    ConsoleAction("capture.leave", "leave_filter", "escape", "Leave filter", scope="capture",
                  show=False, help="leave the filter for the frame list (Capture screen)"),
)
# fmt: on

ACTION_IDS: frozenset[str] = frozenset(a.id for a in ACTIONS)


def bindings(scope: str = APP) -> list[BindingType]:
    """The Textual bindings of one scope, in the table's order."""
    return [a.binding() for a in ACTIONS if a.scope == scope]


# (key, screen) of the screens one key opens, in the table's order (screenshots, tests)
VIEW_KEYS: list[tuple[str, str]] = [
    (a.key.split(",")[0], a.action[len("view('") : -2])
    for a in ACTIONS
    if a.action.startswith("view(")
]

# footer order: the screen's own actions first, then the app's
FOOTER_ORDER: dict[str, int] = {
    a.action: i for i, a in enumerate(sorted(ACTIONS, key=lambda a: a.scope == APP))
}

_SHOWN_AS = {
    "plus": "+",
    "equals_sign": "=",
    "minus": "-",
    "question_mark": "?",
    "slash": "/",
}


def effective_keys(a: ConsoleAction | Binding, keymap: Mapping[str, str]) -> str:
    """The keys an action answers to after the keymap, as shown to the user ("+, =")."""
    keys = keymap.get(a.id or "", a.key)
    return ", ".join(_SHOWN_AS.get(k, k) for k in keys.split(","))


def digit_actions() -> list[ConsoleAction]:
    return [a for a in ACTIONS if a.port is not None]


def help_rows(keymap: Mapping[str, str]) -> Iterable[tuple[str, str, str]]:
    """(keys, what it does, id) for the Help screen: the digits as one row, then the rest."""
    digits = digit_actions()
    yield (
        ", ".join(effective_keys(a, keymap) for a in digits[:3])
        + " … "
        + effective_keys(digits[-1], keymap),
        digits[0].does,
        f"{digits[0].id} … {digits[-1].id.removeprefix(digits[0].id[:-1])}",
    )
    for a in ACTIONS:
        if a.port is None:
            yield effective_keys(a, keymap), a.does, a.id


@dataclass(frozen=True)
class PaletteCommand:
    """One command palette line: its text, the action it runs, and the keys that do it."""

    text: str
    action: str
    help: str


def palette_commands(ports: list[str], keymap: Mapping[str, str]) -> list[PaletteCommand]:
    """Every palette command: per-port ones first (for each port), then the others."""
    out: list[PaletteCommand] = []
    for i, name in enumerate(ports):
        select = next((a for a in digit_actions() if a.port == i), None)
        sel_keys = effective_keys(select, keymap) if select else ""
        for a in ACTIONS:
            if "{port}" not in a.palette or (a.port is not None and a.port != i):
                continue
            text = a.palette.format(port=name)
            if a.port is not None:
                out.append(PaletteCommand(text, a.action, f"key {sel_keys}"))
                continue
            keys = effective_keys(a, keymap)
            how = f"keys {sel_keys} then {keys}" if sel_keys else f"key {keys} on port {i}"
            out.append(PaletteCommand(text, f"{a.action}({name!r})", how))
    out += [
        PaletteCommand(a.palette, a.action, f"key {effective_keys(a, keymap)}")
        for a in ACTIONS
        if a.palette and "{port}" not in a.palette
    ]
    return out


__all__ = [
    "ACTIONS",
    "ACTION_IDS",
    "APP",
    "FOOTER_ORDER",
    "VIEW_KEYS",
    "ConsoleAction",
    "PaletteCommand",
    "bindings",
    "digit_actions",
    "effective_keys",
    "help_rows",
    "palette_commands",
]
