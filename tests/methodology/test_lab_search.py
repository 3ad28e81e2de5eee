"""tgen search on a lab DUT (root, real kernel data path): one small search, asserting
the report's structure and the irregular NDR, never a rate or a timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .lab_profiles import forward_profile
from .test_lab_methodology import tgen

pytestmark = pytest.mark.root


@pytest.fixture
def lossy_lab(make_lab):
    """A NAT lab whose DUT forwards at most 5,000 frames/s and drops 1 % at random."""
    with make_lab("nat", "s", rate_limit_pps=5000, drop_percent=1.0) as prefix:
        yield prefix


def test_search_reports_ndr_no_load_passed_and_every_trial(lossy_lab, tmp_path: Path):
    prof = tmp_path / "p.yaml"
    prof.write_text(forward_profile(lossy_lab))
    out = tmp_path / "s.json"
    cp = tgen(
        "search", str(prof), "--goal", "ndr=0,trial=500ms,sum=1s",
        "--goal", "pdr=3%,trial=500ms,sum=1s", "--width", "30%",
        "--max-rate", "8000", "--min-load", "4000", "--warmup", "0", "--no-ladder",
        "--timeout", "200ms", "--settle", "100ms", "--json", str(out), "--quiet",
        "--plots", str(tmp_path / "plots"), "--no-store",
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    assert doc["test"] == "search" and doc["status"] == "done" and not doc["partial"]
    ndr, pdr = doc["goals"]
    assert ndr["name"] == "ndr" and ndr["regular"] is False
    assert ndr["irregular"] == "no load passed" and ndr["relevant_lower_bound_pps"] is None
    assert ndr["relevant_upper_bound_pps"] == 4000  # min load: 2,000 frames, ~20 lost
    assert pdr["goal"]["loss_ratio"] == 0.03 and pdr["goal"]["duration_sum_s"] == 1.0
    assert len(doc["trials"]) == doc["n_trials"] > 0
    for t in doc["trials"]:
        (d,) = t["directions"].values()
        assert d["intended_frames"] == round(t["rate_pps"] * t["duration_s"])
        assert d["offered_frames"] == t["tx_frames"] and d["received_frames"] == t["rx_frames"]
        assert t["rx_frames"] + t["lost"] == t["tx_frames"]
        assert 0 <= t["loss_ratio"] <= 1
    assert doc["aggregate_factor"] == 1 and doc["dut_drops"] == {}
    assert any("0.5 s trials, 1 s sum" in x for x in doc["deviations"])
    assert (tmp_path / "plots" / "loss_ratio_vs_load.svg").stat().st_size > 1000
