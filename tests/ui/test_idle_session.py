"""An idle console leaves no run: quitting a session that sent nothing stores nothing and
says so; a session that sent frames is stored (the control)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from tgen_tui.cli import build_parser
from tgen_tui.results.record import StoreOptions
from tgen_tui.session.record import sent_nothing
from tgen_tui.ui.cli import store_console_run

from .conftest import PROFILES, FrozenClock, make_app, settle

TGEN = [sys.executable, "-m", "tgen_tui"]


def _session(send: bool):
    clock = FrozenClock()
    app, _ = make_app(clock=clock)

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            if send:
                await pilot.press("0", "s")
                await settle(pilot, app, lambda: app.port_state("p0") == "running")
                clock.t += 1.0
                await pilot.pause(0.15)
                await pilot.press("t")
                await settle(pilot, app, lambda: app.port_state("p0") == "stopped")
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(go())
    assert app.result is not None and app.run_result is not None
    return app.run_result


def _runs(db) -> list[str]:
    cp = subprocess.run(
        [*TGEN, "results", "list", "--db", str(db)], capture_output=True, text=True, timeout=60
    )
    assert cp.returncode == 0, cp.stderr
    return [ln for ln in cp.stdout.splitlines() if ln.strip()[:1].isdigit()]


def test_open_and_quit_at_once_stores_no_new_run(tmp_path, capsys) -> None:
    db = tmp_path / "results.db"
    args = build_parser().parse_args(["tui", str(PROFILES / "lab.yaml"), "--db", str(db)])
    opts = StoreOptions.from_args(args)
    # the control: a session that sent 1 s on p0 is stored as run 1
    sent = _session(send=True)
    assert sent.ports["p0"].tx_frames == 20_001  # 1 s at 20 kpps: frames due at 0 and 1 s
    assert not sent_nothing(sent.to_doc())
    assert store_console_run(sent, opts) == 1
    assert "stored as run 1" in capsys.readouterr().err
    assert len(_runs(db)) == 1
    # open the console and quit at once: no new run, and it says so
    idle = _session(send=False)
    assert sent_nothing(idle.to_doc())
    assert store_console_run(idle, opts) is None
    assert "tgen tui: nothing was sent: no run stored" in capsys.readouterr().err
    runs = _runs(db)
    assert len(runs) == 1 and runs[0].split()[0] == "1"
