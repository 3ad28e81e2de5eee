"""Rate over time (packets/rateshape.py through DueTimes): due times from the integral of
the rate, exact counts, repeats, and a re-based schedule that keeps the shape's phase."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tgen_tui.diagnostics import BadInput
from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.program import Schedule, program_from_dict, program_to_dict
from tgen_tui.packets.rateshape import RateShape
from tgen_tui.packets.schedule import DueTimes
from tgen_tui.profiles.loader import load_profile_text

STEPS = ((3.0, 0.2, 0.2), (3.0, 1.0, 1.0), (3.0, 0.4, 0.4))  # 10k, 50k, 20k at pps 50k


def test_steps_send_the_integral_and_each_step_its_rate():
    d = DueTimes(Schedule(pps=50_000.0, shape=STEPS))
    assert d.total() == 240_000  # 30,000 + 150,000 + 60,000
    t = d.due(0, 240_000)
    assert np.all(np.diff(t) > 0)
    per_s = np.bincount(np.floor(t).astype(int), minlength=9)
    assert per_s.tolist() == [10_000] * 3 + [50_000] * 3 + [20_000] * 3
    assert d.count_until(1e6) == 240_000
    for i in (0, 29_999, 30_000, 179_999, 180_000, 239_999):
        assert d.count_until(float(t[i])) == i + 1
        assert d.count_until(math.nextafter(float(t[i]), -math.inf)) == i
    assert d.rate_at(1.0) == 10_000 and d.rate_at(4.0) == 50_000 and d.rate_at(10.0) == 0.0
    assert d.mean_pps() == pytest.approx(240_000 / 9)


def test_a_ramp_is_the_integral_of_a_linear_rate():
    # 1k -> 100k pps over 30 s: N(t) = 1000 t + 99000 t^2 / 60
    d = DueTimes(Schedule(pps=100_000.0, shape=((30.0, 0.01, 1.0),)))
    for t in (0.5, 1.0, 10.0, 29.0):
        n = 1000 * t + 99_000 * t * t / 60
        assert d.count_until(t) == math.floor(n) + 1
    assert d.total() == 1_515_000
    assert d.rate_at(15.0) == pytest.approx(50_500)


def test_a_repeated_shape_repeats():
    d = DueTimes(Schedule(pps=1000.0, shape=((1.0, 1.0, 1.0), (1.0, 0.5, 0.5)), shape_repeat=True))
    assert d.total() is None
    assert d.count_until(math.nextafter(10.0, 0)) == 5 * 1500
    t = d.due(0, 4500)
    np.testing.assert_allclose(t[1500:3000] - 2.0, t[:1500], atol=1e-9)


def test_a_rebased_schedule_keeps_the_phase():
    """A rate change at 4.5 s (the worker's set_rate) re-bases the schedule: at the same
    rate, the frames after it are due exactly when they were before."""
    s = Schedule(pps=50_000.0, shape=STEPS)
    d = DueTimes(s)
    rel = 4.5
    k = d.count_until(math.nextafter(rel, -math.inf))  # frames due before the change
    again = DueTimes(dataclasses.replace(s, start_s=0.0, shape_phase_s=d.shape_phase(rel)))
    np.testing.assert_allclose(rel + again.due(0, 1000), d.due(k, 1000), atol=1e-9)
    assert again.total() == 240_000 - k
    # twice the rate from there: the rest of the shape at twice its rates
    fast = DueTimes(dataclasses.replace(s, pps=100_000.0, start_s=0.0, shape_phase_s=4.5))
    assert fast.rate_at(0.1) == 100_000 and fast.rate_at(2.0) == 40_000


def test_random_gaps_under_a_shape_follow_its_rate():
    d = DueTimes(Schedule(pps=50_000.0, shape=STEPS, idt="exponential", key=5))
    t = d.due(0, 200_000)
    per_s = np.bincount(np.floor(t).astype(int), minlength=9)[:6]
    np.testing.assert_allclose(per_s, [10_000] * 3 + [50_000] * 3, rtol=0.02)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        RateShape(1000.0, ())
    with pytest.raises(ValueError):
        RateShape(1000.0, ((0.0, 1.0, 1.0),))
    with pytest.raises(ValueError, match="on/off or multi-burst"):
        DueTimes(Schedule(pps=10.0, shape=STEPS, burst=5))


PROFILE = """
ports: {p0: {interface: veth0}}
streams:
  - name: s
    port: p0
    udp: {}
    size: 64
EXTRA
"""


def _load(extra: str):
    return load_profile_text(PROFILE.replace("EXTRA", extra), "t.yaml")


def test_profile_steps_and_ramps_compile_to_multiples_of_the_peak():
    p = _load(
        "    shape:\n      steps:\n        - {rate: 10kpps, for: 3s}\n"
        "        - {ramp: {from: 10kpps, to: 50kpps, over: 2s}}\n"
        "        - {rate: 33.6Mbit, for: 1s}\n      repeat: true\n"
    )
    sc = compile_profile(p).streams[0].schedule
    assert sc.pps == 50_000.0 and sc.shape_repeat
    assert sc.shape == ((3.0, 0.2, 0.2), (2.0, 0.2, 1.0), (1.0, 1.0, 1.0))  # 33.6 Mbit L1 = 50k
    # the worker pipe carries the shape
    prog = compile_profile(p).streams[0]
    assert program_from_dict(program_to_dict(prog)).schedule == sc
    # the shorthands: a list of steps, a single ramp
    assert _load("    shape: [{rate: 1kpps, for: 1s}]\n").streams[0].shape.steps[0].for_ == 1.0
    r = _load("    shape: {ramp: {from: 1kpps, to: 2kpps, over: 5s}}\n").streams[0].shape
    assert r is not None and r.duration_s == 5.0


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("    rate: 5kpps\n    shape: [{rate: 1kpps, for: 1s}]\n", "not both"),
        ("    mode: {type: burst, count: 5}\n    shape: [{rate: 1kpps, for: 1s}]\n", "continuous"),
        ("    shape: [{rate: 1kpps, for: 0s}]\n", "for"),
        ("    shape: [{rate: 1kpps}]\n", "for"),
        ("    shape: [{rate: 20Mpps, for: 1s}]\n", "line rate"),
    ],
)
def test_bad_profile_shapes_are_one_line(extra, words):
    with pytest.raises(BadInput) as e:
        _load(extra)
    (line,) = e.value.lines()
    assert line.startswith("t.yaml:") and words in line, line


BURSTS = """
ports: {p0: {interface: veth0, speed: 10G}}
streams:
  - name: b
    port: p0
    udp: {}
    size: 64
    mode: MODE
"""


def _bursts(mode: str):
    return load_profile_text(BURSTS.replace("MODE", mode), "b.yaml")


def test_bursts_at_line_rate_every_50_ms():
    prof = _bursts("{type: multi_burst, frames: 1000, every: 50ms, at: line, bursts: 4}")
    sc = compile_profile(prof).streams[0].schedule
    line = 10e9 / (8 * (64 + 20))  # 14,880,952 fps
    assert sc.pps == pytest.approx(line) and sc.burst == 1000 and sc.count == 4000
    d = DueTimes(sc)
    t = d.due(0, 4000)
    gaps = np.diff(t)
    inside = np.delete(gaps, [999, 1999, 2999])
    np.testing.assert_allclose(inside, 1 / line, rtol=1e-6)
    np.testing.assert_allclose(t[[1000, 2000, 3000]], [0.05, 0.10, 0.15], atol=1e-12)
    assert d.total() == 4000 and d.mean_pps() == pytest.approx(20_000)
    # a trial at half the load: bursts twice as far apart, still at line rate inside
    half = DueTimes(compile_profile(prof, rate_scale=0.5).streams[0].schedule)
    assert half.due(1000, 1)[0] == pytest.approx(0.1)
    assert half.mean_pps() == pytest.approx(10_000)


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("{type: multi_burst, frames: 10, bursts: 2}", "gap (10ms) or every (50ms)"),
        ("{type: multi_burst, frames: 10, gap: 1ms, every: 5ms}", "gap (10ms) or every (50ms)"),
        ("{type: multi_burst, frames: 1000, every: 50ms}", "shorter than a burst of 1,000"),
    ],
)
def test_bad_bursts_are_one_line(mode, words):
    with pytest.raises(BadInput) as e:
        _bursts(mode)
    (line,) = e.value.lines()
    assert line.startswith("b.yaml:") and words in line, line


def test_a_rate_with_line_rate_bursts_is_refused():
    text = BURSTS.replace("MODE", "{type: multi_burst, frames: 10, every: 5ms, at: line}")
    with pytest.raises(BadInput) as e:
        load_profile_text(text + "    rate: 5kpps\n", "b.yaml")
    (line,) = e.value.lines()
    assert "at the port's speed" in line
