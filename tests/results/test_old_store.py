"""A results DB written by main 468ed7a (before typed results) loads, lists, shows,
compares and checks with the numbers it was stored with (issue 18, Must show 6).

tests/results/data/README.md says how the DB was made. It is copied first: opening it
may migrate it, and the fixture must stay as the old code wrote it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tgen_tui.results import analysis as A
from tgen_tui.results import store

FIXTURE = Path(__file__).parent / "data" / "store-468ed7a.sqlite"
TESTS = [
    "run", "run", "rfc2544-throughput", "rfc2544-loss", "rfc2544-latency", "rfc2544-pdv",
    "rfc9693-cps", "rfc9693-capacity", "rfc9693-teardown", "scaleup-rfc2544-throughput",
]  # fmt: skip


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURE, path)
    return path


def tgen(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tgen_tui", "results", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_old_runs_load_with_their_numbers(old_db: Path):
    conn = store.connect(old_db, create=False)
    runs = store.list_runs(conn, newest_first=False)
    assert [r["test"] for r in runs] == TESTS
    assert store.verify(conn) == []
    m = {r["id"]: store.run_metrics(conn, r["id"]) for r in runs}
    assert m[1]["rx_pps"] == pytest.approx(34610.33, abs=0.01)
    assert m[2]["p99_ns"] == 155648.0
    assert m[3]["throughput_fps"] == 5000.0
    assert (m[5]["tl_ns"], m[5]["wcl_ns"]) == (19456.0, 63488.0)
    assert m[6]["pdv_ns"] == 49522.0
    assert (m[7]["cps"], m[8]["capacity"]) == (100000.0, 5000.0)
    assert m[9]["teardown_per_s"] == pytest.approx(1098838.35, abs=0.01)
    assert (m[10]["rate_1c"], m[10]["rate_2c"]) == (4375.0, 5000.0)
    for r in runs:  # every stored document and trial reads back
        run = store.get_run(conn, r["id"])
        assert run["result"]["profile_hash"] and len(run["trials"]) == r["n_trials"]
    tp = store.get_run(conn, 3)
    assert tp["result"]["summary"]["median"] == 5000
    assert [s["l_pps"] for s in tp["result"]["searches"]] == [5000, 5000, 5000]
    assert store.get_run(conn, 1)["result"]["streams"]["up"]["latency_ns"]["p99"] == 69632.0
    loss = store.get_run(conn, 4)["result"]["frame_loss"][0]["points"]
    assert [p["load_pct"] for p in loss][:2] == [100.0, 90.0]
    assert store.get_run(conn, 8)["result"]["capacity"]["h_connections"] == 6000
    # the repeats of the throughput search give its spread
    assert A.run_samples(conn, 3)["throughput_fps"] == [5000.0, 5000.0, 5000.0]
    conn.close()


def test_old_runs_list_show_compare_check(old_db: Path):
    cp = tgen(old_db, "list")
    assert cp.returncode == 0, cp.stderr
    assert len([x for x in cp.stdout.splitlines()[1:] if x.strip()]) == 10
    assert "34.6 kpps" in cp.stdout and "155.6 µs" in cp.stdout
    cp = tgen(old_db, "show", "3")
    assert cp.returncode == 0, cp.stderr
    assert "throughput_fps" in cp.stdout and "24 trials stored" in cp.stdout
    cp = tgen(old_db, "show", "1", "--json")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["result"]["streams"]["up"]["tx_frames"] == 39617
    cp = tgen(old_db, "compare", "1", "2")
    assert cp.returncode == 0, cp.stderr
    assert "69.6 µs" in cp.stdout and "155.6 µs" in cp.stdout and "+123.5 %" in cp.stdout
    cp = tgen(old_db, "compare", "3", "3", "--json")
    assert cp.returncode == 0, cp.stderr
    fps = {x["metric"]: x for x in json.loads(cp.stdout)["metrics"]}["throughput_fps"]
    assert (fps["a_median"], fps["a_n"], fps["a_spread"]) == (5000.0, 3, 0.0)
    for a, b in (("5", "6"), ("9", "9")):  # runs whose trials carry repeats: no version row
        cp = tgen(old_db, "compare", a, b, "--json")
        assert cp.returncode == 0, cp.stderr
        metrics = {x["metric"] for x in json.loads(cp.stdout)["metrics"]}
        assert metrics and "schema_version" not in metrics, metrics
    cp = tgen(old_db, "check", "--build", "b2", "--against", "b1")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "no regression" in cp.stdout
