"""A campaign on the real lab (root): the lab's knob per point, each point stored when it
ends, a SIGKILL in the middle and --resume running only what is missing (the table then
has every point, as one run without the kill would), and a bundle that reruns a point
from its own files in another folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

TGEN = [sys.executable, "-m", "tgen_tui"]
ROOT = Path(__file__).resolve().parents[2]


def _files(prefix: str, tmp: Path) -> Path:
    prof = (ROOT / "profiles" / "lab.yaml").read_text().replace("tgen-tester", f"{prefix}-tester")
    prof = prof.replace("tgen-dut", f"{prefix}-dut").replace("pps: 20000", "pps: 5000")
    (tmp / "lab.yaml").write_text(prof)
    c = tmp / "c.yaml"
    c.write_text(
        "name: rules\nprofile: lab.yaml\nduration: 600ms\nrepeats: 2\norder: random\nseed: 5\n"
        "axes:\n  lab.filter_rules: [0, 2000]\n  frame_size: [64]\nbuild: b7\ndut: labdut\n"
    )
    return c


def _point_lines(state: Path) -> list[dict]:
    if not state.exists():
        return []
    return [json.loads(x) for x in state.read_text().splitlines()[1:] if x.strip()]


def _filter_rules(prefix: str) -> int:
    cp = subprocess.run(TGEN + ["lab", "status", "--prefix", prefix, "--json"], capture_output=True,
                        text=True, check=True)  # fmt: skip
    return json.loads(cp.stdout)["config"]["filter_rules"]


@pytest.fixture(scope="module")
def lab(make_lab):
    with make_lab("nat", "k") as prefix:
        yield prefix


def test_killed_campaign_resumes_the_missing_points_and_the_bundle_reruns_one(lab, tmp_path):
    c = _files(lab, tmp_path)
    db = tmp_path / "r.db"
    out = tmp_path / "c.campaign"
    state = out / "state.jsonl"
    proc = subprocess.Popen(TGEN + ["campaign", str(c), "--db", str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while len(_point_lines(state)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(_point_lines(state)) == 2, proc.stderr.read().decode() if proc.poll() else ""
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", f"tgen_tui.worker.*{os.getpid()}"], capture_output=True)
    assert left.returncode == 1  # no worker survived its killed campaign
    done = {r["id"] for r in _point_lines(state)}
    cp = subprocess.run(TGEN + ["campaign", str(c), "--db", str(db), "--resume"], capture_output=True,
                        text=True, timeout=120)  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    assert "2 of 4 points done already; running the 2 missing" in cp.stderr
    recs = _point_lines(state)
    assert len(recs) == 4 and {r["id"] for r in recs} >= done and len({r["id"] for r in recs}) == 4
    assert all(r["status"] == "ok" and r["metrics"]["rx_fps"] > 0 for r in recs)
    assert _filter_rules(lab) == 0  # the lab's setting put back
    # the table: both rows, each with its 2 repeats; more rules never forwarded more
    rep = subprocess.run(TGEN + ["campaign", "report", str(c), "--json", str(tmp_path / "t.json"),
                                 "--bundle", str(tmp_path / "b.tar.gz")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [(r["lab.filter_rules"], r["n"]) for r in rows] == [(0, 2), (2000, 2)]
    # every point in the results store, under the campaign's build
    ls = subprocess.run(TGEN + ["results", "list", "--db", str(db), "--build", "b7", "--json"],
                        capture_output=True, text=True)  # fmt: skip
    assert ls.returncode == 0, ls.stderr
    assert len([json.loads(x) for x in ls.stdout.splitlines() if x.strip()]) == 4
    # the bundle, unpacked elsewhere, reruns one point from its own files
    other = tmp_path / "elsewhere"
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        names = tar.getnames()
        tar.extractall(other, filter="data")
    assert {"rules/campaign.yaml", "rules/profile/lab.yaml", "rules/state.jsonl",
            "rules/environment.json", "rules/lab.json", "rules/report/table.md"} <= set(names)  # fmt: skip
    one = recs[0]["id"]
    cp = subprocess.run(TGEN + ["campaign", str(other / "rules" / "campaign.yaml"), "--only", one,
                                "--out", str(other / "re"), "--db", str(db), "--quiet"],
                        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    (again,) = _point_lines(other / "re" / "state.jsonl")
    assert again["id"] == one and again["axes"] == recs[0]["axes"] and again["status"] == "ok"
