"""The drawn inter-departure laws (gamma, weibull, lognormal, truncated cauchy) and the
IMIX presets: SciPy is the independent reference for every law and CDF."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tgen_tui.diagnostics import BadInput as ProfileError
from tgen_tui.engine.laws import gamma_p, law_cdf
from tgen_tui.engine.spacing import ks_distance
from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.program import Schedule
from tgen_tui.packets.schedule import DueTimes
from tgen_tui.profiles import models as m
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import lat_bucket

stats = pytest.importorskip("scipy.stats")
special = pytest.importorskip("scipy.special")

PPS = 20_000.0
MEAN = 1.0 / PPS


def _reference(law: str, p: float):
    """SciPy's distribution of the gaps as the schedule defines them (mean = MEAN)."""
    if law == "gamma":
        return stats.gamma(p, scale=MEAN / p).cdf
    if law == "weibull":
        return stats.weibull_min(p, scale=MEAN / math.gamma(1 + 1 / p)).cdf
    if law == "lognormal":
        return stats.lognorm(p, scale=math.exp(math.log(MEAN) - p * p / 2)).cdf
    c = stats.cauchy(loc=MEAN, scale=p * MEAN)  # truncated to 0 .. 2 MEAN
    lo, hi = c.cdf(0.0), c.cdf(2 * MEAN)
    return lambda x: (np.clip(c.cdf(x), lo, hi) - lo) / (hi - lo)


LAWS = [("gamma", 3.0), ("gamma", 0.5), ("weibull", 1.5), ("lognormal", 0.5), ("cauchy", 0.1)]


@pytest.mark.parametrize(("law", "p"), LAWS)
def test_drawn_gaps_follow_the_law_and_hold_the_mean_rate(law, p):
    d = DueTimes(Schedule(pps=PPS, idt=law, idt_params=(p,), key=7))
    t = d.due(0, 200_001)
    gaps = np.diff(t)
    assert stats.kstest(gaps, _reference(law, p)).statistic < 0.01
    # the mean-rate guarantee: 200,000 gaps are 200,000 mean gaps, to 0.05 %
    assert t[-1] == pytest.approx(200_000 * MEAN, rel=5e-4)
    # the same seed gives the same due times, in any split of the index range
    again = DueTimes(Schedule(pps=PPS, idt=law, idt_params=(p,), key=7))
    np.testing.assert_array_equal(
        np.concatenate([again.due(0, 70_000), again.due(70_000, 130_001)]), t
    )
    other = DueTimes(Schedule(pps=PPS, idt=law, idt_params=(p,), key=8)).due(0, 1000)
    assert not np.array_equal(other, t[:1000])


def test_truncated_cauchy_stays_near_its_bounds():
    gaps = np.diff(
        DueTimes(Schedule(pps=PPS, idt="cauchy", idt_params=(1.0,), key=3)).due(0, 50_000)
    )
    assert gaps.min() >= 0
    # truncated at 2 x the mean gap; the per-block mean-rate scale moves it by < 3 %
    assert gaps.max() < 2.06 * MEAN


def test_gamma_function_against_scipy():
    for a in (0.05, 0.3, 1.0, 3.0, 10.0, 200.0):
        for x in (1e-4, 0.01, 0.5, 1.0, 3.0, 10.0, 60.0, 400.0):
            assert gamma_p(a, x) == pytest.approx(special.gammainc(a, x), abs=1e-10)


@pytest.mark.parametrize(("law", "p"), LAWS)
def test_law_cdf_against_scipy(law, p):
    x = np.linspace(0, 6 * MEAN, 61)
    np.testing.assert_allclose(law_cdf(law, (p,), MEAN, x), _reference(law, p)(x), atol=1e-9)


@pytest.mark.parametrize(("law", "p"), LAWS)
def test_ks_of_the_receive_histogram(law, p):
    """The run's spacing figure: the histogram of the drawn gaps is near its own law and far
    from a constant gap's."""
    gaps_ns = (
        np.diff(DueTimes(Schedule(pps=PPS, idt=law, idt_params=(p,), key=1)).due(0, 50_001)) * 1e9
    )
    hist = np.bincount(lat_bucket(gaps_ns.astype(np.int64)), minlength=C.HIST_BUCKETS)
    assert ks_distance(hist, law, (p,), MEAN * 1e9) < 0.03
    const = np.bincount(lat_bucket(np.full(1000, int(MEAN * 1e9))), minlength=C.HIST_BUCKETS)
    assert ks_distance(const, law, (p,), MEAN * 1e9) > 0.2


PROFILE = """
ports: {p0: {interface: veth0}}
streams:
  - name: s
    port: p0
    udp: {}
    rate: {pps: 20000}
    idt: IDT
    size: SIZE
"""


def _profile(idt: str = "constant", size: str = "64") -> m.Profile:
    return load_profile_text(PROFILE.replace("IDT", idt).replace("SIZE", size), "t.yaml")


@pytest.mark.parametrize(
    ("idt", "law", "params"),
    [
        ("{dist: gamma, shape: 3}", "gamma", (3.0,)),
        ("gamma", "gamma", (2.0,)),
        ("{dist: weibull, shape: 0.7}", "weibull", (0.7,)),
        ("{dist: lognormal, sigma: 1}", "lognormal", (1.0,)),
        ("{dist: cauchy, scale: 0.2}", "cauchy", (0.2,)),
    ],
)
def test_profile_laws_compile_to_the_schedule(idt, law, params):
    prog = compile_profile(_profile(idt)).streams[0]
    assert prog.schedule.idt == law
    assert prog.schedule.idt_params == params


@pytest.mark.parametrize(
    ("idt", "field"),
    [
        ("{dist: gamma, shape: 0}", "shape"),
        ("{dist: lognormal, sigma: -1}", "sigma"),
        ("{dist: cauchy, scale: 0}", "scale"),
        ("{dist: weibull, k: 2}", "k"),
    ],
)
def test_bad_law_parameters_are_one_line(idt, field):
    with pytest.raises(ProfileError) as e:
        _profile(idt)
    text = "\n".join(e.value.lines())
    assert len(e.value.lines()) == 1
    assert "t.yaml" in text and field in text and "Traceback" not in text


@pytest.mark.parametrize("preset", sorted(m.IMIX_PRESETS))
def test_imix_presets_send_their_weights(preset):
    """100,000 frames of a preset: the count of each size is its weight's share (exact per
    cycle of the weights, so well within 1 %)."""
    prog = compile_profile(_profile(size=preset if preset != "ipv6" else "{imix: ipv6}")).streams[0]
    lengths = BatchBuilder(prog).lengths(np.arange(100_000)) + 4  # + FCS
    want: dict[int, int] = {}
    for size, w in m.IMIX_PRESETS[preset]:
        want[size] = want.get(size, 0) + w
    total = sum(want.values())
    sizes, counts = np.unique(lengths, return_counts=True)
    assert set(sizes.tolist()) == set(want)
    for size, n in zip(sizes.tolist(), counts.tolist(), strict=True):
        assert n / 100_000 == pytest.approx(want[size] / total, rel=0.01)


def test_otg_imix_is_64_570_1518():
    assert m.IMIX_PRESETS["imix"] == [(64, 7), (570, 4), (1518, 1)]
    assert _profile(size="imix").streams[0].size.imix == "imix"
    with pytest.raises(ProfileError) as e:
        _profile(size="{imix: tolly9}")
    (line,) = e.value.lines()
    assert "tolly9" in line and "tcp_imix" in line
