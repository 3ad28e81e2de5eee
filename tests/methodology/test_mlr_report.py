"""tgen search's report on a simulated DUT: the typed document (goals[], every trial with
intended/offered/received per direction), its tables and plot, and the results store:
tgen results check compares NDR and PDR across builds. No root, simulated time."""

from __future__ import annotations

import trio

from tgen_tui.cli import main as tgen_main
from tgen_tui.methodology import registry
from tgen_tui.methodology.kit.params import Params
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.mlr.goals import goals_for
from tgen_tui.methodology.procedures.mlr.run import SearchConfig
from tgen_tui.methodology.procedures.mlr.search import MlrResult, mlr_search
from tgen_tui.methodology.procedures.mlr.sim import CurveDut
from tgen_tui.methodology.registry import build_document, build_report, flat_trials
from tgen_tui.results.models import SearchReport
from tgen_tui.results.record import record_run


def _state(capacity: float) -> RunState:
    goals = goals_for("csit", [], None)
    state = RunState(test="search", params=Params(profile="profiles/lab.yaml", quick=True))
    res = MlrResult(goals, 9001.0, 100_000.0)
    state.body |= {"config": SearchConfig(goals=goals, preset="csit"), "mlr": res}
    trio.run(lambda: mlr_search(CurveDut(capacity), goals, min_load=9001.0,
                                max_load=100_000.0, result=res))  # fmt: skip
    return state


def test_report_goals_trials_and_store_check(tmp_path, capsys):
    state = _state(40_000.0)
    report = build_report(state, partial=False)
    assert isinstance(report, SearchReport) and report.ladder == []
    assert [t.index for t in report.trials] == list(range(report.n_trials))
    doc = report.to_doc()
    assert doc["test"] == "search" and not any("does not fit" in w for w in doc["warnings"])
    names = [g["name"] for g in doc["goals"]]
    assert names == ["ndr", "pdr"]
    for g in doc["goals"]:
        assert {"relevant_lower_bound_pps", "relevant_upper_bound_pps",
                "conditional_throughput_pps", "regular"} <= set(g)  # fmt: skip
        assert g["regular"] is True
    assert len(doc["trials"]) == doc["n_trials"] == len(flat_trials(state))
    d = doc["trials"][0]["directions"]["forward"]
    assert d["intended_frames"] == d["offered_frames"] == doc["trials"][0]["tx_frames"]
    assert doc["dut_drops"] == {} and doc["metrics"]["pdr_pps"] > 0
    text = registry.render(report)
    assert "RFC 9971 search goals" in text and "| goal | ndr | pdr |" in text
    assert "| loss % | 0 | 0.5 |" in text and "| result | regular | regular |" in text
    plot_text, files = registry.plots(report, str(tmp_path / "plots"))
    assert files and "loss ratio" in plot_text
    db = str(tmp_path / "r.db")
    assert record_run(doc, db=db, dut="sim", build="b1", test="search", trials=flat_trials(state))
    worse = build_document(_state(30_000.0), partial=False)
    assert record_run(worse, db=db, dut="sim", build="b2", test="search")
    rc = tgen_main(["results", "check", "--db", db, "--against", "last"])
    out = capsys.readouterr()
    assert rc == 1
    assert "ndr" in out.out + out.err and "pdr" in out.out + out.err


def test_max_load_from_the_calibration_cache_else_line_rate(monkeypatch, tmp_path):
    """Max Load: --max-rate, else tgen calibrate's best rate for the port's path (cached
    for this host and driver), else the port's line rate at the frame size."""
    from tgen_tui.calibrate import cache, iface
    from tgen_tui.methodology.kit.setup import load, make_runner
    from tgen_tui.methodology.procedures.mlr.run import max_load_for

    monkeypatch.setenv("TGEN_CACHE_DIR", str(tmp_path / "cache"))
    p = Params(profile="profiles/lab.yaml")
    _, compiled = make_runner(p, load(p), 64)
    assert max_load_for(p, compiled, 64) == (14_880_952.0, "the port's line rate")
    monkeypatch.setattr(iface, "driver", lambda interface, netns=None: "veth")
    rows = [
        {"tx_path": "sendmmsg", "max_batch": 64, "kpps": 850.0},
        {"tx_path": "sendmmsg", "max_batch": 256, "kpps": 910.5},
        {"tx_path": "af_xdp", "max_batch": 64, "kpps": 2000.0},
    ]
    entry = {"choice": {"tx_path": "sendmmsg", "max_batch": 256}, "table": rows,
             "host": cache.host_facts()}  # fmt: skip
    cache.store(entry, cache.keys("veth", "p0", "tgen-tester"))
    rate, source = max_load_for(p, compiled, 64)
    assert rate == 910_500.0 and source.startswith("tgen calibrate (sendmmsg")
    p.max_rate = 50_000.0
    assert max_load_for(p, compiled, 64) == (50_000.0, "--max-rate")


def test_bad_search_input_is_one_line_exit_2(capsys):
    for args, words in (
        (["--goal", "pdr=x"], "--goal 'pdr=x'"),
        (["--goal", "pdr=1%,trial=10s,sum=5s"], "duration sum"),
        (["--preset", "csit", "--width", "200%"], "width"),
        (["--duration", "5s"], "--duration: not used"),
        (["--error", "500"], "--error (the goals' --width"),
        (["--loss-tolerance", "0.1%"], "--loss-tolerance"),
        (["--step", "5"], "--step: not used"),
        (["--frame-sizes", "64,128"], "one frame size per run"),
        (["--max-rate", "5000", "--min-load", "6000"], "--min-load"),
    ):
        assert tgen_main(["search", "profiles/lab.yaml", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err
