"""Spacing in every run (root, a NAT lab): ``tgen run`` of lab.yaml puts each stream's
receive spacing into the JSON result and the NDJSON samples (no timing thresholds: the
share depends on the send path and the machine; BASELINES.md "Spacing at the wire")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]
KEYS = {"asked_gap_ns", "gaps", "mean_gap_ns", "mae_ns", "within_10pct", "p50_ns", "p99_ns"}
KEYS |= {"ks", "law"}


def test_run_result_and_ndjson_carry_spacing(nat_lab, tmp_path):
    text = (ROOT / "profiles/lab.yaml").read_text().replace("tgen-", f"{nat_lab}-")
    prof = tmp_path / "lab.yaml"
    prof.write_text(text.replace("duration: 10s", "duration: 2s"))
    out, nd = tmp_path / "r.json", tmp_path / "r.ndjson"
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "--json", str(out), "--ndjson", str(nd), "-q", "--no-store"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode in (0, 1), cp.stderr
    res = json.loads(out.read_text())
    for name in ("up", "down"):
        s = res["streams"][name]
        sp = s["spacing"]
        assert set(sp) == KEYS, sp
        assert sp["law"] == "constant" and sp["ks"] is None
        # every frame but the first (and one per lost or reordered frame) closes a gap
        assert 0 < sp["gaps"] < s["rx_frames"]
        assert sp["mean_gap_ns"] > 0 and sp["p50_ns"] <= sp["p99_ns"]
        if sp["asked_gap_ns"] is not None:  # the sender wrote its asked gap
            assert sp["asked_gap_ns"] == pytest.approx(1e9 / 20_000, rel=1e-3)
            assert 0.0 <= sp["within_10pct"] <= 1.0 and sp["mae_ns"] >= 0
    snaps = [json.loads(x) for x in nd.read_text().splitlines()]
    live = [x for x in snaps if "seq" in x and x["streams"]["up"]["spacing"]["gaps"] > 0]
    assert live and set(live[-1]["streams"]["up"]["spacing"]) == KEYS


@pytest.mark.parametrize(("loop", "streams"), [("compiled", 1), ("compiled", 2), ("python", 1)])
def test_timer_pacing_sends_every_frame_once(nat_lab, tmp_path, loop, streams):
    """pacing: timer (frames one by one, chunks built ahead, lone frames by send(2)), by
    the compiled loop (worker.cpace: one stream, and two merged by due time) and by the
    Python one: every sequence number exactly once, none lost, none twice (a chunk built
    ahead once overwrote the frames of the one being sent), every sampled frame stamped
    by the kernel."""
    import yaml

    from tgen_tui.worker import cpace

    env = dict(os.environ)
    if loop == "python":
        env["TGEN_NO_CPACE"] = "1"
    else:
        assert cpace.load() is not None, "the compiled pacer did not build (a C compiler?)"

    doc = yaml.safe_load((ROOT / "profiles/lab.yaml").read_text().replace("tgen-", f"{nat_lab}-"))
    doc["duration"] = "1s"
    doc["ports"]["p0"]["pacing"] = "timer"
    doc["streams"] = [s for s in doc["streams"] if s["name"] == "up"]
    doc["streams"][0].update(rate={"pps": 5000}, idt={"dist": "exponential"})
    if streams == 2:  # a second stream on p0, other flows, its own law and rate
        two = dict(doc["streams"][0], name="up2", rate={"pps": 3000}, idt={"dist": "uniform"})
        two["udp"] = dict(two["udp"], src_port={"min": 20000, "max": 20255, "mode": "inc"})
        doc["streams"].append(two)
    prof = tmp_path / "timer.yaml"
    prof.write_text(yaml.safe_dump(doc))
    out = tmp_path / "r.json"
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "--json", str(out), "-q", "--no-store"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    res = json.loads(out.read_text())
    assert res["workers"][0]["pacing"] == "timer"
    for name, least in (("up", 4000), ("up2", 2400))[:streams]:
        s = res["streams"][name]
        assert s["tx_frames"] == s["due_frames"] == s["rx_frames"] > least, name
        assert s["duplicates"] == 0 and s["out_of_order"] == 0 and s["lost"] == 0
        # the sampled frames sent alone still carry their stamp request and tag
        assert s["latency_source"] == "kernel" and s["latency_unstamped"] == 0


@pytest.mark.parametrize("pacing", ["qdisc", "timer", "burst"])
def test_a_run_sends_exactly_the_frames_due_in_its_duration(nat_lab, tmp_path, pacing):
    """tgen run --duration tells the workers the run's end: a TBF's lookahead (up to 40 ms
    of frames handed to the kernel ahead) and the compiled timer loop's long turns send
    no frame due after it, and the due count follows to the end (achieved = requested)."""
    import yaml

    doc = yaml.safe_load((ROOT / "profiles/lab.yaml").read_text().replace("tgen-", f"{nat_lab}-"))
    doc["ports"]["p0"]["pacing"] = pacing
    doc["streams"] = [s for s in doc["streams"] if s["name"] == "up"]
    doc["streams"][0]["rate"] = {"pps": 5000}
    prof = tmp_path / "exact.yaml"
    prof.write_text(yaml.safe_dump(doc))
    out = tmp_path / "r.json"
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "-d", "1", "--json", str(out), "-q", "--no-store"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    res = json.loads(out.read_text())
    s = res["streams"]["up"]
    assert res["workers"][0]["pacing"] == pacing
    assert s["tx_frames"] == s["due_frames"] == s["rx_frames"] == 5000  # due in [0, 1 s)
    assert res["ports"]["p0"]["achieved_pps"] == pytest.approx(5000.0)
