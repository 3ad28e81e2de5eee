"""Campaign files without a lab: positioned errors, the points (product, repeats, a
seeded random order, ids that do not depend on it), --dry-run, the report's table from a
state file, and the refusal to run over a finished folder without --resume/--fresh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tgen_tui.campaign.points import expand
from tgen_tui.campaign.report import csv_text, rows, text_table
from tgen_tui.campaign.runner import State
from tgen_tui.profiles.campaign import Campaign

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]


def tgen(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(TGEN + list(args), capture_output=True, text=True, timeout=60, cwd=cwd)


def _write(tmp: Path, body: str) -> Path:
    p = tmp / "c.yaml"
    p.write_text(f"name: t\nprofile: {ROOT}/profiles/lab.yaml\n" + body)
    return p


@pytest.mark.parametrize(
    "body, line, words",
    [
        ("axes:\n  frame_size: [64, 64]\n", 4, "listed twice"),
        ("axes:\n  warp: [1]\n", 4, "unknown axis 'warp'"),
        ("axes:\n  lab.nosuch: [1]\n", 4, "unknown axis 'lab.nosuch'"),
        ("repeats: 0\n", 3, "repeats"),
        ("procedure: rfc2544.throughput\noptions: {drain: 1s}\n", 1, "drain"),
        ("axes:\n  dut.rules: [1, 2]\n", 1, "dut_commands"),
        ("axes:\n  frame_size: []\n", 4, "at least one value"),
        ("duration: -1s\n", 3, "duration"),
    ],
)
def test_bad_campaign_is_one_positioned_line(tmp_path, body, line, words):
    cp = tgen("campaign", str(_write(tmp_path, body)), "--dry-run")
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in cp.stderr, cp.stderr
    assert lines[0].startswith(f"{tmp_path / 'c.yaml'}:{line}:"), lines[0]


def test_too_many_points_are_refused(tmp_path):
    body = "repeats: 1000\naxes:\n  frame_size: [64, 128, 256, 512, 1024, 1280, 1518, 100, 200, 300, 400]\n"
    cp = tgen("campaign", str(_write(tmp_path, body)), "--dry-run")
    assert cp.returncode == 2 and "11,000 points" in cp.stderr, cp.stderr


def test_points_are_the_product_repeated_and_ids_ignore_the_order():
    c = Campaign(name="x", profile="p.yaml", repeats=3,
                 axes={"frame_size": [64, 512], "lab.filter_rules": [0, 1000, 5000]})  # fmt: skip
    pts = expand(c)
    assert len(pts) == 18 and len({p.id for p in pts}) == 18
    assert [p.values for p in pts[:4]] == [
        {"frame_size": 64, "lab.filter_rules": 0}] * 3 + [{"frame_size": 64, "lab.filter_rules": 1000}]  # fmt: skip
    r = c.model_copy(update={"order": "random"})
    a, b, other = expand(r, 7), expand(r, 7), expand(r, 8)
    assert [p.id for p in a] == [p.id for p in b] != [p.id for p in other]
    assert sorted(p.id for p in a) == sorted(p.id for p in pts)


def test_dry_run_lists_every_point_and_writes_nothing(tmp_path):
    p = _write(tmp_path, "repeats: 2\norder: random\nseed: 3\naxes:\n  frame_size: [64, 128]\n")
    cp = tgen("campaign", str(p), "--dry-run")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.strip().splitlines()
    assert len(lines) == 5 and lines[-1].startswith("4 points")
    assert not (tmp_path / "c.campaign").exists()


def _state(tmp: Path, c: Campaign) -> State:
    st = State(tmp / "state.jsonl")
    st.write_header({"kind": "header", "campaign": c.name})
    for i, p in enumerate(expand(c)):
        rx = (
            1000.0 * (1 + p.values["frame_size"] / 64)
            - 100 * p.values["lab.filter_rules"] / 1000
            + p.repeat
        )
        st.append({"kind": "point", "id": p.id, "key": p.key, "axes": p.values,
                   "repeat": p.repeat, "status": "failed" if i == 0 else "ok",
                   "metrics": {} if i == 0 else {"rx_fps": rx}})  # fmt: skip
    return State.read(tmp / "state.jsonl")


def test_report_rows_have_median_min_max_over_the_repeats(tmp_path):
    c = Campaign(name="x", profile="p.yaml", repeats=3,
                 axes={"frame_size": [64, 512], "lab.filter_rules": [0, 1000, 5000]})  # fmt: skip
    names, table = rows(c, _state(tmp_path, c))
    assert names == ["frame_size", "lab.filter_rules"] and len(table) == 6
    first, last = table[0], table[-1]
    assert (first["n"], first["failed"]) == (2, 1)  # point 1 failed
    assert first["metrics"]["rx_fps"] == {"median": 2002.5, "min": 2002.0, "max": 2003.0}
    assert (last["frame_size"], last["lab.filter_rules"], last["n"]) == (512, 5000, 3)
    assert last["metrics"]["rx_fps"]["median"] == 9000 - 500 + 2
    txt = text_table(names, table)
    assert "2,002 [2,002, 2,003]" in txt  # median 2,002.5 shown to the unit, min, max
    assert "(1 failed)" in txt
    assert (
        csv_text(names, table)
        .splitlines()[0]
        .startswith("frame_size,lab.filter_rules,n,failed,rx_fps_median")
    )


def test_a_finished_folder_needs_resume_or_fresh(tmp_path):
    p = _write(tmp_path, "axes:\n  frame_size: [64, 128]\n")
    c = Campaign.model_validate({"name": "t", "profile": "x", "axes": {"frame_size": [64, 128]}})
    out = tmp_path / "c.campaign"
    st = State(out / "state.jsonl")
    st.write_header({"kind": "header", "campaign": "t", "hash": "x"})
    pt = expand(c)[0]
    st.append({"kind": "point", "id": pt.id, "key": pt.key, "axes": pt.values, "repeat": 1,
               "status": "ok", "metrics": {"rx_fps": 1.0}})  # fmt: skip
    cp = tgen("campaign", str(p))
    assert cp.returncode == 2 and "1 of 2 points are done: --resume" in cp.stderr, cp.stderr
    cp = tgen("campaign", str(p), "--resume", "--dry-run")
    assert cp.returncode == 2 and "changed since the campaign" in cp.stderr, cp.stderr
    rep = tgen("campaign", "report", str(p), "--json", str(tmp_path / "r.json"))
    assert rep.returncode == 0, rep.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["points"] == {"total": 2, "done": 1, "failed": 0} and len(doc["rows"]) == 2


def test_lab_axes_are_settings_the_lab_can_set():
    """profiles/campaign.py lists the lab's fields (profiles sits below lab): they must
    stay the ones ``tgen lab set`` takes."""
    from tgen_tui.lab.config import SETTABLE_FIELDS
    from tgen_tui.profiles.campaign import LAB_AXES

    assert set(LAB_AXES) <= set(SETTABLE_FIELDS)
