"""Key bindings of the console, each with an id, and the keymap file that remaps them.

The keymap is TOML: ``"port.start" = "ctrl+s"`` at the top level or under ``[keymap]``;
several keys for one binding are comma-separated (``"view.main" = "m,f1"``). Textual's
``App.set_keymap`` applies it (in ``on_mount``), so the footer shows the new keys; Help
reads :func:`effective_keys`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from textual.binding import Binding

from tgen_tui.diagnostics import BadInput

# digits select ports 0-9 (Pktgen numbers from 0)
PORT_BINDINGS = [
    Binding(str(i), f"select_port({i})", f"port {i}", show=False, id=f"port.select{i}")
    for i in range(10)
]

APP_BINDINGS: list[Binding] = [
    Binding("s", "start_selected", "Start", id="port.start"),
    Binding("t", "stop_selected", "Stop", id="port.stop"),
    Binding("S", "start_all", "Start all", id="port.start_all"),
    Binding("T", "stop_all", "Stop all", id="port.stop_all"),
    Binding("plus,equals_sign", "rate_step(1)", "Rate+", id="rate.up"),
    Binding("minus", "rate_step(-1)", "Rate-", id="rate.down"),
    Binding("r", "rate_prompt", "Rate…", id="rate.set"),
    Binding("c", "clear", "Clear", id="counters.clear"),
    Binding("e", "edit", "Edit", id="profile.edit"),
    Binding("m", "view('main')", "Main", id="view.main"),
    Binding("f", "view('streams')", "Streams", id="view.streams"),
    Binding("d", "view('dut')", "DUT", id="view.dut"),
    Binding("w", "view('workers')", "Workers", id="view.workers"),
    Binding("l", "view('log')", "Log", id="view.log"),
    Binding("question_mark", "view('help')", "Help", id="view.help"),
    Binding("R", "results", "Results", show=False, id="view.results"),
    Binding("q", "quit_console", "Quit", id="app.quit"),
    Binding("ctrl+c", "quit_console", "Quit", show=False, priority=True, id="app.interrupt"),
    *PORT_BINDINGS,
]

# (key, screen) of the screens one key opens, in key-map order (screenshots and tests walk them)
VIEW_KEYS: list[tuple[str, str]] = [
    (b.key, b.action[len("view('") : -2]) for b in APP_BINDINGS if b.action.startswith("view(")
]

STREAM_BINDINGS: list[Binding] = [
    Binding("p", "app.toggle_pause", "Pause/resume", id="stream.pause"),
]

ALL_BINDINGS = APP_BINDINGS + STREAM_BINDINGS
BINDING_IDS = {b.id for b in ALL_BINDINGS}

DEFAULT_KEYMAP = (
    Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "tgen" / "keymap.toml"
)


def load_keymap(path: str | Path | None) -> dict[str, str]:
    """Read a keymap file (``None``: the default file, if it exists). Unknown ids and bad
    TOML are bad input (exit 2), reported before the console starts."""
    explicit = path is not None
    p = Path(path) if path is not None else DEFAULT_KEYMAP
    if not p.exists():
        if explicit:
            raise BadInput(f"--keymap: {p}: no such file")
        return {}
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BadInput(f"{p}: {e}") from None
    table = {k: v for k, v in data.items() if k != "keymap"} | dict(data.get("keymap", {}))
    out: dict[str, str] = {}
    for k, v in table.items():
        if k not in BINDING_IDS:
            raise BadInput(
                f"{p}: unknown binding id {k!r} (ids: {', '.join(sorted(x for x in BINDING_IDS if x))})"
            )
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        if not isinstance(v, str) or not v.strip():
            raise BadInput(f'{p}: {k}: expected a key such as "ctrl+s" or "x,y"')
        out[k] = v.replace(" ", "")
    return out


def effective_keys(binding: Binding, keymap: dict[str, str]) -> str:
    """The keys a binding answers to after the keymap, as shown to the user."""
    keys = keymap.get(binding.id or "", binding.key)
    return ", ".join(_display(k) for k in keys.split(","))


def _display(key: str) -> str:
    return {
        "plus": "+",
        "equals_sign": "=",
        "minus": "-",
        "question_mark": "?",
    }.get(key, key)


__all__ = [
    "ALL_BINDINGS",
    "APP_BINDINGS",
    "BINDING_IDS",
    "DEFAULT_KEYMAP",
    "STREAM_BINDINGS",
    "effective_keys",
    "load_keymap",
]
