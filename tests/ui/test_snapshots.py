"""SVG snapshots of every screen at 80x24 and 160x48 on the fake engine (frozen clock,
ticks driven by hand, cursor blink off). Plain ``def``: snap_compare runs its own loop.
Update with ``pytest tests/ui/test_snapshots.py --snapshot-update`` after a deliberate change."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tgen_tui.ui.actions import VIEW_KEYS

from .conftest import FrozenClock, make_app

VIEWS = [(k, v) for k, v in VIEW_KEYS if v != "capture"]  # main, streams, ..., help
# (the Capture screen is shot with a capture running: test_capture)


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


# every screen at 80x24 (the port page and Main fold their charts to sparkline rows);
# screenshots/ holds every screen at 80x24, 120x36 and 160x48 from the real engine.
CASES = [(k, v, (80, 24)) for k, v in VIEWS]


@pytest.mark.parametrize("key,view,size", CASES, ids=[f"{v}-{s[0]}x{s[1]}" for _, v, s in CASES])
def test_screen(snap_compare, key: str, view: str, size: tuple[int, int]) -> None:
    app, run_before = _scenario(key)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def _chart_scenario(key: str):
    """The charts' history: both ports send 20 s (p0 at 20 kpps, p1 raised to 30 kpps after
    10 s), then p1 stops and p0 sends 10 s more, sampled at 10 Hz on a frozen clock moved
    by hand; 0.1 % loss on the fake's receive side; a 300-entry conntrack max."""
    clock = FrozenClock()
    app, _ = make_app(clock=clock, tick_s=3600, conntrack_max=300, loss=0.001)

    async def ticks(n: int) -> None:
        for _ in range(n):
            clock.t += 0.1
            app.tick()

    async def run_before(pilot) -> None:
        await pilot.pause(0.1)
        app.tick()
        await pilot.press("S")
        await pilot.pause(0.05)
        await ticks(100)
        await pilot.press("1", "r", *"30kpps", "enter")
        await pilot.pause(0.05)
        await ticks(100)
        await pilot.press("t")
        await pilot.pause(0.05)
        await ticks(100)
        await pilot.press("0", key)
        await pilot.pause(0.1)
        await ticks(3)
        await pilot.pause(0.1)

    return app, run_before


CHART_CASES = [
    (k, v, size) for size in ((120, 36), (160, 48)) for k, v in (("m", "main"), ("o", "port"))
]


@pytest.mark.parametrize(
    "key,view,size", CHART_CASES, ids=[f"{v}-{s[0]}x{s[1]}" for _, v, s in CHART_CASES]
)
def test_charts(snap_compare, key: str, view: str, size: tuple[int, int]) -> None:
    """Main and the port page with their charts: Tx/Rx pps (p1's lines drop to 0 at the
    right), lost frames/s, latency p50/p99 per stream, conntrack against its max."""
    app, run_before = _chart_scenario(key)
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


def _flow_scenario(profile: str, key: str):
    """Socket flows on the fake: both ports start; after 10 s (cc-regression's cubic-b
    joins at 5 s, its UDP background is on 2 s / off 3 s: on again now) the last flow's
    rate is set to 5 Mbit/s on the Flows screen when it is UDP (background); 1.5 s later
    the screen (``key``) is shot with the flow before it highlighted (reno: its Mathis
    figure); 0.2 % loss on the fake's UDP flows and frames."""
    from .conftest import PROFILES

    clock = FrozenClock()
    app, _ = make_app(PROFILES / profile, clock=clock, tick_s=3600, loss=0.002)

    async def ticks(n: int) -> None:
        for _ in range(n):
            clock.t += 0.1
            app.tick()

    async def run_before(pilot) -> None:
        await pilot.pause(0.1)
        app.tick()
        await pilot.press("S")
        await pilot.pause(0.05)
        await ticks(100)
        await pilot.press("n")
        await pilot.pause(0.05)
        app.tick()
        last = app.desc.flows[-1]
        await pilot.press(*["down"] * (len(app.desc.flows) - 1))
        if last.protocol == "udp":
            await pilot.press("r", *"5M", "enter")
        await pilot.pause(0.1)
        await ticks(15)
        await pilot.press("up", key)
        await pilot.pause(0.1)
        await ticks(3)
        await pilot.pause(0.1)

    return app, run_before


FLOW_CASES = [
    ("cc-regression.yaml", "n", "flows", (80, 24)),
    ("cc-regression.yaml", "n", "flows", (120, 36)),
    ("cc-regression.yaml", "m", "main", (120, 36)),  # flows only: goodput and RTT beside
    ("tcp-under-load.yaml", "m", "main", (120, 36)),  # mixed: goodput and RTT below
    ("tcp-under-load.yaml", "o", "port", (80, 24)),  # the port's flow beside its stream
]


@pytest.mark.parametrize(
    "profile,key,view,size",
    FLOW_CASES,
    ids=[f"{p.split('.')[0]}-{v}-{s[0]}x{s[1]}" for p, _, v, s in FLOW_CASES],
)
def test_flows(snap_compare, profile: str, key: str, view: str, size: tuple[int, int]) -> None:
    """The Flows screen (per flow goodput, RTT, retransmits, UDP loss, fairness, the
    highlighted flow's figures; charts at 120x36), Main's goodput row and charts, and the
    port page's flow table, on profiles with socket flows."""
    app, run_before = _flow_scenario(profile, key)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_capture(snap_compare, tmp_path, monkeypatch) -> None:
    """The Capture screen at 80x24: both ports send, p1 selected, a capture of p1 with
    the filter ``udp`` for 1 s (four status lines), the cursor one row above the newest
    frame, whose layers the detail pane shows (the fake's frames: no NAT)."""
    monkeypatch.chdir(tmp_path)  # the capture file: ./captures/
    clock = FrozenClock()
    app, _ = make_app(clock=clock, tick_s=3600)

    async def run_before(pilot) -> None:
        await pilot.pause(0.1)
        app.tick()
        await pilot.press("S")
        await pilot.pause(0.05)
        for _ in range(4):
            clock.t += 0.5
            app.tick()
        app.get_screen("capture").now = lambda: 1_790_000_000.0  # the file's name
        await pilot.press("1", "P")
        await pilot.pause(0.1)
        app.tick()
        await pilot.press("slash", *"udp", "enter")
        await pilot.pause(0.1)
        for _ in range(4):
            clock.t += 0.25
            app.tick()
            await pilot.pause(0.05)
        await pilot.press("up")
        await pilot.pause(0.1)
        for inp in app.screen.query(Input):
            inp.cursor_blink = False
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
