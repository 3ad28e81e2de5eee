"""The keymap file that remaps the console's actions by id (:mod:`tgen_tui.ui.actions`).

The keymap is TOML: ``"port.start" = "ctrl+s"`` at the top level or under ``[keymap]``;
several keys for one binding are comma-separated (``"view.main" = "m,f1"``). Textual's
``App.set_keymap`` applies it (in ``on_mount``), so the footer shows the new keys; Help
and the command palette read :func:`~tgen_tui.ui.actions.effective_keys`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from tgen_tui.diagnostics import BadInput
from tgen_tui.ui.actions import ACTION_IDS

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
        if k not in ACTION_IDS:
            raise BadInput(f"{p}: unknown binding id {k!r} (ids: {', '.join(sorted(ACTION_IDS))})")
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        if not isinstance(v, str) or not v.strip():
            raise BadInput(f'{p}: {k}: expected a key such as "ctrl+s" or "x,y"')
        out[k] = v.replace(" ", "")
    return out


__all__ = ["DEFAULT_KEYMAP", "load_keymap"]
