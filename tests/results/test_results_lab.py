"""Issue 10, Must show 1 and 2 in a real lab: three `tgen run` results of one profile under
builds b1, b2, b3, with 10 % random drop on the DUT before b3; `check` flags b3 and names
the metric and the size of the change, and passes b2 against b1. Assertions are on counts
and exit codes, never on timing or throughput."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tgen_tui.lab import topology
from tgen_tui.lab.naming import D0_MAC, P0_MAC
from tgen_tui.results import store

pytestmark = pytest.mark.root

TGEN = [sys.executable, "-m", "tgen_tui"]
# the counts' metrics only: spaced_pct is a timing figure (never pass/fail in a test)
COUNTS = ["--metric", "loss_pct", "--metric", "rx_pps", "--metric", "tx_pps"]


def _profile(prefix: str) -> str:
    """pacing: burst: every due frame goes out each turn, so a run's counts do not depend
    on how late the host's timers fired (these tests are about the store, not spacing)."""
    return f"""
name: rs-drop
seed: 7
ports:
  p0: {{interface: p0, netns: {prefix}-tester, pacing: burst}}
  p1: {{interface: p1, netns: {prefix}-tester}}
streams:
  - name: up
    port: p0
    rx_port: p1
    eth: {{src: "{P0_MAC}", dst: "{D0_MAC}"}}
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp: {{src_port: {{min: 10000, max: 10063, mode: inc}}, dst_port: 7}}
    size: 64
    rate: {{pps: 5000}}
dut: {{netns: {prefix}-dut}}
"""


def _tgen(*args: str, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TGEN, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"TGEN_DB": str(db)},
    )


def test_check_flags_the_build_with_extra_drop(nat_lab, tmp_path, db):
    prof = tmp_path / "drop.yaml"
    prof.write_text(_profile(nat_lab))
    for build in ("b1", "b2", "b3"):
        if build == "b3":
            topology.set_dut(nat_lab, drop_percent=10)
        cp = _tgen("run", str(prof), "--duration", "0.5", "--build", build, db=db)
        assert cp.returncode == 0, cp.stderr
        assert re.search(rf"stored as run \d+ in {re.escape(str(db))}", cp.stderr), cp.stderr
    conn = store.connect(db)
    runs = store.list_runs(conn, newest_first=False)
    assert [r["build"] for r in runs] == ["b1", "b2", "b3"]
    # no --dut: the lab DUT's kernel release names it
    assert {r["dut"] for r in runs} == {os.uname().release}
    assert {r["dut_source"] for r in runs} == {"lab"}
    m = [store.run_metrics(conn, r["id"]) for r in runs]
    assert all(x["tx_frames"] > 1000 for x in m)
    assert m[0]["lost"] == 0 and m[1]["lost"] == 0
    assert m[2]["lost"] > 0.05 * m[2]["tx_frames"]  # 10 % dropped, give or take chance

    cp = _tgen("results", "check", "--build", "b3", "--against", "b2", *COUNTS, db=db)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    lines = cp.stdout.splitlines()
    rx = next(x for x in lines if x.startswith("rx pps median fell "))
    loss = next(x for x in lines if x.startswith("loss median rose by "))
    fell = float(re.search(r"fell ([\d.]+) %", rx).group(1))
    rose = float(re.search(r"rose by ([\d.]+) points", loss).group(1))
    assert 5 < fell < 15 and 5 < rose < 15
    assert "since build b2" in rx and "since build b2" in loss

    cp = _tgen("results", "check", "--build", "b2", "--against", "b1", *COUNTS, db=db)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "no regression" in cp.stdout

    # Must show 2: a terminal plot over the three builds, and an image
    svg = tmp_path / "loss.svg"
    cp = _tgen("results", "trend", "loss_pct", "--output", str(svg), db=db)
    assert cp.returncode == 0, cp.stderr
    assert sum(x.count("●") for x in cp.stdout.splitlines() if not x.startswith("●")) == 3
    texts = [t.text for t in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}text")]
    assert {"b1", "b2", "b3"} <= set(texts) and texts.count("n=1") == 3  # one per build

    # a database that cannot be written costs one warning line, not the run's exit code
    cp = _tgen("run", str(prof), "--duration", "0.2", "--quiet", "--db", "/proc/1/no/r.db", db=db)
    assert cp.returncode == 0, cp.stderr
    warn = [x for x in cp.stderr.splitlines() if "not stored" in x]
    assert len(warn) == 1 and warn[0].startswith("tgen: warning: result not stored"), cp.stderr
    # --no-store leaves the database as it was
    cp = _tgen("run", str(prof), "--duration", "0.2", "--no-store", "--quiet", db=db)
    assert cp.returncode == 0 and "stored" not in cp.stderr
    assert len(store.list_runs(conn)) == 3
