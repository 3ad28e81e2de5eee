"""The short CI version of issue 36's soak with faults (benchmarks/soak_faults.py, the
30-minute one): the same script, on a lab of the fixtures (with transport hosts), for
16 s at the profile's own 2 x 20 kpps, with all five faults at their shares of the run:
the DUT's ruleset reloaded with 5,000 extra rules, conntrack flushed, d1 flapped, the
results store's folder filled, p1's frame worker killed with SIGKILL. One run (about
30 s with the lab), judged here on events and counts only, never on timing:

- each fault is named in the run's NDJSON, in the order they were scheduled: a notice as
  each DUT command began and one as it ended ok, p1's carrier lost and back, the
  engine's ``worker_failed`` (SIGKILL) and p1 ``failed``; the run exits 3 (a port failed);
- counts exact: p0 (it survived) sent less unsent == its interface's tx; in every
  snapshot no stream's received count is over its rx_port's interface's;
- the others kept running: p0 sent and the TCP flow delivered after the kill; p0 ends
  ``stopped``, not failed;
- the store write failed with one warning line, the store is intact (integrity_check ok,
  no run in it), and the run's JSON was written; the reload loaded its 5,000 rules, and
  the reply stream learned all 256 tuples before the flush.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .test_link_flap import _links_up

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "soak_faults.py"
ORDER = ["nft_reload", "conntrack_flush", "link_flap", "store_full", "worker_kill"]


@pytest.fixture(scope="module")
def soak(make_lab, tmp_path_factory):
    """(the script's document, the run's result, its NDJSON lines, its stderr)."""
    tmp = tmp_path_factory.mktemp("soak")
    with make_lab("nat", "z", transport_hosts=True) as prefix:
        _links_up(prefix)
        argv = [sys.executable, str(SCRIPT), "--lab", prefix, "--duration", "16s"]
        argv += ["--pps", "20000", "--keep", str(tmp / "run"), "--out", str(tmp / "soak.json")]
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
        # 1: a promise not kept (this test says which); anything else: the script failed
        assert cp.returncode in (0, 1) and (tmp / "soak.json").exists(), cp.stdout + cp.stderr
        doc = json.loads((tmp / "soak.json").read_text())
        run = tmp / "run"
        res = json.loads((run / "result.json").read_text())
        lines = [json.loads(x) for x in (run / "run.ndjson").read_text().splitlines()]
        yield doc, res, lines, (run / "stderr.txt").read_text()


def test_each_fault_is_named_in_the_log_in_order(soak):
    doc, _, lines, stderr = soak
    faults = doc["checks"]["faults"]
    assert sorted(faults) == sorted(ORDER)
    for name in ORDER:
        assert faults[name]["named"], (name, faults[name])
    for name in ORDER[:4]:
        assert faults[name]["ok"], (name, faults[name])  # its command ended ok
    # the order the NDJSON names them in is the schedule's
    messages = [d.get("message", "") for d in lines if d.get("event") == "notice"]
    began = [m for m in messages if m.startswith("DUT event at")]
    assert [m.split(": ", 1)[1] for m in began] == [
        faults["nft_reload"]["commands"][0],
        "conntrack -F",
        "ip link set d1 down",
        "ip link set d1 up",
        faults["store_full"]["commands"][0],
    ]
    kinds = [
        "fill"
        if "DUT event at" in d.get("message", "") and "dd if=" in d["message"]
        else d["event"]
        for d in lines
        if d.get("event") in ("notice", "worker_failed")
    ]
    assert kinds.index("fill") < kinds.index("worker_failed")
    (failed,) = [d for d in lines if d.get("event") == "worker_failed"]
    assert failed["ports"] == ["p1"] and "SIGKILL" in failed["reason"]
    assert doc["checks"]["failed_ports"] == ["p1"]
    assert doc["checks"]["tgen_exit"] == 3 and "port(s) p1 failed" in stderr
    assert [(a, b) for a, b, _ in faults["link_flap"]["link_events"]] == [
        ("up", "no carrier"),
        ("no carrier", "up"),
    ]


def test_counts_are_exact(soak):
    _, res, lines, _ = soak
    snaps = [d for d in lines if "streams" in d]
    assert len(snaps) > 100
    for snap in snaps:
        for s in snap["streams"].values():
            assert s["rx_frames"] <= snap["ports"][s["rx_port"]]["if_rx_frames"], snap["seq"]
    p0 = res["ports"]["p0"]
    sent = sum(s["tx_frames"] for s in res["streams"].values() if s["port"] == "p0")
    assert sent > 0 and sent - p0["tx_unsent"] == p0["if_tx_frames"]
    for name, s in res["streams"].items():
        assert s["lost"] == s["tx_frames"] - s["rx_frames"], name
    # up's frames that reached p1 after its worker died are the tester's, not unexplained
    up = res["streams"]["up"]
    causes = {(c["cause"], c["where"]): c["frames"] for c in up["loss_causes"]}
    assert causes.get(("tester_rx_failed", "tester p1"), 0) > 0, up["loss_causes"]
    assert up["loss_unexplained"] <= up["lost"] // 100, up
    # the reply stream learned up's 256 tuples; after the flush the NAT may map some anew
    learned = soak[0]["checks"]["learned"]
    assert learned["before_flush"] == 256 and learned["end"] >= 256, learned


def test_the_other_ports_keep_running_after_the_kill(soak):
    doc, _, lines, _ = soak
    kept = doc["checks"]["kept_running"]
    assert kept["measured"] and kept["p0_tx_after_kill"] > 0, kept
    assert kept["tcp_rx_bytes_after_kill"] > 0, kept
    assert kept["p0_state_at_end"] == "stopped"
    p1 = [d["new"] for d in lines if d.get("event") == "port_state" and d["port"] == "p1"]
    assert p1[-1] == "failed"


def test_the_full_store_costs_one_warning_and_the_json_is_written(soak):
    doc, res, _, stderr = soak
    (warn,) = doc["checks"]["store_warnings"]
    assert warn.startswith("tgen: warning: result not stored") and "no space left" in warn, warn
    assert [ln for ln in stderr.splitlines() if "Traceback" in ln] == []
    store = doc["checks"]["store"]
    assert store["integrity_check"] == ["ok"] and store["runs"] == 0
    assert store["fill_bytes"] > 0 and store["free_bytes_at_end"] == 0
    assert doc["passed"]["json_written"] and res["streams"]["up"]["tx_frames"] > 0
    assert doc["checks"]["reload_extra_rules_loaded"] == 5000
