"""The RFC 9971 search (tgen search) on simulated DUTs with known loss curves: simulated
time, seeded, no root. Assertions are on loads, counts and classifications."""

from __future__ import annotations

import pytest
import trio

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.kit.search import binary_search
from tgen_tui.methodology.kit.sim import RateDut
from tgen_tui.methodology.procedures.mlr.goals import PRESETS, Goal, goals_for, parse_goal, quick
from tgen_tui.methodology.procedures.mlr.search import (
    MAX_LOAD_PASSED,
    NO_LOAD_PASSED,
    loss_ratio,
    mlr_search,
)
from tgen_tui.methodology.procedures.mlr.sim import CurveDut

CAP = 40_000.0


def search(dut, goals, min_load=9001.0, max_load=100_000.0, **kw):
    return trio.run(
        lambda: mlr_search(dut, list(goals), min_load=min_load, max_load=max_load, **kw)
    )


def by_name(res):
    return {o.goal.name: o for o in res.outcomes}


def csit():
    return goals_for("csit", [], None)


def test_clean_cliff_ndr_and_pdr_bracket_the_capacity_within_the_width():
    res = search(CurveDut(CAP), csit(), warmup_s=1.0)
    assert res.status == "done" and res.trials[0].kind == "warmup"
    for o in res.outcomes:
        rlb, rub = o.relevant_lower_bound_pps, o.relevant_upper_bound_pps
        assert o.regular and o.irregular is None
        assert rlb < rub and rub - rlb <= o.goal.width * rub + 1e-6
    ndr, pdr = by_name(res)["ndr"], by_name(res)["pdr"]
    assert ndr.relevant_lower_bound_pps <= CAP < ndr.relevant_upper_bound_pps
    assert ndr.conditional_throughput_pps == ndr.relevant_lower_bound_pps  # no loss at the RLB
    # PDR: 0.5 % loss allowed, so its bounds sit above the cliff: RUB x (1 - 0.005) > CAP
    assert pdr.relevant_lower_bound_pps >= ndr.relevant_lower_bound_pps
    assert pdr.relevant_lower_bound_pps * (1 - 0.005) <= CAP
    assert pdr.conditional_throughput_pps == pytest.approx(CAP, rel=0.005)


def test_random_loss_under_the_cliff_ndr_is_irregular_no_load_passed():
    res = search(CurveDut(CAP, floor_loss=0.002, seed=3), csit())
    ndr, pdr = by_name(res)["ndr"], by_name(res)["pdr"]
    assert ndr.irregular == NO_LOAD_PASSED and not ndr.regular
    assert ndr.relevant_lower_bound_pps is None and ndr.conditional_throughput_pps is None
    assert ndr.relevant_upper_bound_pps == 9001.0  # min load is an upper bound
    assert pdr.regular
    # the cliff's own loss plus the 0.2 % floor: PDR where (L - CAP)/L + 0.002 = 0.005
    assert pdr.relevant_lower_bound_pps <= CAP / (1 - 0.003) < pdr.relevant_upper_bound_pps
    assert pdr.quantile_loss_ratio > 0.002 - 0.0015
    cls = {d["load_pps"]: d["classification"]["ndr"] for d in res.loads}
    assert cls[9001.0] == "upper bound"


def test_max_load_passed_is_irregular():
    res = search(CurveDut(1e6), csit(), max_load=50_000.0)
    for o in res.outcomes:
        assert o.irregular == MAX_LOAD_PASSED and not o.regular
        assert o.relevant_upper_bound_pps is None
        assert o.relevant_lower_bound_pps == 50_000.0 == o.conditional_throughput_pps


def test_loss_inversion_gives_the_conservative_bound():
    """The DUT forwards 40,000 fps for 20 trials, then 39,000: loads near 40,000 measured
    early stay lower bounds while lower loads measured later are upper bounds (a loss
    inversion). The relevant upper bound is the smallest upper bound and the relevant
    lower bound the largest lower bound below it, not the higher lower bound."""
    res = search(CurveDut(CAP, degrade=(20, 39_000.0)), csit())
    pdr = by_name(res)["pdr"]
    rlb, rub = pdr.relevant_lower_bound_pps, pdr.relevant_upper_bound_pps
    cls = {d["load_pps"]: d["classification"]["pdr"] for d in res.loads}
    assert any(load > rub and c == "lower bound" for load, c in cls.items())  # inverted
    assert rub == min(load for load, c in cls.items() if c == "upper bound")
    assert rlb == max(load for load, c in cls.items() if c == "lower bound" and load < rub)
    assert rlb <= 39_000 / (1 - 0.005) < rub  # the degraded DUT's PDR, conservatively


def test_noisy_dut_five_seeds_spread_within_the_goal_width():
    pdrs = []
    for seed in range(5):
        res = search(CurveDut(CAP, noise_sd=100.0, floor_loss=0.001, seed=seed), csit())
        pdr = by_name(res)["pdr"]
        assert pdr.regular
        pdrs.append(pdr.relevant_lower_bound_pps)
    width = csit()[1].width
    assert max(pdrs) - min(pdrs) <= width * max(pdrs)


def test_presets_reproduce_their_definitions():
    """METHODOLOGY.md's equivalent goals, and the trials the search runs for them."""
    want = {
        "rfc2544": [(0.0, 0.0, 60.0, 60.0)],
        "tst009": [(0.0, 0.5, 60.0, 120.0)],
        "csit": [(0.0, 0.5, 1.0, 21.0), (0.005, 0.5, 1.0, 21.0)],
        "nfvbench": [(0.00001, 0.0, 60.0, 60.0), (0.001, 0.0, 60.0, 60.0)],
    }
    for name, goals in want.items():
        got = [
            (g.loss_ratio, g.exceed_ratio, g.final_trial_duration_s, g.duration_sum_s)
            for g in PRESETS[name][0]
        ]
        assert got == goals, name
    # rfc2544: every trial is one 60 s trial and decides its load alone (exceed 0)
    res = search(CurveDut(CAP), goals_for("rfc2544", [], None))
    assert {t.duration_s for t in res.trials} == {60.0}
    assert all(d["trials"] == 1 for d in res.loads)
    (o,) = res.outcomes
    assert o.relevant_lower_bound_pps <= CAP < o.relevant_upper_bound_pps
    # tst009: 60 s trials, a 120 s sum and exceed 0.5: a load is an upper bound only when
    # more than 60 s of its trials lose frames (two lossy trials; one leaves it undecided),
    # and a lower bound after one lossless 60 s trial (the missing 60 s may all be bad)
    res = search(CurveDut(CAP), goals_for("tst009", [], None))
    assert {t.duration_s for t in res.trials} == {60.0}
    for d in res.loads:
        bad_s = d["duration_sum_s"] if d["max_loss_ratio"] > 0 else 0.0  # no noise: all or none
        want = "upper bound" if bad_s > 60.0 else "undecided" if bad_s else "lower bound"
        assert d["classification"]["throughput"] == want, d
    cls = [(d["trials"], d["classification"]["throughput"]) for d in res.loads]
    assert (1, "undecided") in cls and (2, "upper bound") in cls  # both cases were met
    (o,) = res.outcomes
    assert o.relevant_lower_bound_pps <= CAP < o.relevant_upper_bound_pps
    rub = next(d for d in res.loads if d["load_pps"] == o.relevant_upper_bound_pps)
    assert (rub["trials"], rub["duration_sum_s"]) == (2, 120.0)
    # csit: 1 s trials; its relevant lower bound holds at least 21 s x (1 - 0.5) of them
    res = search(CurveDut(CAP), csit())
    assert {t.duration_s for t in res.trials} == {1.0}
    for o in res.outcomes:
        load = o.relevant_lower_bound_pps
        assert next(d for d in res.loads if d["load_pps"] == load)["duration_sum_s"] >= 10.5


def test_rfc2544_preset_and_binary_search_agree_on_a_clean_cliff():
    """One definition, two searches: tgen rfc2544 throughput's binary search and the
    rfc2544 preset find the same cliff to within their widths."""
    b = trio.run(lambda: binary_search(RateDut(CAP), 100_000, 1000, confirm=False))
    res = search(CurveDut(CAP), goals_for("rfc2544", [], 1000 / CAP))
    o = res.outcomes[0]
    assert b.l_pps <= CAP <= b.h_pps
    assert abs(o.relevant_lower_bound_pps - b.l_pps) <= 1000 + o.goal.width * CAP


def test_unsent_frames_count_as_loss_unless_told_otherwise():
    """A sender that offers at most 30,000 fps: its unsent frames are loss (CSIT), so the
    search stops below it; with unsent_is_loss off only the DUT's loss counts."""
    res = search(CurveDut(CAP, sender_max=30_000), csit())
    assert by_name(res)["ndr"].relevant_upper_bound_pps <= 30_000 * 1.01
    t = next(t for t in res.trials if t.rate_pps > 30_000)
    assert not t.valid and loss_ratio(t) > 0 and loss_ratio(t, unsent_is_loss=False) == 0
    assert t.extra.directions["forward"].sender_fell_behind is True
    res = search(CurveDut(CAP, sender_max=30_000), csit(), unsent_is_loss=False)
    assert by_name(res)["ndr"].irregular == MAX_LOAD_PASSED


def test_goal_parsing_and_quick():
    g = parse_goal("pdr=0.5%,exceed=0,trial=10s,sum=20s,width=1%")
    assert g == Goal("pdr", 0.005, 0.0, 10.0, 20.0, 0.01, 1.0)
    assert parse_goal("ndr=0").loss_ratio == 0.0
    goals = goals_for("csit", ["pdr=0.1%"], None)
    assert [(x.name, x.loss_ratio) for x in goals] == [("ndr", 0.0), ("pdr", 0.001)]
    for bad in ("pdr", "pdr=x", "pdr=0.5%,foo=1", "pdr=0.5%,trial=10s,sum=5s", "pdr=100%"):
        with pytest.raises(BadInput, match="--goal"):
            parse_goal(bad)
    q, text = quick(list(PRESETS["rfc2544"][0]) + list(PRESETS["csit"][0]))
    assert [(x.final_trial_duration_s, x.duration_sum_s) for x in q] == [
        (1.0, 1.0),
        (1.0, 3.0),
        (1.0, 3.0),
    ]
    assert "--quick" in text and "defined: 60 s" in text
