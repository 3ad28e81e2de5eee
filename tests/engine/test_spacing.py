"""The spacing figure (engine/spacing.py): counts to figures, and the KS distance."""

from __future__ import annotations

import numpy as np
import pytest

from tgen_tui.engine.snapshot import Spacing, StreamStats
from tgen_tui.engine.spacing import ks_distance, spacing, spacing_warnings
from tgen_tui.packets.program import Schedule
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import lat_bucket


def _hist(gaps: np.ndarray) -> np.ndarray:
    return np.bincount(lat_bucket(gaps.astype(np.int64)), minlength=C.HIST_BUCKETS)


def test_ks_small_for_the_law_large_for_constant_gaps():
    rng = np.random.default_rng(7)
    mean = 100_000.0  # 10 kpps
    exp = _hist(rng.exponential(mean, 50_000))
    const = _hist(np.full(50_000, mean))
    assert ks_distance(exp, "exponential", (), mean) < 0.02
    assert ks_distance(const, "exponential", (), mean) > 0.5
    # the other laws, drawn as the schedule defines them
    u = rng.uniform(size=50_000)
    par = mean * (0.5 / 1.5) * u ** (-1 / 1.5)
    assert ks_distance(_hist(par), "pareto", (), mean) < 0.02
    nor = np.maximum(0, mean * (1 + 0.1 * rng.standard_normal(50_000)))
    assert ks_distance(_hist(nor), "normal", (), mean) < 0.05
    uni = mean * (1 + 0.5 * (2 * u - 1))
    assert ks_distance(_hist(uni), "uniform", (), mean) < 0.05
    assert ks_distance(_hist(uni), "exponential", (), mean) > 0.2


def _row(gaps, asked):
    row = np.zeros(C.RX_STRIDE, np.int64)
    g = np.asarray(gaps, np.int64)
    row[C.R_IAT_COUNT] = len(g)
    row[C.R_IAT_SUM] = g.sum()
    row[C.R_IAT_ASKED_COUNT] = len(g) if asked else 0
    row[C.R_IAT_ABS_ERR] = np.abs(g - asked).sum() if asked else 0
    row[C.R_IAT_WITHIN] = (np.abs(g - asked) * 10 <= asked).sum() if asked else 0
    row[C.R_IAT_ASKED] = asked
    row[C.R_IAT_HIST : C.R_HIST] = _hist(g)
    return row


def test_spacing_figure_from_a_row():
    gaps = [100_000] * 6 + [2_000, 198_000, 100_000, 50_000]
    sp = spacing(_row(gaps, 100_000), 100_000, Schedule(pps=10_000), 10_000)
    assert sp.gaps == 10 and sp.asked_gap_ns == 100_000 and sp.law == "constant"
    assert sp.mean_gap_ns == pytest.approx(sum(gaps) / 10)
    assert sp.mae_ns == pytest.approx((98_000 + 98_000 + 50_000) / 10)
    assert sp.within_10pct == pytest.approx(0.7)
    assert sp.ks is None and sp.p50_ns is not None and sp.p99_ns >= 198_000
    # no asked gap (a sender that does not write it): measured, not compared
    sp = spacing(_row(gaps, 0), 0, Schedule(pps=10_000, idt="exponential"), 10_000)
    assert sp.within_10pct is None and sp.mae_ns is None and sp.asked_gap_ns is None
    assert sp.ks is not None and sp.law == "exponential"  # the law's mean from the rate
    assert spacing(_row([], 0), 0, None, 0) == Spacing()
    shaped = spacing(_row(gaps, 100_000), 100_000, Schedule(pps=10_000, burst=4), 10_000)
    assert shaped.law == "constant+burst" and shaped.ks is None


def test_warning_for_a_constant_stream_that_was_not_spaced():
    bad = Spacing(asked_gap_ns=10_000.0, gaps=1000, within_10pct=0.42, law="constant")
    few = Spacing(asked_gap_ns=10_000.0, gaps=99, within_10pct=0.1, law="constant")
    rnd = Spacing(asked_gap_ns=10_000.0, gaps=1000, within_10pct=0.1, law="exponential")
    ok = Spacing(asked_gap_ns=10_000.0, gaps=1000, within_10pct=0.95, law="constant")
    streams = [StreamStats("up", 0, "p0", "p1", spacing=sp) for sp in (bad, few, rnd, ok)]
    assert spacing_warnings(streams) == [
        "stream up: 42.0 % of gaps within 10 % of 10.0 µs (asked 100 kpps); "
        "the tester could not space at this rate"
    ]
