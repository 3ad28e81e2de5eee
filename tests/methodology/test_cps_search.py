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
