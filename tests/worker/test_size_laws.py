"""Frame sizes drawn from a law (``size: {dist: ..., mean: ...}``): one seeded cycle,
clipped to min..max, sent as a pattern; SciPy's law as the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tgen_tui.diagnostics import BadInput
from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles import models as m
from tgen_tui.profiles.loader import load_profile_text

stats = pytest.importorskip("scipy.stats")

PROFILE = """
ports: {p0: {interface: veth0}}
streams:
  - {name: s, port: p0, udp: {}, rate: 100Mbit, size: SIZE}
"""


def _load(size: str) -> m.Profile:
    return load_profile_text(PROFILE.replace("SIZE", size), "z.yaml")


def test_lognormal_sizes_follow_the_law_between_the_clips():
    prof = _load("{dist: lognormal, mean: 400, param: 0.6, min: 64, max: 9000}")
    prog = compile_profile(prof).streams[0]
    sizes = BatchBuilder(prog).lengths(np.arange(16384)) + 4  # + FCS
    ref = stats.lognorm(0.6, scale=math.exp(math.log(400) - 0.18))
    inside = sizes[(sizes > 64) & (sizes < 9000)]
    # rounded to whole bytes: the KS distance against the law, conditioned on the clips
    lo, hi = ref.cdf(64.5), ref.cdf(8999.5)
    ks = stats.kstest(inside, lambda x: (ref.cdf(x) - lo) / (hi - lo)).statistic
    assert ks < 0.02
    assert abs(sizes.mean() - 400) < 8  # the clip at 64 B moves the mean a little
    # a bit rate is resolved with the stream's own cycle's mean (100 Mbit/s at L1)
    assert prog.schedule.pps == pytest.approx(100e6 / (8 * (sizes.mean() + 20)))
    # validate's estimate (another seed's cycle) is within 1 % of it
    assert m.size_bounds(prof.streams[0].size)[2] == pytest.approx(sizes.mean(), rel=0.01)
    # the pattern repeats: frame i and frame i + 16,384 have the same size
    again = BatchBuilder(prog).lengths(np.arange(16384, 32768)) + 4
    np.testing.assert_array_equal(again, sizes)


@pytest.mark.parametrize("law", ["exponential", "normal", "gamma", "weibull", "pareto"])
def test_each_law_draws_sizes_with_its_mean(law):
    prog = compile_profile(_load(f"{{dist: {law}, mean: 500, max: 9000}}")).streams[0]
    sizes = BatchBuilder(prog).lengths(np.arange(16384)) + 4
    assert sizes.min() >= 64 and sizes.max() <= 9000
    assert abs(sizes.mean() - 500) < 0.06 * 500, sizes.mean()  # clipping at 64 B included


@pytest.mark.parametrize(
    ("size", "words"),
    [
        ("{dist: lognormal, mean: 400, min: 900, max: 100}", "min (900) must be"),
        ("{dist: exponential, mean: 400, param: 2}", "has none"),
        ("{dist: pareto, mean: 400, param: 0.5}", "> 1"),
        ("{dist: zipf, mean: 400}", "dist"),
    ],
)
def test_bad_size_laws_are_one_line(size, words):
    with pytest.raises(BadInput) as e:
        _load(size)
    (line,) = e.value.lines()
    assert line.startswith("z.yaml:") and words in line, line
