"""The connections-per-second search (methodology/procedures/mlr/cps.py) on a simulated
DUT that sets up at most LIMIT new connections a second: a trial's result as ``tgen run
--json`` writes it (its app flows' counts), mapped to the search's counts, and the RFC
9971 search over them. No root; counts and loads only."""

from __future__ import annotations

import trio

from tgen_tui.methodology.procedures.mlr.cps import DEFINITION, app_counts, cps_trial_from
from tgen_tui.methodology.procedures.mlr.goals import Goal
from tgen_tui.methodology.procedures.mlr.search import loss_ratio, mlr_search

LIMIT = 1500.0  # the DUT's new connections per second (an nft ct state new limit rate)


def _result(load: float, d: float, limit: float = LIMIT, behind: int = 0) -> dict:
    """What a run's result holds for two app flows sharing the load: connections beyond
    the limit time out (their SYNs dropped)."""
    attempted = round(load * d) - behind
    over = max(0, attempted - round(limit * d))
    half = attempted // 2
    flows = {
        "web.1": {"app": "http", "attempted": half, "failed_timeout": over // 2,
                  "established": half - over // 2},
        "web.2": {"app": "http", "attempted": attempted - half, "failed_timeout": over - over // 2,
                  "established": attempted - half - (over - over // 2)},
        "bulk": {"protocol": "tcp", "tx_bytes": 10},  # a bulk flow: not counted
    }  # fmt: skip
    return {"transport": {"streams": flows}}


def test_a_trial_counts_connections_as_intended_offered_and_received():
    assert app_counts(_result(2000, 2.0)) == (4000, 1000, 3000)
    t = cps_trial_from(_result(2000, 2.0), 2000, 2.0)
    d = t.extra.directions["forward"]
    assert (d.intended_frames, d.offered_frames, d.received_frames) == (4000, 4000, 3000)
    assert t.lost == 1000 and not t.passed and "1,000 of 4,000 connections failed" in t.reason
    assert loss_ratio(t) == 0.25
    ok = cps_trial_from(_result(1000, 2.0), 1000, 2.0)
    assert ok.passed and loss_ratio(ok) == 0.0
    behind = cps_trial_from(_result(1000, 2.0, behind=20), 1000, 2.0)  # not attempted: loss
    assert behind.extra.directions["forward"].sender_fell_behind and loss_ratio(behind) == 0.01
    assert "not attempted count as failed" in DEFINITION
    r = _result(1000, 2.0, behind=20)  # the workers' own due count, when they have one
    for f, due in (("web.1", 985), ("web.2", 995)):
        r["transport"]["streams"][f]["due"] = due
    by_due = cps_trial_from(r, 1000, 2.0)
    assert by_due.extra.directions["forward"].intended_frames == 1980 and loss_ratio(by_due) == 0


def test_the_search_finds_the_duts_connection_rate_within_five_percent():
    async def trial(load: float, d: float):
        return cps_trial_from(_result(load, d), load, d)

    goal = Goal("cps", loss_ratio=0.0, exceed_ratio=0.0, final_trial_duration_s=2.0,
                duration_sum_s=2.0, width=0.02, initial_trial_duration_s=2.0)  # fmt: skip
    res = trio.run(lambda: mlr_search(trial, [goal], min_load=100.0, max_load=10_000.0))
    (o,) = res.outcomes
    assert o.regular
    assert o.relevant_lower_bound_pps <= LIMIT < o.relevant_upper_bound_pps
    assert abs(o.relevant_lower_bound_pps - LIMIT) <= 0.05 * LIMIT


HELD = 1200  # the DUT's table: connections beyond it never get their SYN through


def _held_result(target: int, limit: int = HELD, resets: int = 0) -> dict:
    """A concurrent run's result: the first ``limit`` connections established, the rest
    time out (each twice: replaced once), ``resets`` established ones reset."""
    over = max(0, target - limit)
    est = min(target, limit) + resets
    flows = {"web": {"app": "http", "attempted": est + 2 * over, "established": est,
                     "failed_timeout": 2 * over, "failed_reset": resets}}  # fmt: skip
    return {"transport": {"streams": flows}}


def test_a_concurrent_trial_loses_the_target_not_held_or_the_failed_if_more():
    from tgen_tui.methodology.procedures.mlr.cps import concurrent_trial_from

    ok = concurrent_trial_from(_held_result(1000), 1000.4, 3.0)
    assert ok.passed and (ok.tx_frames, ok.rx_frames, ok.lost) == (1000, 1000, 0)
    over = concurrent_trial_from(_held_result(1300), 1300, 3.0)  # 100 short, 200 timed out
    assert (over.tx_frames, over.lost) == (1300, 200) and not over.passed
    assert "200 of 1,300 connections not held" in over.reason
    far = concurrent_trial_from(_held_result(3000), 3000, 3.0)  # 3,600 failed: capped at C
    assert far.lost == 3000 and loss_ratio(far) == 1.0
    reset = concurrent_trial_from(_held_result(1000, resets=5), 1000, 3.0)  # replaced, yet failed
    assert reset.lost == 5 and loss_ratio(reset) == 0.005


def _procedure(monkeypatch, test: str, kind: str, profile: str, **cfg):
    """``tgen rfc9411 KIND``'s procedure through the registry, each trial simulated."""
    import json

    from tgen_tui.dut.control import DutControl
    from tgen_tui.engine import cli_options
    from tgen_tui.methodology import registry
    from tgen_tui.methodology.kit.params import Params
    from tgen_tui.methodology.kit.state import RunState
    from tgen_tui.methodology.procedures.mlr import cps
    from tgen_tui.methodology.procedures.mlr.appsearch import AppSearchConfig, default_goal
    from tgen_tui.results import models

    async def cps_trial(profile, base, load, d, extra=()):
        assert base == 2000.0 and "--no-store" in extra
        return cps.cps_trial_from(_result(load, d), load, d)

    async def held_trial(profile, load, d, extra=()):
        return cps.concurrent_trial_from(_held_result(round(load)), load, d)

    monkeypatch.setattr(cps, "run_trial", cps_trial)
    monkeypatch.setattr(cps, "run_concurrent_trial", held_trial)
    monkeypatch.setattr(cli_options, "check_environment", lambda compiled, cluster=None: None)
    monkeypatch.setattr(DutControl, "settings", lambda self: {"source": self.describe()})
    state = RunState(test=test, params=Params(profile=profile, duration_s=2.0, settle_s=0.0))
    goal = default_goal(2.0, 0.02)
    state.body["config"] = AppSearchConfig(kind, [goal], trial_args=["--no-store"], **cfg)
    trio.run(registry.procedure(test).run, state)
    report = registry.build_report(state, partial=False)
    assert type(report) is models.AppSearchReport
    assert not any("does not fit" in w for w in report.warnings)
    doc = json.loads(json.dumps(report.to_doc(), default=str))
    assert models.parse_result(test, doc).to_doc() == doc
    return report, registry.render(report)


def test_tgen_rfc9411_cps_reports_the_limit_and_what_failed_a_trial(monkeypatch):
    report, text = _procedure(monkeypatch, "rfc9411-cps", "cps", "profiles/http-cps.yaml",
                              min_load=500.0, max_load=3000.0)  # fmt: skip
    (g,) = report.goals
    assert g.regular and g.relevant_lower_bound_pps <= LIMIT < g.relevant_upper_bound_pps
    assert abs(g.relevant_lower_bound_pps - LIMIT) <= 0.05 * LIMIT
    assert report.load_unit.startswith("connections/s") and report.base_load == 2000
    assert "refused, reset, timed out" in report.failed_trial
    assert "failed trial: a trial is high-loss" in text and "RLB conn/s" in text
    assert report.trials and all(t.extra.established is not None for t in report.trials)


def test_tgen_rfc9411_concurrent_finds_the_table_size(monkeypatch):
    report, text = _procedure(monkeypatch, "rfc9411-concurrent", "concurrent",
                              "profiles/http-hold.yaml", max_load=4000.0)  # fmt: skip
    (g,) = report.goals
    assert report.min_load_pps == 400.0 and report.base_load == 2000
    assert g.regular and g.relevant_lower_bound_pps <= HELD < g.relevant_upper_bound_pps
    assert abs(g.relevant_lower_bound_pps - HELD) <= 0.03 * HELD
    assert "C - established" in report.failed_trial and "RLB conn" in text


def test_tgen_rfc9411_refuses_a_profile_without_the_searched_load():
    import subprocess
    import sys

    for test, prof, word in (("cps", "profiles/lab.yaml", "connections_per_s"),
                             ("concurrent", "profiles/http-cps.yaml", "concurrent")):  # fmt: skip
        r = subprocess.run([sys.executable, "-m", "tgen_tui", "rfc9411", test, prof],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        assert r.returncode == 2 and f"no app flow with load: {{{word}: N}}" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
