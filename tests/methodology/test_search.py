"""Binary search, repeats and summaries against simulated DUTs (no root, no timing)."""

from __future__ import annotations

import trio

from tgen_tui.methodology.kit.search import (
    RepeatedSearch,
    SearchResult,
    binary_search,
    repeated_search,
)
from tgen_tui.methodology.kit.sim import RateDut, TableDut
from tgen_tui.methodology.kit.stats import nearest_rank, summary
from tgen_tui.methodology.kit.verdict import LossTolerance, judge
from tgen_tui.methodology.procedures.rfc2544.latency import (
    pdv_ns,
    penalty_ns,
    tl_wcl_from_percentiles,
    tl_wcl_from_sample,
)
from tgen_tui.methodology.procedures.rfc2544.loss import frame_loss
from tgen_tui.methodology.procedures.rfc9693.capacity import capacity_search
from tgen_tui.methodology.procedures.scaleup.run import relative_scaleup
from tgen_tui.results.models import Trial


def search(dut, max_rate, error, **kw) -> SearchResult:
    return trio.run(lambda: binary_search(dut, max_rate, error, **kw))


def test_threshold_zero_gives_no_passing_rate():
    dut = RateDut(capacity=0)
    r = search(dut, 100_000, 1000)
    assert r.status == "no passing rate"
    assert r.l_pps == 0 and 0 < r.h_pps <= 1000
    assert r.confirmed is None  # nothing to confirm
    assert all(not t.passed for t in r.trials)


def test_threshold_above_max_gives_upper_bound_not_reached():
    dut = RateDut(capacity=2_000_000)
    r = search(dut, 1_000_000, 1000)
    assert r.status == "upper bound not reached"
    assert r.l_pps == 1_000_000 and r.h_pps is None
    assert [t.kind for t in r.trials] == ["upper_bound", "confirm"]
    assert r.confirmed is True


def test_8M_with_error_1000_takes_13_halving_trials():
    dut = RateDut(capacity=5_000_000)
    r = search(dut, 8_000_000, 1000)
    kinds = [t.kind for t in r.trials]
    assert kinds.count("search") == 13 == r.search_trials
    assert kinds == ["upper_bound"] + ["search"] * 13 + ["confirm"]
    assert r.l_pps <= 5_000_000 < r.h_pps and r.h_pps - r.l_pps <= 1000
    assert r.n_trials() == {"search": 13, "upper_bound": 1, "confirm": 1, "total": 15}


def test_reports_l_and_h_not_the_last_rate_tried():
    dut = RateDut(capacity=30_000)
    r = search(dut, 100_000, 1000)
    assert r.l_pps <= 30_000 < r.h_pps and r.h_pps - r.l_pps <= 1000
    passed = [t.rate_pps for t in r.trials if t.passed and t.kind == "search"]
    failed = [t.rate_pps for t in r.trials if not t.passed and t.kind != "confirm"]
    assert r.l_pps == max(passed) and r.h_pps == min(failed)
    last = [t for t in r.trials if t.kind == "search"][-1]
    assert last.rate_pps in (r.l_pps, r.h_pps)  # whichever it was, l and h are both reported
    assert r.trials[-1].kind == "confirm" and r.trials[-1].rate_pps == r.l_pps


def test_one_lost_frame_fails_a_trial():
    dut = RateDut(capacity=1e9, lose_one_above=50_000)
    t = trio.run(dut, 60_000)
    assert t.lost == 1 and not t.passed and t.reason == "lost 1 of 60,000 frames"
    r = search(dut, 100_000, 1000)
    assert r.l_pps <= 50_000 < r.h_pps


def test_loss_tolerance_is_applied_when_set():
    t = Trial(rate_pps=1000, tx_frames=1000, rx_frames=999, lost=1)
    assert not judge(t).passed
    t2 = Trial(rate_pps=1000, tx_frames=1000, rx_frames=999, lost=1)
    assert judge(t2, LossTolerance(frames=1)).passed
    t3 = Trial(rate_pps=1000, tx_frames=1000, rx_frames=980, lost=20)
    assert not judge(t3, LossTolerance(percent=1.0)).passed


def test_late_trial_is_invalid_and_counts_as_failed():
    dut = RateDut(capacity=1e9, sender_max=70_000)  # the DUT never drops; the sender is slow
    t = trio.run(dut, 80_000)
    assert not t.valid and not t.passed and t.verdict == "invalid"
    assert t.lost == 0 and t.reason.startswith("invalid: sending took")
    r = search(dut, 100_000, 1000)
    assert r.l_pps <= 70_000 < r.h_pps
    assert any(t.verdict == "invalid" for t in r.trials)
    assert all(t.to_doc()["verdict"] in ("pass", "fail", "invalid") for t in r.trials)


def test_every_trial_records_requested_and_achieved_rates_and_counts():
    dut = RateDut(capacity=40_000, sender_max=90_000)
    r = search(dut, 100_000, 1000)
    for t in r.to_model().to_doc()["trials"]:
        for k in ("rate_pps", "achieved_pps", "tx_frames", "rx_frames", "lost", "verdict"):
            assert k in t
        assert t["tx_frames"] == t["rx_frames"] + t["lost"]


def test_repeated_noisy_search_summary():
    dut = RateDut(capacity=50_000, noise_sd=2000, seed=7)
    rec = RepeatedSearch("throughput", "fps")
    trio.run(lambda: repeated_search(dut, 100_000, 500, 12, record=rec))
    ls = [s.l_pps for s in rec.searches]
    assert len(ls) == 12 and len(set(ls)) > 1  # the noise shows up between repeats
    s = rec.summary()
    assert s.n == 12 and s.min == min(ls) and s.max == max(ls)
    assert s.min <= s.median <= s.max
    assert s.p1 == nearest_rank(ls, 0.01) and s.p99 == nearest_rank(ls, 0.99)
    d = rec.searches[0].to_model().to_doc()
    assert {"l_pps", "h_pps", "trials"} <= set(d) and d["l_pps"] == ls[0]


def test_summary_small_counts_have_no_percentiles():
    s = summary([3, 1, 2])
    assert s == {"n": 3, "median": 2.0, "min": 1.0, "max": 3.0}
    assert summary([1, 2, 3, 4])["median"] == 2.5
    assert summary([])["median"] is None


def test_nearest_rank_999_of_500_is_the_maximum():
    vals = list(range(1, 501))
    assert nearest_rank(vals, 0.999) == 500
    assert nearest_rank(list(range(1, 2001)), 0.999) == 1998


def test_frame_loss_steps_down_until_two_clean_trials():
    dut = RateDut(capacity=55_000)
    pts = trio.run(lambda: frame_loss(dut, 100_000, step_pct=10))
    loads = [p.load_pct for p in pts]
    assert loads == [100, 90, 80, 70, 60, 50, 40]
    assert [p.trial.lost == 0 for p in pts][-2:] == [True, True]
    assert pts[0].trial.loss_pct == 45.0  # (100k − 55k)/100k
    assert all(p.trial.lost > 0 for p in pts[:-2])


def test_latency_penalty_rule():
    pen = penalty_ns(120, 60, 2)
    assert pen == 62e9
    lat = [1000.0] * 499
    r = tl_wcl_from_sample(lat, lost=1, penalty=pen)
    assert r["tl_ns"] == 1000 and r["wcl_ns"] == pen  # with 500 tags the 99.9th is the max
    r0 = tl_wcl_from_sample([float(i) for i in range(1, 501)], lost=0, penalty=pen)
    assert r0["tl_ns"] == 250 and r0["wcl_ns"] == 500
    p = tl_wcl_from_percentiles(50_000, 90_000, received=10_000, lost=0, penalty=pen)
    assert p["tl_ns"] == 50_000 and p["wcl_ns"] == 90_000
    p = tl_wcl_from_percentiles(50_000, 90_000, received=10_000, lost=20, penalty=pen)
    assert p["tl_ns"] == 50_000 and p["wcl_ns"] == pen  # 20 > 0.1 % of the tagged frames
    p = tl_wcl_from_percentiles(50_000, 90_000, received=100, lost=200, penalty=pen)
    assert p["tl_ns"] == pen


def test_pdv_clamps_negative_minimum():
    assert pdv_ns(10_000, 50_000) == {"pdv_ns": 40_000, "clamped_min": False}
    assert pdv_ns(-500, 50_000) == {"pdv_ns": 50_000, "clamped_min": True}


def test_capacity_search_finds_table_size_with_early_drop():
    dut = TableDut(size=20_000, cps=100_000)

    async def cps_search(n):
        return await binary_search(lambda r, k: dut.trial(n, r, k), 1_000_000, 1000)

    async def cps_trial(n, rate):
        return await dut.trial(n, rate)

    res = trio.run(lambda: capacity_search(cps_search, cps_trial, c0=1000, error=200))
    assert res.status == "ok"
    assert 99_000 <= res.r0 <= 100_000
    assert res.capacity <= 20_000 < res.h_connections and res.h_connections - res.capacity <= 200
    bad = [s for s in res.steps if s.trial and not s.trial.passed]
    assert bad and "failed to fill the state table" in bad[0].trial.reason


def test_capacity_halves_c0_when_nothing_passes():
    dut = TableDut(size=20_000, cps=100_000)

    async def cps_search(n):
        return await binary_search(lambda r, k: dut.trial(n, r, k), 1_000_000, 1000)

    async def cps_trial(n, rate):
        return await dut.trial(n, rate)

    res = trio.run(lambda: capacity_search(cps_search, cps_trial, c0=1_000_000, error=500))
    assert res.c0_used < 20_000 and [s.phase for s in res.steps][:2] == ["R0", "halve"]
    assert abs(res.capacity - 20_000) <= 500


def test_relative_scaleup():
    assert relative_scaleup({1: 223.5, 2: 371.1}) == {1: 1.0, 2: 371.1 / 447.0}
    assert relative_scaleup({1: None, 2: 5.0}) == {1: None, 2: None}
