"""R opens the results store's screen in the console (on the console's own store);
escape goes back to the screen it came from."""

from __future__ import annotations

import asyncio

from tgen_tui.ui.results_screen import ResultsScreen

from .conftest import make_app, settle


def test_R_opens_the_results_screen_and_escape_returns(tmp_path) -> None:
    seen: dict = {}

    async def go():
        app, _eng = make_app()
        app.results_db = str(tmp_path / "r.db")
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            main = app.screen
            assert not isinstance(main, ResultsScreen)
            await pilot.press("R")
            await settle(pilot, app, lambda: isinstance(app.screen, ResultsScreen))
            seen["db"] = app.screen.db
            await pilot.press("escape")
            await settle(pilot, app, lambda: not isinstance(app.screen, ResultsScreen))
            seen["back"] = app.screen is main

    asyncio.run(go())
    assert seen == {"db": str(tmp_path / "r.db"), "back": True}


def test_help_lists_the_results_key() -> None:
    from textual.binding import Binding

    from tgen_tui.ui.actions import APP, bindings, help_rows

    keys = {b.id: b.key for b in bindings(APP) if isinstance(b, Binding)}
    assert keys["view.results"] == "R"
    assert ("R", "Results", "view.results") in list(help_rows({}))
