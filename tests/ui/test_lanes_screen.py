"""The Workers screen shows a port's sender lanes (profile ``lanes: 2`` on p0), on the
fake engine: one row per lane worker, each on its own core, labelled with its lane."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Static

from tgen_tui.ui.screens import WorkersScreen

from .conftest import PROFILES, make_app, settle


def test_workers_screen_shows_two_lanes_for_p0(tmp_path) -> None:
    text = (PROFILES / "lab.yaml").read_text()
    text = text.replace(
        "p0: {interface: p0, netns: tgen-tester, speed: 10G}",
        "p0: {interface: p0, netns: tgen-tester, speed: 10G, lanes: 2}",
    )
    assert "lanes: 2" in text
    prof = tmp_path / "lanes.yaml"
    prof.write_text(text)

    async def go():
        app, _eng = make_app(prof)
        async with app.run_test(size=(100, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("w")
            await pilot.pause(0.2)
            assert isinstance(app.screen, WorkersScreen)
            t = app.screen.query_one("#workers", DataTable)
            rows = [t.get_row(k) for k in t.rows]
            ports = [str(r[2]) for r in rows]
            assert ports == ["p0 L0/2", "p0 L1/2", "p1"]
            notes = str(app.screen.query_one("#plan-notes", Static).render())
            # each lane on its own core, or the sharing is said (never silent)
            assert str(rows[0][1]) != str(rows[1][1])
            if len({str(r[1]) for r in rows}) < len(rows):
                assert "workers share" in notes

    asyncio.run(go())
