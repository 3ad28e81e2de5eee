"""``tgen rfc9411 cps`` and ``tgen rfc9411 concurrent`` on a real lab (issue 35 Must show
3, and the concurrent-capacity search): the DUT's nft rule sets the limit (``ct state new
limit rate over N/second``, ``ct count over N``), the verb searches it as a user runs
it, and its JSON report says what it found and what failed a trial. Root only.

Short searches (1-2 s trials, a narrow load range, a 4 % width). The rate rule's burst
(a tenth of its rate) lets a 1 s trial through at up to 1.1 x its rate, so the CPS test
bounds the found limit by that; the issue's 5 % is measured with longer trials by
benchmarks/cps_search.py. Asserts the bounds and the counts, never times or rates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tgen_tui.lab import topology as lab

pytestmark = pytest.mark.root
PROFILES = Path(__file__).resolve().parents[2] / "profiles"


@pytest.fixture(scope="module")
def search_lab(make_lab):
    with make_lab("nat", "s", transport_hosts=True, rps_cpus=None) as prefix:
        yield prefix


def _example(name: str, prefix: str, tmp: Path, **subs: str) -> Path:
    text = (PROFILES / name).read_text().replace("tgen-", f"{prefix}-")
    for old, new in subs.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp / name
    path.write_text(text)
    return path


def _search(test: str, prof: Path, tmp: Path, *opts: str) -> dict:
    out = tmp / f"{test}.json"
    r = subprocess.run(
        [sys.executable, "-m", "tgen_tui", "rfc9411", test, str(prof), "--json", str(out),
         "--settle", "200ms", "--width", "4%", "--no-plot", *opts],
        capture_output=True, text=True, timeout=300, env=dict(os.environ),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "failed trial: a trial is high-loss" in r.stdout
    return json.loads(out.read_text())


def _bounds(doc: dict) -> tuple[float, float, dict]:
    (g,) = doc["goals"]
    assert g["regular"], g
    return g["relevant_lower_bound_pps"], g["relevant_upper_bound_pps"], g


def test_the_cps_search_finds_the_new_connection_rate_an_nft_rule_sets(search_lab, tmp_path):
    limit = 400
    prof = _example("http-cps.yaml", search_lab, tmp_path, **{"timeout: 3s": "timeout: 900ms"})
    lab.set_dut(search_lab, ct_new_rate=limit)
    try:
        doc = _search("cps", prof, tmp_path, "--trial", "1s", "--min-load", "250",
                      "--max-load", "700", "--goal", "failed=0.5%")  # fmt: skip
    finally:
        lab.set_dut(search_lab, ct_new_rate=None)
    rlb, rub, _ = _bounds(doc)
    assert doc["test"] == "rfc9411-cps" and doc["search_kind"] == "cps"
    assert "refused, reset, timed out" in doc["failed_trial"]
    # the rule admits its rate and a burst of a tenth of it (40 connections): a 1 s trial
    # passes up to limit + 40 conn/s; 5 % of the limit itself needs longer trials (the
    # benchmark's), here: within 5 % of what a 1 s trial lets through
    assert 0.95 * limit <= rlb <= 1.05 * (limit + limit / 10) and rub > rlb, doc
    for t in doc["trials"]:
        d = t["directions"]["forward"]
        assert (
            d["offered_frames"] == t["tx_frames"] and t["rx_frames"] == t["tx_frames"] - t["lost"]
        )
        assert t["extra"]["established"] == t["rx_frames"]  # every connection that did not fail
    high = [t for t in doc["trials"] if t["rate_pps"] > 1.2 * limit]
    assert high and all(t["lost"] > 0 for t in high)  # above the rule: SYNs dropped, failed


def test_the_concurrent_search_finds_the_ct_count_limit(search_lab, tmp_path):
    limit = 600
    prof = _example("http-hold.yaml", search_lab, tmp_path)
    lab.set_dut(search_lab, ct_limit=limit)
    try:
        doc = _search("concurrent", prof, tmp_path, "--trial", "2s", "--min-load", "300",
                      "--max-load", "1000")  # fmt: skip
    finally:
        lab.set_dut(search_lab, ct_limit=None)
    rlb, rub, _ = _bounds(doc)
    assert doc["test"] == "rfc9411-concurrent" and "C - established" in doc["failed_trial"]
    assert rlb <= limit < rub and rlb >= 0.95 * limit, doc
    for t in doc["trials"]:
        target = round(t["rate_pps"])
        assert t["tx_frames"] == target
        if target <= limit:  # held in full
            assert t["lost"] == 0 and t["extra"]["established"] >= target, t
        else:  # the DUT admits `limit` entries: the rest time out
            assert t["extra"]["established"] <= limit and t["lost"] >= target - limit, t
