"""One run, frame streams and socket flows together (root, a lab with transport hosts):
``tgen run`` of a mixed profile counts the frames against the interface counters, gives
the flows goodput and RTT, writes one result with both and NDJSON snapshots that carry
the flows live; a profile's before_run hook runs from the console as from ``tgen run``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tgen_tui.lab import hosts

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]


@pytest.fixture(scope="module")
def hosts_lab(make_lab):
    with make_lab("nat", "x", transport_hosts=True, rps_cpus=None) as prefix:
        yield prefix


def _mixed(prefix: str, tmp: Path, hook: str | None = None) -> Path:
    """profiles/tcp-under-load.yaml on this lab, 3 s, the load at 5 kpps from 1 s to 2 s."""
    text = (ROOT / "profiles/tcp-under-load.yaml").read_text().replace("tgen-", f"{prefix}-")
    text = text.replace("duration: 20s", "duration: 3s").replace("pps: 100000", "pps: 5000")
    text = text.replace("schedule: {start: 5s, stop: 15s}", "schedule: {start: 1s, stop: 2s}")
    if hook:
        text = text.replace(
            f"  netns: {prefix}-dut\n",
            f"  netns: {prefix}-dut\n  hooks: {{before_run: '{hook}'}}\n",
        )
    path = tmp / "mixed.yaml"
    path.write_text(text)
    return path


def test_one_run_of_frames_and_flows(hosts_lab, tmp_path):
    prof = _mixed(hosts_lab, tmp_path)
    out, nd = tmp_path / "r.json", tmp_path / "r.ndjson"
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "--json", str(out), "--ndjson", str(nd), "-q", "--no-store"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    res = json.loads(out.read_text())
    for p in res["ports"].values():  # frames: the workers' counts are the kernel's
        assert p["tx_frames"] == p["if_tx_frames"] and p["rx_frames"] == p["if_rx_frames"]
    load = res["streams"]["load"]
    assert load["tx_frames"] == 5000 and load["rx_frames"] == 5000 and load["lost"] == 0
    flow = res["transport"]["streams"]["goodput"]
    assert flow["protocol"] == "tcp" and flow["cc"] == "cubic"
    assert flow["goodput_bps"] > 1e6 and flow["rtt_ms"] > 0 and flow["min_rtt_ms"] > 0
    assert flow["rx_bytes"] == flow["tx_bytes"] > 0  # drained: every byte sent arrived
    assert res["metrics"]["goodput_bps"] == pytest.approx(flow["goodput_bps"])
    assert [w["kind"] for w in res["workers"]].count("flows") == 1
    snaps = [json.loads(x) for x in nd.read_text().splitlines()]
    snaps = [s for s in snaps if "seq" in s]
    live = [s for s in snaps if s["flows"]["goodput"]["goodput_bps"] > 0]
    assert len(live) >= 10, "the flow's goodput is in the snapshots while it runs"
    both = [s for s in live if s["streams"]["load"]["tx_pps"] > 0]
    assert both, "a snapshot carries the frame load and the flow together"
    assert {"rtt_ms", "cwnd", "retransmits"} <= set(live[-1]["flows"]["goodput"])


def test_before_run_hook_runs_from_the_console_as_from_tgen_run(hosts_lab, tmp_path):
    from tgen_tui.session.options import RunOptions
    from tgen_tui.session.owner import RunOwner
    from tgen_tui.ui.app import TgenApp
    from tgen_tui.ui.host import GuestEngineHost

    mark = tmp_path / "hook-ran"
    prof = _mixed(hosts_lab, tmp_path, hook=f"echo run >> {mark}")
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "-d", "1", "-q", "--no-store"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    assert mark.read_text() == "run\n"  # the hook ran in the DUT's namespace, once
    mark.unlink()
    owner = RunOwner(RunOptions(profile=str(prof), test="tui", front_end="tgen tui"))
    app = TgenApp(
        GuestEngineHost(owner.open, owner=owner), compiled=owner.compiled, profile_path=str(prof)
    )
    seen: dict[str, bool] = {}

    async def go() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                if app.snap is not None:
                    break
            await pilot.press("0", "s")  # the console's first port starts
            for _ in range(100):
                await pilot.pause(0.05)
                if app.port_state("p0") == "running":
                    break
            seen["running"] = app.port_state("p0") == "running"
            seen["file"] = mark.exists()
            await pilot.press("q", "y")
            await pilot.pause(0.5)

    asyncio.run(go())
    assert seen == {"running": True, "file": True}
    assert any("dut_hook" in ln and "before_run" in ln and ": ok in" in ln for ln in app.log_lines)
    assert mark.read_text() == "run\n"
    hooks = app.result["dut_hooks"]
    assert [h["hook"] for h in hooks] == ["before_run"] and hooks[0]["ok"]
    assert app.result["transport"]["streams"]["goodput"]["tx_bytes"] > 0
    assert not [p for p in os.listdir("/dev/shm") if p.startswith(f"tgen-{os.getpid()}-")]


def test_preflight_checks_each_flow_path(hosts_lab, tmp_path):
    prof = _mixed(hosts_lab, tmp_path)
    good = subprocess.run(
        [*TGEN, "preflight", str(prof)], capture_output=True, text=True, timeout=60
    )
    assert good.returncode == 0, good.stderr
    assert "flow goodput  tcp          pass" in good.stderr + good.stdout
    bad = prof.with_name("bad.yaml")
    bad.write_text(prof.read_text().replace(hosts.H1_IP, "198.19.100.77"))
    cp = subprocess.run([*TGEN, "preflight", str(bad)], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1
    line = next(ln for ln in (cp.stderr + cp.stdout).splitlines() if ln.startswith("flow goodput"))
    assert "FAIL" in line and "198.19.100.77" in line
