"""Make the console's screenshots: every screen at 80x24, 120x36 and 160x48, from the real app and
the real engine against a lab this script brings up (unique prefix) and removes.

    sudo .venv/bin/python screenshots/make.py            # writes screenshots/*.svg
    sudo .venv/bin/python screenshots/make.py --seconds 5

Each size runs ``profiles/lab.yaml`` (its namespaces renamed to the script's lab), starts
both ports from the keyboard (``S``), lets them send, stops p0 (``0`` ``t``), selects p1,
then saves Main, Streams, DUT, Workers, Log, Help, the port page, Results and the editor, and quits with
``q`` ``y``. Streams and DUT are shot with a 1 % random drop on the DUT (set after the Main shot,
while p1 sends, removed after the DUT shot), so the Streams "why" line (cursor on ``down``) and
the DUT's drop counters show a real cause: the nft rule. The Results screen shows three short ``tgen run``s of the same lab stored as builds
b1, b2 and b3 (b3 with 10 % random drop on the DUT, so it is marked worse).
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

VIEWS = VIEW_KEYS  # main, streams, dut, workers, log, help
SIZES = [(80, 24), (120, 36), (160, 48)]
DROP_PERCENT = 1.0  # on the DUT for the Streams and DUT shots
LOSS_SECONDS = 6.0  # p1 sends through the drop; > 5 s: a new rule is found at the reader's next
# re-listing of the ruleset (every 50 reads)


def seed_results(prefix: str, db: Path) -> None:
    """Three 1 s runs of the lab profile as builds b1, b2, b3 (b3 with 10 % DUT drop)."""
    import subprocess

    from tgen_tui.lab import topology

    text = (ROOT / "profiles" / "lab.yaml").read_text()
    text = text.replace("tgen-tester", f"{prefix}-tester").replace("tgen-dut", f"{prefix}-dut")
    prof = Path(f"/tmp/{prefix}-runs.yaml")
    prof.write_text(text)
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

    from tgen_tui.engine.controller import EngineOptions, open_engine
    from tgen_tui.lab import topology
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile_text
    from tgen_tui.ui.app import TgenApp
    from tgen_tui.ui.editor import EditorScreen
    from tgen_tui.ui.host import GuestEngineHost

    text = (ROOT / "profiles" / "lab.yaml").read_text()
    text = text.replace("tgen-tester", f"{prefix}-tester").replace("tgen-dut", f"{prefix}-dut")
    tmp = Path(f"/tmp/{prefix}-lab.yaml")
    tmp.write_text(text)
    compiled = compile_profile(load_profile_text(text, str(tmp)))
    host = GuestEngineHost(lambda: open_engine(compiled, EngineOptions()))
    app = TgenApp(
        host,
        compiled=compiled,
        profile_path=str(tmp),
        profiles_dir=str(ROOT / "profiles"),
        results_db=str(db),
    )
    w, h = size
    written = []
    async with app.run_test(size=size) as pilot:
        for _ in range(200):
            await pilot.pause(0.1)
            if app.snap is not None:
                break
        await pilot.press("S")
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
        await pilot.press("escape", "q")
        await pilot.pause(0.3)
        await pilot.press("y")
        await pilot.pause(1.0)
    tmp.unlink(missing_ok=True)
    return written


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
    topology.up(LabConfig(prefix=prefix, topology="nat"))
    db = Path(f"/tmp/{prefix}-results.db")
    try:
        seed_results(prefix, db)
        for size in SIZES:
            if args.size and f"{size[0]}x{size[1]}" not in args.size:
                continue
            names = asyncio.run(shoot(prefix, size, out, args.seconds, db))
            print(f"{size[0]}x{size[1]}: " + ", ".join(names))
    finally:
        topology.down(prefix)
        for f in db.parent.glob(db.name + "*"):
            f.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
