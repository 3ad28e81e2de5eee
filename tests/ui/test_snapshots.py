"""SVG snapshots of every screen at 80x24 and 160x48 on the fake engine (frozen clock,
ticks driven by hand, cursor blink off). Plain ``def``: snap_compare runs its own loop.
Update with ``pytest tests/ui/test_snapshots.py --snapshot-update`` after a deliberate change."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tgen_tui.ui.actions import VIEW_KEYS

from .conftest import FrozenClock, make_app

VIEWS = VIEW_KEYS  # main, streams, dut, workers, log, help


def _scenario(key: str):
    """Both ports sent for 5 s, p1 still running at 30 kpps, 300-entry conntrack max."""
    clock = FrozenClock()
    app, _ = make_app(clock=clock, tick_s=3600, conntrack_max=300, loss=0.001)

    async def run_before(pilot) -> None:
        await pilot.pause(0.1)
        app.tick()
        await pilot.press("S")
        await pilot.pause(0.05)
        for _ in range(10):
            clock.t += 0.5
            app.tick()
        await pilot.press("0", "t", "1")
        await pilot.pause(0.05)
        await pilot.press("r", *"30kpps", "enter")
        await pilot.pause(0.05)
        clock.t += 1.0
        app.tick()
        await pilot.press(key)
        await pilot.pause(0.1)
        app.tick()
        for inp in app.screen.query(Input):
            inp.cursor_blink = False
        await pilot.pause(0.1)

    return app, run_before


# every screen at 80x24; the Main screen (which adds rows and sparklines) also at 160x48;
# screenshots/ holds every screen at both sizes from the real engine.
CASES = [(k, v, (80, 24)) for k, v in VIEWS] + [("m", "main", (160, 48))]


@pytest.mark.parametrize("key,view,size", CASES, ids=[f"{v}-{s[0]}x{s[1]}" for _, v, s in CASES])
def test_screen(snap_compare, key: str, view: str, size: tuple[int, int]) -> None:
    app, run_before = _scenario(key)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_editor_with_an_error(snap_compare, tmp_path) -> None:
    import shutil

    from textual.widgets import OptionList

    from .conftest import PROFILES

    prof = tmp_path / "lab.yaml"
    shutil.copy(PROFILES / "lab.yaml", prof)
    clock = FrozenClock()
    app, _ = make_app(prof, clock=clock, tick_s=3600)
    app.profile_path = "profiles/lab.yaml (copy)"  # a stable title in the SVG

    async def run_before(pilot) -> None:
        await pilot.pause(0.1)
        app.tick()
        from tgen_tui.ui.editor import EditorScreen, FieldRow

        await app.push_screen(EditorScreen(str(prof)))
        await pilot.pause(0.2)
        scr = app.screen
        scr.query_one("#etitle").update(" editor: profiles/lab.yaml")
        scr.query_one("#sections", OptionList).highlighted = 3
        await pilot.pause(0.2)
        row = next(r for r in scr.query(FieldRow) if r.path == ("streams", 0, "vlan"))
        row.query_one(Input).value = "[{id: 5000}]"
        for inp in scr.query(Input):
            inp.cursor_blink = False
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
