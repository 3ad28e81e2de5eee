"""Unit tests for tgen_tui.packets.schedule (no network)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tgen_tui.packets.program import Schedule
from tgen_tui.packets.schedule import DueTimes, uniform01


def test_constant_rate():
    d = DueTimes(Schedule(pps=1000.0, start_s=0.5))
    t = d.due(0, 5)
    np.testing.assert_allclose(t, 0.5 + np.arange(5) / 1000.0)
    assert d.count_until(0.4999) == 0
    assert d.count_until(0.5) == 1
    assert d.count_until(0.5 + 0.0105) == 11
    assert d.total() is None
    assert d.mean_pps() == 1000.0


@pytest.mark.parametrize("pps", [1.0, 3.0, 999.0, 1e6, 14880952.0, 7.3])
def test_count_until_consistent_with_due(pps):
    d = DueTimes(Schedule(pps=pps))
    t = d.due(0, 2000)
    for i in [0, 1, 2, 17, 999, 1999]:
        # exactly at a due time, the frame is due
        assert d.count_until(float(t[i])) == i + 1
        # just before it, it is not
        assert d.count_until(math.nextafter(float(t[i]), -math.inf)) == i


def test_count_and_stop():
    d = DueTimes(Schedule(pps=100.0, count=7))
    assert d.total() == 7
    assert d.count_until(10.0) == 7
    d = DueTimes(Schedule(pps=100.0, stop_s=0.05))
    # frames due at 0, .01, .02, .03, .04: the one due at 0.05 is not sent
    assert d.total() == 5
    assert d.count_until(1.0) == 5
    d = DueTimes(Schedule(pps=100.0, start_s=1.0, stop_s=1.05, count=3))
    assert d.total() == 3
    assert d.count_until(0.99) == 0


def test_on_off_count_based():
    # 1000 pps, 0.0105 s on -> round(10.5) = 10 frames per on phase (banker's rounding of
    # 10.5 gives 10), period 0.03 s
    d = DueTimes(Schedule(pps=1000.0, on_s=0.0105, off_s=0.0195))
    assert d.per_on == round(0.0105 * 1000.0)
    k = d.per_on
    t = d.due(0, 3 * k)
    np.testing.assert_allclose(t[:k], np.arange(k) / 1000.0)
    np.testing.assert_allclose(t[k : 2 * k], 0.03 + np.arange(k) / 1000.0)
    np.testing.assert_allclose(t[2 * k :], 0.06 + np.arange(k) / 1000.0)
    # nothing becomes due during the off phase
    assert d.count_until(0.0099) == k
    assert d.count_until(0.0299) == k
    assert d.count_until(0.03) == k + 1
    assert d.mean_pps() == pytest.approx(k / 0.03)


def test_multi_burst():
    d = DueTimes(Schedule(pps=1e6, burst=4, burst_gap_s=0.001))
    t = d.due(0, 12)
    period = 4e-6 + 0.001
    exp = np.concatenate([p * period + np.arange(4) * 1e-6 for p in range(3)])
    np.testing.assert_allclose(t, exp)
    assert d.count_until(0.0005) == 4
    assert d.count_until(period) == 5
    assert d.mean_pps() == pytest.approx(4 / period)
    for i in range(12):
        assert d.count_until(float(t[i])) == i + 1


def test_uniform01_is_counter_based():
    idx = np.arange(1000, dtype=np.int64)
    a = uniform01(7, idx)
    b = uniform01(7, idx[500:])
    np.testing.assert_array_equal(a[500:], b)
    assert (a > 0).all() and (a < 1).all()
    assert not np.array_equal(uniform01(8, idx), a)
    assert abs(a.mean() - 0.5) < 0.05


@pytest.mark.parametrize(
    "idt,params",
    [("exponential", ()), ("pareto", (2.5,)), ("normal", (0.2,)), ("uniform", (0.5,))],
)
def test_random_idt_mean_and_determinism(idt, params):
    s = Schedule(pps=10000.0, idt=idt, idt_params=params, key=42)
    d = DueTimes(s)
    n = 200_000
    t = d.due(0, n)
    assert t[0] == 0.0
    gaps = np.diff(t)
    assert (gaps >= 0).all()
    assert gaps.mean() == pytest.approx(1e-4, rel=0.03)
    # sequential chunks give bit-identical times
    d2 = DueTimes(s)
    chunks = []
    pos = 0
    for size in [1, 7, 1000, 65536, 3, 70000]:
        chunks.append(d2.due(pos, size))
        pos += size
    np.testing.assert_array_equal(np.concatenate(chunks), t[:pos])
    # random access (backwards, into the middle) is identical too
    np.testing.assert_array_equal(d2.due(100_000, 5), t[100_000:100_005])
    np.testing.assert_array_equal(d2.due(3, 4), t[3:7])
    # a fresh object asked for the middle first
    np.testing.assert_array_equal(DueTimes(s).due(150_000, 10), t[150_000:150_010])
    # different key -> different times
    assert not np.array_equal(DueTimes(Schedule(pps=10000.0, idt=idt, key=43)).due(0, 100), t[:100])


def test_exponential_is_poisson_like():
    d = DueTimes(Schedule(pps=1000.0, idt="exponential", key=1))
    gaps = np.diff(d.due(0, 100_001))
    # coefficient of variation of an exponential is 1
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


def test_uniform_width():
    d = DueTimes(Schedule(pps=1000.0, idt="uniform", idt_params=(0.5,), key=3))
    gaps = np.diff(d.due(0, 10_001))
    assert gaps.min() >= 0.0005 - 1e-9 and gaps.max() <= 0.0015 + 1e-9


def test_random_count_until():
    d = DueTimes(Schedule(pps=5000.0, idt="exponential", key=9))
    t = DueTimes(Schedule(pps=5000.0, idt="exponential", key=9)).due(0, 50_000)
    for i in [0, 1, 10, 4999, 20000, 49_998]:
        assert d.count_until(float(t[i])) >= i + 1
        assert d.count_until(float(t[i])) == int(np.searchsorted(t, t[i], side="right"))
    # going backwards works too
    assert d.count_until(float(t[5])) == int(np.searchsorted(t, t[5], side="right"))
    assert d.count_until(-1.0) == 0


def test_random_with_stop_and_onoff():
    s = Schedule(pps=1000.0, idt="exponential", key=5, on_s=0.1, off_s=0.1, stop_s=2.0)
    d = DueTimes(s)
    tot = d.total()
    t = d.due(0, tot + 1)
    assert t[tot - 1] < 2.0 <= t[tot]
    # no frame in an off phase
    phase = np.mod(t, 0.2)
    assert (phase < 0.1 + 1e-12).all()
    # about half the time on -> about 1000 frames in 2 s
    assert 800 < tot < 1200
    assert d.count_until(100.0) == tot


def test_invalid():
    with pytest.raises(ValueError):
        DueTimes(Schedule(pps=0.0))
    with pytest.raises(ValueError):
        DueTimes(Schedule(pps=10.0, idt="zipf"))
    with pytest.raises(ValueError):
        DueTimes(Schedule(pps=10.0, idt="pareto", idt_params=(1.0,)))
    with pytest.raises(ValueError):
        DueTimes(Schedule(pps=10.0, idt="gamma", idt_params=(0.0,)))


def test_large_index_constant():
    d = DueTimes(Schedule(pps=1e6))
    t = d.due(10**12, 3)
    np.testing.assert_allclose(t, 1e6 + np.arange(3) * 1e-6, rtol=0, atol=1e-9)
    assert d.count_until(float(t[1])) == 10**12 + 2


@pytest.mark.parametrize(
    "sched",
    [
        Schedule(pps=7.3, start_s=0.1),
        Schedule(pps=14880952.0),
        Schedule(pps=1000.0, on_s=0.0105, off_s=0.0195),
        Schedule(pps=1e6, burst=4, burst_gap_s=0.001),
        Schedule(pps=1000.0, idt="exponential", key=2),
        Schedule(pps=1000.0, idt="uniform", on_s=0.1, off_s=0.1, key=2),
    ],
)
def test_due_one_matches_vector(sched):
    d = DueTimes(sched)
    idx = [0, 1, 2, 3, 4, 5, 999, 12345, 10**6 + 7 if d.random else 10**12 + 7]
    v = d.due(0, 13000)
    for i in idx[:-1]:
        assert d.due_one(i) == v[i]
    assert d.due_one(idx[-1]) == d.due(idx[-1], 1)[0]


@pytest.mark.parametrize("idt", ["exponential", "normal"])
def test_drawn_gaps_hold_the_mean_rate_over_every_block(idt):
    """Each block of MEAN_BLOCK gaps sums to exactly MEAN_BLOCK mean gaps (to the tick),
    so the mean rate of a run is the asked one, and the gaps keep their law."""
    from tgen_tui.packets.schedule import MEAN_BLOCK, TICKS_PER_S

    d = DueTimes(Schedule(pps=10000.0, idt=idt, key=7))
    t = d.due(0, 3 * MEAN_BLOCK + 1)
    ends = t[::MEAN_BLOCK]  # frames 0, B, 2B, 3B
    np.testing.assert_allclose(np.diff(ends), MEAN_BLOCK / 10000.0, atol=MEAN_BLOCK / TICKS_PER_S)
    if idt == "exponential":
        x = np.sort(np.diff(t)) * 10000.0  # in mean gaps
        n = len(x)
        law = 1.0 - np.exp(-x)
        ks = max(np.max(np.arange(1, n + 1) / n - law), np.max(law - np.arange(n) / n))
        assert ks < 0.02
