"""Frame sizes drawn from a law (``size: {dist: lognormal, mean: 400, sigma: 0.6}``).

Why: real packet sizes are not uniform (USERS.md §4 draws them from the same laws as the
gaps). The sizes are drawn once, at compile time, as one cycle of :data:`CYCLE` sizes from
numpy's generator seeded by the stream's key, rounded to whole bytes and clipped to
``[min, max]``; the worker sends them as a repeating pattern (the IMIX mechanism), so the
law holds exactly over every cycle and no Python runs per frame. Clipping moves the mean:
:func:`clipped_mean` is the mean of the cycle, the one rates in bit/s are resolved with.
Imports: numpy only.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from tgen_tui.profiles.lawrules import DEFAULT_PARAM  # noqa: F401 - re-exported

CYCLE = 16384
SIZE_LAWS = ("exponential", "normal", "lognormal", "gamma", "weibull", "pareto")


def draw(law: str, mean: float, param: float, n: int, key: int) -> np.ndarray:
    """``n`` values drawn from ``law`` with mean ``mean`` (numpy's generator seeded by
    ``key``): sizes here, an app flow's think times (packets/appcompile.py) too."""
    rng = np.random.default_rng(key & 0xFFFFFFFFFFFFFFFF)
    if law == "exponential":
        return rng.exponential(mean, n)
    if law == "normal":
        return rng.normal(mean, param * mean, n)
    if law == "lognormal":
        return rng.lognormal(math.log(mean) - 0.5 * param * param, param, n)
    if law == "gamma":
        return rng.gamma(param, mean / param, n)
    if law == "weibull":
        return (mean / math.gamma(1.0 + 1.0 / param)) * rng.weibull(param, n)
    if law == "pareto":  # classic Pareto (numpy draws Lomax: + 1), x_m for the mean
        xm = mean * (param - 1.0) / param
        return xm * (1.0 + rng.pareto(param, n))
    raise ValueError(f"unknown size law {law!r}; expected one of {', '.join(SIZE_LAWS)}")


@functools.lru_cache(maxsize=64)
def size_cycle(law: str, mean: float, param: float, lo: int, hi: int, key: int) -> tuple[int, ...]:
    """One cycle of sizes (bytes with the FCS) drawn from ``law`` with mean ``mean``."""
    x = draw(law, mean, param, CYCLE, key)
    return tuple(int(v) for v in np.clip(np.rint(x), lo, hi))


def clipped_mean(law: str, mean: float, param: float, lo: int, hi: int, key: int = 0) -> float:
    """The mean size (bytes with the FCS) of the cycle: the law's, moved by the clipping."""
    c = size_cycle(law, mean, param, lo, hi, key)
    return sum(c) / len(c)


__all__ = ["CYCLE", "DEFAULT_PARAM", "SIZE_LAWS", "clipped_mean", "draw", "size_cycle"]
