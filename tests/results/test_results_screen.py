"""The console's Results screen: recent runs, a trend sparkline per metric, and a mark on the
run that is worse than the previous build of its DUT."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tgen_tui.results.record import record_run

from .rs_helpers import result


def save_screenshot(db: str, path: Path, size: tuple[int, int] = (150, 34)) -> str:
    """Open the Results screen on ``db`` in a headless app, save an SVG screenshot, return
    the verdict cells (screenshots/make.py makes the console's results-WxH.svg)."""
    from textual.app import App
    from textual.widgets import DataTable

    from tgen_tui.ui.results_screen import ResultsScreen

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ResultsScreen(db))

    async def go() -> list[str]:
        app = Host()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, ResultsScreen)
            await pilot.press("down")  # select the second-newest run: detail and trends follow
            await pilot.press("up")
            await pilot.pause()
            table = screen.query_one("#rs-table", DataTable)
            cells = [str(table.get_row_at(i)[-1]) for i in range(table.row_count)]
            sparks = screen.trends
            app.save_screenshot(filename=path.name, path=str(path.parent))
            await pilot.press("escape")
            return cells + [f"spark {len(sparks['rx_pps'])}"]

    return asyncio.run(go())


@pytest.mark.timeout(60)
def test_results_screen_marks_the_worse_build(tmp_path, db):
    for build, rx in (("b1", 10_000.0), ("b2", 10_020.0), ("b3", 9_000.0)):
        record_run(result(rx, tx_pps=10_100.0), db=str(db), dut="natbox", build=build)
    record_run(result(5_000.0, partial=True), db=str(db), dut="natbox", build="b4")
    shot = tmp_path / "results.svg"
    cells = save_screenshot(str(db), shot)
    # newest first: b4 (interrupted), b3 (worse), b2 (ok), b1 (first)
    assert cells[0].startswith("interrupted")
    assert cells[1] == "▼ worse vs b2: rx pps -10.2 %, loss +10.10 pt"
    assert cells[2] == "ok vs b1"
    assert cells[3].startswith("- (first build)")
    assert cells[4] == "spark 3"  # one median per build of the DUT
    svg = shot.read_text()
    assert "worse" in svg and "natbox" in svg and "█" in svg


def test_results_screen_imports_nothing_else_from_the_ui():
    import subprocess

    code = (
        "import sys, tgen_tui.ui.results_screen; "
        "print(sorted(m for m in sys.modules if m.startswith('tgen_tui.ui.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['tgen_tui.ui.results_screen']"
