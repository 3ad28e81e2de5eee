"""Reproducibility (the same seed gives the same frames) and the report document (no root)."""

from __future__ import annotations

import numpy as np
import pytest

from tgen_tui.methodology import registry
from tgen_tui.methodology.kit import setup
from tgen_tui.methodology.kit.params import Params
from tgen_tui.methodology.kit.search import RepeatedSearch, SearchResult
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.registry import render, tables
from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_profile
from tgen_tui.results.models import SearchOutcome, ThroughputReport, Trial, TrialRecord

SIG = 12  # the signature (magic, stream, sequence, timestamp) ends every frame
# Frames are compared without the signature and the UDP checksum: both carry the send
# timestamp. Everything the seed decides (addresses, ports, sizes, order) is compared.


def frames(profile: str, seed: int | None, n: int = 2000) -> list[bytes]:
    prof = setup.load(Params(profile=profile, seed=seed))
    prog = compile_profile(prof).streams[0]
    buf, lens = BatchBuilder(prog, max_batch=n).build(0, n)
    buf = np.array(buf)
    assert buf.ndim == 2  # one row per frame
    # the UDP checksum covers the signature's timestamp: compare everything else
    buf[:, prog.l4_csum_offset : prog.l4_csum_offset + 2] = 0
    return [bytes(buf[i, : int(ln) - SIG]) for i, ln in enumerate(np.asarray(lens)[:n])]


@pytest.mark.parametrize("profile", ["profiles/rfc4814-udp64.yaml", "profiles/nat44-stateful.yaml"])
def test_same_seed_same_frames_other_seed_other_frames(profile):
    a = frames(profile, 1234)
    b = frames(profile, 1234)
    c = frames(profile, 4321)
    assert len(a) == 2000 and all(len(x) > 40 for x in a)
    assert a == b
    assert sum(x != y for x, y in zip(a, c, strict=True)) > 1900  # the ports differ


def test_seed_option_is_recorded():
    prof = setup.load(Params(profile="profiles/lab.yaml", seed=77))
    assert prof.seed == 77
    assert setup.load(Params(profile="profiles/lab.yaml")).seed == 1


def test_max_rate_is_the_line_rate_in_whole_frames():
    # METHODOLOGY.md: 64 B at 10 Gbit/s is 14,880,952 fps, 1518 B 812,743 fps (profiles.units)
    p = Params(profile="profiles/lab.yaml")
    _, compiled = setup.make_runner(p, setup.load(p), None)
    assert setup.max_rate_for(p, compiled, 64) == 14_880_952
    assert setup.max_rate_for(p, compiled, 1518) == 812_743


def test_document_and_tables_from_a_session():
    p = Params(profile="profiles/lab.yaml", quick=True, repeats=2)
    ses = RunState(test="rfc2544-throughput", params=p)
    ses.profile_doc = {"name": "lab", "hash": "abc", "seed": 1}
    ses.dut_settings = {"source": "netns:x-dut", "conntrack_max": 262144}
    rec = RepeatedSearch("throughput", "fps")
    for lp in (49_000, 50_000):
        s = SearchResult(max_rate=100_000, error=1000, l_pps=lp, h_pps=lp + 900, status="ok")
        s.trials = [
            Trial(rate_pps=100_000, kind="upper_bound", tx_frames=10, rx_frames=5, lost=5),
            Trial(rate_pps=lp, kind="confirm", passed=True, tx_frames=10, rx_frames=10),
        ]
        s.confirmed = True
        rec.searches.append(s)
    ses.body["frame_sizes"] = [
        {"frame_size": 64, "max_rate": 100_000, "record": rec, "streams": ["up"]}
    ]
    report = registry.build_report(ses, partial=True, signal_name="SIGINT")
    assert isinstance(report, ThroughputReport)
    assert report.by_frame_size[0].searches[1].trials[1] is rec.searches[1].trials[1]
    doc = report.to_doc()
    assert doc["partial"] is True and doc["quick"] is True and doc["seed"] == 1
    assert [s["l_pps"] for s in doc["searches"]] == [49_000, 50_000]
    assert doc["summary"]["median"] == 49_500 and doc["summary"]["min"] == 49_000
    assert doc["searches"][0]["trials"][1]["kind"] == "confirm"
    assert doc["dut"]["conntrack_max"] == 262144
    assert doc["metrics"]["throughput_fps"] == 49_500
    flat = registry.flat_trials(ses)
    assert len(flat) == 6  # 4 trials (search 0, 1) + one outcome per search (repeat 0, 1)
    outcomes = [t for t in flat if isinstance(t, SearchOutcome)]
    assert [t.metrics["throughput_fps"] for t in outcomes] == [49_000, 50_000]
    assert [t.repeat for t in outcomes] == [0, 1]
    records = [t for t in flat if isinstance(t, TrialRecord)]
    assert [t.to_doc()["search"] for t in records] == [0, 0, 1, 1]
    assert all("streams" not in t.to_doc()["extra"] for t in records)
    ((title, header, cols, rows),) = tables(report)
    assert cols == [64] and rows[0][1] == [49_500]
    text = render(report)
    assert "[QUICK]" in text and "PARTIAL" in text and "| 49,500 |" in text
    assert "  64 B search 2: l 50,000  h 50,900  ok" in text


def test_methodology_never_imports_textual():
    import subprocess
    import sys

    code = (
        "import sys, tgen_tui.methodology.kit.setup, tgen_tui.methodology.kit.trial, "
        "tgen_tui.methodology.kit.output, tgen_tui.methodology.procedures.rfc9693.phase2, "
        "tgen_tui.methodology.registry, "
        "tgen_tui.commands.methodology_cmds; print('textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _throughput_state(p, l_pps: float):
    ses = RunState(test="rfc2544-throughput", params=p)
    ses.profile_doc = {"name": "lab", "hash": "abc", "seed": 1}
    rec = RepeatedSearch("throughput", "fps")
    s = SearchResult(max_rate=100_000, error=1000, l_pps=l_pps, h_pps=l_pps + 900, status="ok")
    s.trials = [Trial(rate_pps=l_pps, kind="confirm", passed=True, tx_frames=9, rx_frames=9)]
    rec.searches.append(s)
    ses.body["frame_sizes"] = [{"frame_size": 64, "max_rate": 1e5, "record": rec, "streams": []}]
    return ses


def test_scaleup_document_from_its_runs():
    import dataclasses

    p = Params(profile="profiles/lab.yaml", quick=True, repeats=1)
    ses = RunState(test="scaleup-rfc2544-throughput", params=p)
    ses.body |= {"counts": [1, 2], "avail": [0, 1], "runs": []}
    for k, rate in ((1, 40_000), (2, 60_000)):
        inner = _throughput_state(dataclasses.replace(p, cores=[0, 1][-k:]), rate)
        ses.body["runs"].append({"cores": k, "core_list": [0, 1][-k:], "state": inner})
    report = registry.build_report(ses, partial=True, signal_name="SIGINT")
    assert isinstance(report.runs[0].report, ThroughputReport)
    doc = report.to_doc()
    assert doc["test"] == "scaleup-rfc2544-throughput" and doc["unit"] == "fps"
    assert [r["median"] for r in doc["rows"]] == [40_000, 60_000]
    assert [r["relative_scaleup"] for r in doc["rows"]] == [1.0, 0.75]
    assert doc["metrics"] == {"rate_1c": 40_000, "rate_2c": 60_000}
    assert [r["report"]["partial"] for r in doc["runs"]] == [False, True]  # the last ran when
    assert doc["runs"][1]["report"]["parameters"]["cores"] == [0, 1]
    assert doc["warnings"] and doc["schema_version"] == 1
    ((title, header, cols, rows),) = tables(report)
    assert cols == [1, 2] and rows[0][0] == "throughput, median (fps)"
    assert rows[3] == ("relative scale-up", [1.0, 0.75])
    assert registry.flat_trials(ses) == []
