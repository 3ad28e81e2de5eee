"""Make the console's screenshots: every screen at 80x24, 120x36 and 160x48, from the real app and
the real engine (through the run owner, as ``tgen tui`` runs it) against a lab this script
brings up (unique prefix, with its transport hosts) and removes.

    sudo .venv/bin/python screenshots/make.py            # writes screenshots/*.svg
    sudo .venv/bin/python screenshots/make.py --seconds 5
    sudo .venv/bin/python screenshots/make.py --only capture   # the Capture screen only

Each size runs ``profiles/lab.yaml`` (its namespaces renamed to the script's lab), starts
both ports from the keyboard (``S``), lets them send, stops p0 (``0`` ``t``), selects p1,
then saves Main, Streams, DUT, Workers, Log, Help, the port page, Results and the editor, and quits with
``q`` ``y``. Streams and DUT are shot with a 1 % random drop on the DUT (set after the Main shot,
while p1 sends, removed after the DUT shot), so the Streams "why" line (cursor on ``down``) and
the DUT's drop counters show a real cause: the nft rule. The Results screen shows three short ``tgen run``s of the same lab stored as builds
b1, b2 and b3 (b3 with 10 % random drop on the DUT, so it is marked worse).

The Capture screen is shot on its own run of the lab: both ports start, p1 is selected, ``P``
opens the screen, a capture of p1 with the filter ``udp`` runs CAPTURE_SECONDS (its file in a
temporary folder), the cursor goes to the newest received frame but the last row (its source
translated by the DUT) and the shot is taken; space stops the capture.

The Flows screen is shot on ``profiles/tcp-under-load.yaml`` (renamed to the lab): both ports
start, and after FLOW_SECONDS the TCP flow has sent alone for 5 s and then under the frame load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tgen_tui.ui.actions import VIEW_KEYS  # noqa: E402

# main, streams, dut, workers, log, help (Flows and Capture have runs of their own)
VIEWS = [(k, v) for k, v in VIEW_KEYS if v not in ("flows", "capture")]
SCREENS = ("all", "capture")  # --only
CAPTURE_SECONDS = 2.0
FLOW_PROFILE = "tcp-under-load.yaml"  # a TCP flow, and a frame load from 5 s to 15 s
FLOW_SECONDS = 10.0
SIZES = [(80, 24), (120, 36), (160, 48)]
DROP_PERCENT = 1.0  # on the DUT for the Streams and DUT shots
LOSS_SECONDS = 6.0  # p1 sends through the drop; > 5 s: a new rule is found at the reader's next
# re-listing of the ruleset (every 50 reads)


def lab_profile(prefix: str, name: str) -> Path:
    """``profiles/NAME`` with the lab's namespaces renamed to this script's lab."""
    text = (ROOT / "profiles" / name).read_text()
    for ns in ("tester", "dut", "h0", "h1"):
        text = text.replace(f"tgen-{ns}", f"{prefix}-{ns}")
    path = Path(f"/tmp/{prefix}-{name}")
    path.write_text(text)
    return path


def console(path: Path, db: Path):
    """The console on ``path`` as ``tgen tui`` builds it: the run owner's run in trio guest
    mode (nothing stored)."""
    from tgen_tui.results.record import StoreOptions
    from tgen_tui.session.options import RunOptions
    from tgen_tui.session.owner import RunOwner
    from tgen_tui.ui.app import TgenApp
    from tgen_tui.ui.host import GuestEngineHost

    opts = RunOptions(
        profile=str(path), test="tui", front_end="tgen tui", store=StoreOptions(no_store=True)
    )
    owner = RunOwner(opts)
    host = GuestEngineHost(owner.open, owner=owner)
    return TgenApp(
        host,
        compiled=owner.compiled,
        profile_path=str(path),
        profiles_dir=str(ROOT / "profiles"),
        results_db=str(db),
    )


async def started(pilot, app) -> None:
    """Wait for the engine's first snapshot, then start every port (S)."""
    for _ in range(200):
        await pilot.pause(0.1)
        if app.snap is not None:
            break
    await pilot.press("S")


async def quit_console(pilot) -> None:
    await pilot.press("q")
    await pilot.pause(0.3)
    await pilot.press("y")
    await pilot.pause(1.0)


def seed_results(prefix: str, db: Path) -> None:
    """Three 1 s runs of the lab profile as builds b1, b2, b3 (b3 with 10 % DUT drop)."""
    import subprocess

    from tgen_tui.lab import topology

    prof = lab_profile(prefix, "lab.yaml")
    tgen = [sys.executable, "-m", "tgen_tui"]
    try:
        for build in ("b1", "b2", "b3"):
            if build == "b3":
                topology.set_dut(prefix, drop_percent=10.0)
            subprocess.run(
                [*tgen, "run", str(prof), "-d", "1", "-q", "--db", str(db), "--dut", "lab",
                 "--build", build, "--rate-scale", "0.25"],
                check=False, capture_output=True, timeout=60,
            )  # fmt: skip
    finally:
        topology.set_dut(prefix, drop_percent=0.0)
        prof.unlink(missing_ok=True)


async def shoot(
    prefix: str, size: tuple[int, int], out: Path, seconds: float, db: Path
) -> list[str]:
    from textual.widgets import Input, OptionList

    from tgen_tui.lab import topology
    from tgen_tui.ui.editor import EditorScreen

    tmp = lab_profile(prefix, "lab.yaml")
    app = console(tmp, db)
    w, h = size
    written = []
    async with app.run_test(size=size) as pilot:
        await started(pilot, app)
        await pilot.pause(seconds)
        await pilot.press("0", "t", "1")
        await pilot.pause(1.5)
        for key, view in VIEWS:
            if view == "streams":  # loss with a cause for the Streams and DUT shots
                await asyncio.to_thread(topology.set_dut, prefix, drop_percent=DROP_PERCENT)
                await pilot.pause(LOSS_SECONDS)
            await pilot.press(key)
            if view == "streams":
                await pilot.press("down")  # the down stream: p1 still sends
            await pilot.pause(0.6)
            name = f"{view}-{w}x{h}.svg"
            app.save_screenshot(filename=name, path=str(out))
            written.append(name)
            if view == "dut":
                await asyncio.to_thread(topology.set_dut, prefix, drop_percent=0.0)
        await pilot.press("R")
        await pilot.pause(1.0)
        name = f"results-{w}x{h}.svg"
        app.save_screenshot(filename=name, path=str(out))
        written.append(name)
        await pilot.press("escape")
        await pilot.pause(0.3)
        await pilot.press("m", "e")
        await pilot.pause(0.5)
        scr = app.screen
        assert isinstance(scr, EditorScreen)
        scr.query_one("#etitle").update(" editor: profiles/lab.yaml")
        scr.query_one("#sections", OptionList).highlighted = 3
        await pilot.pause(0.5)
        for inp in scr.query(Input):
            inp.cursor_blink = False
        name = f"editor-{w}x{h}.svg"
        app.save_screenshot(filename=name, path=str(out))
        written.append(name)
        await pilot.press("escape")
        await quit_console(pilot)
    tmp.unlink(missing_ok=True)
    return written


async def shoot_flows(prefix: str, size: tuple[int, int], out: Path, db: Path) -> list[str]:
    """The Flows screen on the TCP-under-load profile, FLOW_SECONDS after S."""
    tmp = lab_profile(prefix, FLOW_PROFILE)
    app = console(tmp, db)
    name = f"flows-{size[0]}x{size[1]}.svg"
    async with app.run_test(size=size) as pilot:
        await started(pilot, app)
        await pilot.press("n")
        await pilot.pause(FLOW_SECONDS)
        app.save_screenshot(filename=name, path=str(out))
        await quit_console(pilot)
    tmp.unlink(missing_ok=True)
    return [name]


async def shoot_capture(prefix: str, size: tuple[int, int], out: Path, db: Path) -> list[str]:
    """The Capture screen: a capture of p1 (filter udp) while both ports send."""
    import tempfile

    from tgen_tui.ui.widgets import RowList

    tmp = lab_profile(prefix, "lab.yaml")
    app = console(tmp, db)
    name = f"capture-{size[0]}x{size[1]}.svg"
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-captures-") as d:
        os.chdir(d)  # the capture's file: ./captures/, shown as such
        try:
            async with app.run_test(size=size) as pilot:
                await started(pilot, app)
                await pilot.pause(1.5)
                await pilot.press("1", "P")
                await pilot.pause(0.5)
                await pilot.press("slash", *"udp", "enter")
                await pilot.pause(CAPTURE_SECONDS)
                t = app.screen.query_one("#cap-frames", RowList)
                wheres = [t.texts(i)[1].strip() for i in range(t.row_count)]
                # the newest received frame but the last row (on the last row the
                # cursor follows the new ones)
                rx = [i for i, w in enumerate(wheres[:-1]) if w == "p1 rx"]
                if rx:
                    t.move_cursor(row=rx[-1])
                await pilot.pause(0.6)
                app.save_screenshot(filename=name, path=str(out))
                await pilot.press("space")
                await pilot.pause(1.0)
                await quit_console(pilot)
        finally:
            os.chdir(here)
    tmp.unlink(missing_ok=True)
    return [name]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--seconds",
        type=float,
        default=12.0,
        help="how long both ports send before the shots (the charts show this much history)",
    )
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    ap.add_argument(
        "--only",
        choices=SCREENS,
        default="all",
        help="only these screens' shots (capture: the Capture screen's, at every size)",
    )
    ap.add_argument(
        "--size",
        action="append",
        choices=[f"{w}x{h}" for w, h in SIZES],
        help="only this size (repeatable; default: all)",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("screenshots/make.py: needs root (it brings up a lab)", file=sys.stderr)
        return 3
    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig

    prefix = "shot" + secrets.token_hex(2)
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    topology.up(LabConfig(prefix=prefix, topology="nat", transport_hosts=True))
    db = Path(f"/tmp/{prefix}-results.db")
    try:
        if args.only == "all":
            seed_results(prefix, db)
        for size in SIZES:
            if args.size and f"{size[0]}x{size[1]}" not in args.size:
                continue
            names = []
            if args.only == "all":
                names += asyncio.run(shoot(prefix, size, out, args.seconds, db))
                names += asyncio.run(shoot_flows(prefix, size, out, db))
            names += asyncio.run(shoot_capture(prefix, size, out, db))
            print(f"{size[0]}x{size[1]}: " + ", ".join(names))
    finally:
        topology.down(prefix)
        for f in db.parent.glob(db.name + "*"):
            f.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
