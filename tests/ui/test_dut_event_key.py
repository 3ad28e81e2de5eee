"""Key x runs one of the profile's named DUT events (dut.events) over the DUT channel."""

from __future__ import annotations

import asyncio
from pathlib import Path

from .conftest import PROFILES, make_app, settle


def test_x_runs_a_named_dut_event_and_logs_it(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    text = (
        (PROFILES / "lab.yaml")
        .read_text()
        .replace(
            "dut:\n  netns: tgen-dut\n",
            # a command prefix on this host is a real DUT channel (as 'ssh root@dut' would be)
            f"dut:\n  ssh: sh -c\n  events:\n    mark: echo done > {mark}\n    fail: exit 3\n",
        )
    )
    prof = tmp_path / "p.yaml"
    prof.write_text(text)
    app, _ = make_app(prof)

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            await pilot.press("x")
            await settle(pilot, app)
            await pilot.press("enter")  # the first: mark
            await settle(pilot, app, lambda: any("DUT event mark" in x for x in app.log_lines))
            await pilot.press("x", "down", "enter")  # the second: fail
            await settle(pilot, app, lambda: any("DUT event fail" in x for x in app.log_lines))

    asyncio.run(go())
    assert mark.read_text() == "done\n"
    lines = [x for x in app.log_lines if "DUT event" in x]
    assert "DUT event mark: ok" in lines[0]
    assert "DUT event fail: FAILED (rc 3)" in lines[1]
