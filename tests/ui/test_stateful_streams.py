"""The Streams screen and the port page show a ``learn: true`` stream's stateful figures
live (learned tuples and samples, flows verified n of N, setup latency, receive gap): the
fake writes them into its counter blocks as the workers do (tgen_tui/ui/fake_stateful.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from textual.widgets import DataTable, Static

from tgen_tui.ui.screens.port import PortScreen
from tgen_tui.ui.widgets import Grid

from .conftest import PROFILES, FrozenClock, make_app, settle


def _learn_profile(tmp_path: Path) -> Path:
    text = (PROFILES / "lab.yaml").read_text()
    assert "    schedule: {start: 500ms}\n" in text
    prof = tmp_path / "learn.yaml"
    prof.write_text(text.replace("    schedule: {start: 500ms}\n", "    learn: true\n"))
    return prof


def test_streams_screen_shows_learned_tuples_and_verified_flows(tmp_path: Path) -> None:
    clock = FrozenClock()
    out = tmp_path / "session.json"
    app, _ = make_app(_learn_profile(tmp_path), clock=clock, tick_s=3600, json_path=str(out))
    seen: dict = {}

    async def run() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await pilot.press("S")
            await pilot.pause(0.05)
            for _ in range(10):
                clock.t += 0.5
                app.tick()
            await pilot.press(STREAMS_KEY)
            await pilot.pause(0.1)
            app.tick()
            await pilot.pause(0.1)
            t = app.screen.query_one("#streams", DataTable)
            seen["cells"] = {
                name: str(t.get_cell(name, "flows")).strip() for name in ("up", "down")
            }
            seen["detail_up"] = str(app.screen.query_one("#stream-detail", Static).render())
            await pilot.press("down")
            await pilot.pause(0.05)
            app.tick()
            await pilot.pause(0.1)
            seen["detail_down"] = str(app.screen.query_one("#stream-detail", Static).render())
            await pilot.press("0", "o")
            await pilot.pause(0.1)
            app.tick()
            await pilot.pause(0.05)
            assert isinstance(app.screen, PortScreen)
            g = app.screen.query_one("#port-streams", Grid)
            seen["port_flows"] = str(g.cells.get(("flows", "up"), ""))
            await pilot.press("T")

            def stopped() -> bool:  # this console ticks only by hand (tick_s=3600)
                app.tick()
                return app.port_state("p0") == "stopped"

            await settle(pilot, app, stopped)
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(run())
    assert seen["cells"] == {"up": "256/256", "down": "L 256"}
    up, down = seen["detail_up"], seen["detail_down"]
    assert "flows     verified 256 of 256   setup p50 2." in up  # the fake: 2 ms each
    assert "outage    longest receive gap 0.1 ms" in up  # one frame at 20 kpps: 50 µs
    assert "learned   256 tuples" in down
    assert "198.18.0.2:10000 -> 198.19.0.2:7" in down  # the first sample (no NAT in the fake)
    assert seen["port_flows"] == "256/256"
    # the console's own result (ui/record.py) carries them too
    res = json.loads(out.read_text())["streams"]
    assert res["up"]["flows_verified"] == 256 and res["down"]["learned"] == 256
    assert res["up"]["setup_latency_ns"]["p50"] is not None


STREAMS_KEY = "f"  # keymap: view.streams
