"""The Streams screen and the port page show each stream's spacing (the fake writes the
inter-arrival counters as the workers do: tgen_tui/ui/fake_spacing.py), and the console's
own result carries ``streams[].spacing``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from textual.widgets import DataTable, Static

from tgen_tui.ui.screens.port import PortScreen
from tgen_tui.ui.widgets import Grid

from .conftest import FrozenClock, make_app, settle


def test_streams_and_port_page_show_spacing(tmp_path: Path) -> None:
    clock = FrozenClock()
    out = tmp_path / "session.json"
    app, _ = make_app(clock=clock, tick_s=3600, json_path=str(out))
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
            await pilot.press("f")
            await pilot.pause(0.1)
            app.tick()
            await pilot.pause(0.1)
            t = app.screen.query_one("#streams", DataTable)
            seen["cell"] = str(t.get_cell("up", "spaced")).strip()
            seen["detail"] = str(app.screen.query_one("#stream-detail", Static).render())
            await pilot.press("0", "o")
            await pilot.pause(0.1)
            app.tick()
            await pilot.pause(0.05)
            assert isinstance(app.screen, PortScreen)
            g = app.screen.query_one("#port-streams", Grid)
            seen["port"] = {k: str(g.cells.get((k, "up"), "")) for k in ("spaced", "gap", "gap99")}
            await pilot.press("T")

            def stopped() -> bool:
                app.tick()
                return app.port_state("p0") == "stopped"

            await settle(pilot, app, stopped)
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(run())
    # the fake's pattern: 97 of 100 gaps within 7 % of the asked 50 µs (20 kpps)
    assert seen["cell"] == "97.0%"
    assert "spacing   97.0% within 10 % of 50.0 µs  gap 50.0 µs" in seen["detail"]
    assert seen["port"]["spaced"] == "97.0%"
    assert seen["port"]["gap"].startswith("50.0µs/")
    assert seen["port"]["gap99"].endswith("µs")
    sp = json.loads(out.read_text())["streams"]["up"]["spacing"]
    assert sp["within_10pct"] == 0.97 and sp["asked_gap_ns"] == 50_000 and sp["gaps"] > 0
    assert set(sp) == {
        "asked_gap_ns", "gaps", "mean_gap_ns", "mae_ns", "within_10pct", "p50_ns", "p99_ns",
        "ks", "law",
    }  # fmt: skip
