"""The port page, the chart window key and the renamed retry counter with its Help text."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable

from tgen_tui.ui.charts import Chart
from tgen_tui.ui.history import WINDOWS
from tgen_tui.ui.screens.port import PortScreen
from tgen_tui.ui.widgets import Grid

from .conftest import FrozenClock, make_app


def test_port_page_window_key_and_retry_label() -> None:
    clock = FrozenClock()
    app, _ = make_app(clock=clock, tick_s=3600)
    seen: dict = {}

    async def go() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await pilot.press("S")
            await pilot.pause(0.05)
            for _ in range(30):
                clock.t += 0.1
                app.tick()
            grid = app.screen.query_one("#ports", Grid)
            seen["main_labels"] = [label for _, label in grid.rows]
            seen["tx_lines"] = app.screen.query_one("#chart-tx", Chart)._key is not None
            await pilot.press("1", "o")
            await pilot.pause(0.1)
            app.tick()
            await pilot.pause(0.05)
            scr = app.screen
            assert isinstance(scr, PortScreen)
            seen["page_port"] = scr._port
            seen["page_streams"] = scr._streams
            await pilot.press("g")
            await pilot.pause(0.05)
            seen["window"] = app.window
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            t = app.screen.query_one("#help", DataTable)
            seen["help"] = [" ".join(str(c) for c in t.get_row_at(i)) for i in range(t.row_count)]
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(go())
    assert "Tx retries" in seen["main_labels"] and "Tx errors" not in seen["main_labels"]
    assert "Lost frames" in seen["main_labels"]
    assert seen["tx_lines"]  # the Tx chart drew from the history at 160x48
    assert seen["page_port"] == "p1" and seen["page_streams"] == ["down"]
    assert seen["window"] is WINDOWS[1]
    help_text = "\n".join(seen["help"])
    assert "Tx retries send attempts the kernel refused for a" in help_text
    assert "(EAGAIN/ENOBUFS)" in help_text and "not lost" in help_text
    assert "o, enter the selected port's page" in help_text
    assert "g charts: show the last 60 s or the last 10 min" in help_text
