"""``tgen tui --json``: the session's result in tgen run's shape; the verb's command line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from .conftest import FrozenClock, make_app, settle

TGEN = [sys.executable, "-m", "tgen_tui"]


def test_json_covers_three_start_stop_cycles_and_a_clear(tmp_path) -> None:
    out = tmp_path / "session.json"
    clock = FrozenClock()

    async def go():
        app, eng = make_app(clock=clock, json_path=str(out))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            for i in range(3):
                await pilot.press("0", "s")
                await settle(pilot, app, lambda: app.port_state("p0") == "running")
                clock.t += 1.0
                await pilot.pause(0.15)
                await pilot.press("t")
                await settle(pilot, app, lambda: app.port_state("p0") == "stopped")
                if i == 1:
                    await pilot.press("c")  # the result still covers the frames before it
                    await settle(pilot, app, lambda: app.snap.port("p0").tx_frames == 0)
            await pilot.press("q")
            await pilot.pause(0.3)

    asyncio.run(go())
    res = json.loads(out.read_text())
    p0, up = res["ports"]["p0"], res["streams"]["up"]
    assert (
        p0["tx_frames"] == 60_003
    )  # 3 × 1 s × 20 kpps: the real pacer sends frames due at 0 s and at 1 s
    assert p0["if_tx_frames"] == p0["tx_frames"]
    assert up["tx_frames"] == 60_003 and up["lost"] == 0 and up["duplicates"] == 0
    assert res["ports"]["p1"]["tx_frames"] == 0
    assert res["session"]["clears"] == 1
    assert res["profile"] == "lab" and res["partial"] is False
    assert any("port p0: idle -> starting" in e for e in res["events"])
    for key in ("stream_config", "environment", "worker_plan", "profile_hash", "seed"):
        assert key in res


def test_bad_profile_is_one_line_exit_2(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("ports: {p0: {interface: p0}}\nstreams:\n  - {name: a, port: p9}\n")
    cp = subprocess.run([*TGEN, "tui", str(bad)], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2
    assert cp.stderr.strip().splitlines() == [
        f"{bad}:3:15: streams[0].port: unknown port 'p9' (ports: p0)"
    ]
    assert "Traceback" not in cp.stderr


def test_bad_keymap_is_exit_2(tmp_path) -> None:
    km = tmp_path / "k.toml"
    km.write_text('"nope" = "x"\n')
    cp = subprocess.run(
        [*TGEN, "tui", "profiles/lab.yaml", "--keymap", str(km)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cp.returncode == 2
    assert "unknown binding id 'nope'" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1


@pytest.mark.root  # as non-root the root check answers first
def test_missing_lab_namespace_is_exit_3_before_textual(tmp_path) -> None:
    prof = tmp_path / "p.yaml"
    text = open("profiles/lab.yaml").read().replace("tgen-tester", "nolab-xyz-tester")
    prof.write_text(text)
    cp = subprocess.run([*TGEN, "tui", str(prof)], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 3
    assert cp.stderr.strip() == (
        "tgen: error: port p0: network namespace 'nolab-xyz-tester' does not exist (bring the lab up: tgen lab up)"
    )
    assert "\x1b[" not in cp.stdout  # Textual never started


def test_not_root_is_exit_3(tmp_path) -> None:
    if os.geteuid() != 0:
        cp = subprocess.run(
            [*TGEN, "tui", "profiles/lab.yaml"], capture_output=True, text=True, timeout=30
        )
    else:
        code = (
            "import os, sys; os.geteuid = lambda: 1000; from tgen_tui.cli import main; "
            "sys.exit(main(['tui', 'profiles/lab.yaml']))"
        )
        cp = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
        )
    assert cp.returncode == 3
    assert cp.stderr.startswith("tgen: error: tgen tui needs root")


def test_help_teaches_and_tgen_help_does_not_import_textual() -> None:
    cp = subprocess.run([*TGEN, "tui", "--help"], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0
    for s in (
        "tgen tui profiles/lab.yaml",
        "50kpps",
        "keymap",
        '"port.start" = "ctrl+s"',
        "Exit codes",
    ):
        assert s in cp.stdout
    code = "import sys; from tgen_tui.cli import build_parser; build_parser(); print('textual' in sys.modules)"
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert cp.stdout.strip() == "False"
