"""Nothing is lost: a writer SIGKILLed at random moments leaves a consistent database."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tgen_tui.results import store

REPO = Path(__file__).resolve().parents[2]

# A writer that records large runs (200 streams: ~2,000 metric rows, 50 trials) in a loop
# and prints 'w' before each write and the run id once its transaction has committed.
WRITER = r"""
import sys
from tests.results.rs_helpers import result
from tgen_tui.results.record import record_run
base = result()
s = base["streams"].pop("up")
base["streams"] = {f"s{i}": dict(s) for i in range(200)}
trials = [{"repeat": i, "rx_pps": 1000.0 + i, "raw": list(range(50))} for i in range(50)]
n = 0
while True:
    n += 1
    print("w", flush=True)
    rid = record_run(base, db=sys.argv[1], dut="crash", build=f"b{n}", trials=trials)
    print(rid, flush=True)
"""


def test_sigkill_while_writing_leaves_no_partial_record(db: Path):
    rng = random.Random(10)
    committed: list[int] = []
    during_write = 0  # kills that landed between a 'w' and its commit
    for _ in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db)],
            cwd=REPO,  # python -c puts the current folder first: tests.results.rs_helpers
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout.readline() == "w\n", proc.stderr.read()
            first = proc.stdout.readline()
            assert first.strip().isdigit(), proc.stderr.read()
            committed.append(int(first))
            time.sleep(rng.uniform(0.0, 0.08))
        finally:
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=10)
        lines = out.split()
        committed += [int(x) for x in lines if x.isdigit()]
        during_write += bool(lines) and lines[-1] == "w"
        assert proc.returncode == -signal.SIGKILL
    conn = store.connect(db)
    assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
    assert store.verify(conn) == []
    runs = store.list_runs(conn, newest_first=False)
    ids = [r["id"] for r in runs]
    # every run a writer reported as committed is there, complete
    assert set(committed) <= set(ids)
    assert len(ids) >= 20
    assert during_write >= 1, "no kill landed inside a write: the test proved nothing"
    print(f"{during_write} of 20 kills landed inside a write; {len(ids)} runs stored")
    for rid in ids:
        run = store.get_run(conn, rid)
        assert len(run["trials"]) == 50 == run["n_trials"]
        assert len(run["metrics"]) == run["n_metrics"] > 2_000
        assert len(json.loads(json.dumps(run["result"]))["streams"]) == 200


def test_ctrl_c_while_writing_rolls_back(db: Path):
    rng = random.Random(11)
    for _ in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db)],
            cwd=REPO,  # python -c puts the current folder first: tests.results.rs_helpers
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout.readline() == "w\n", proc.stderr.read()
            time.sleep(rng.uniform(0.0, 0.05))
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=10)
        assert "KeyboardInterrupt" in err  # the writer died of Ctrl-C, not of something else
    conn = store.connect(db)
    assert store.verify(conn) == []
    assert all(r["n_trials"] == 50 for r in store.list_runs(conn))
