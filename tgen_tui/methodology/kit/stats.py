"""Summary statistics of repeated searches: median, min, max, and nearest-rank percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: p1 and p99 are reported only with at least this many runs (with fewer, nearest rank
#: makes them equal to min and max, which says nothing new).
MIN_RUNS_FOR_PERCENTILES = 10


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile: ``sorted[ceil(q·n) − 1]`` (RFC 8219's 99.9th rule)."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {q}")
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def median(values: Sequence[float]) -> float:
    """The ordinary median (mean of the two middle values for an even count)."""
    if not values:
        raise ValueError("no values")
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def summary(values: Sequence[float | None]) -> dict:
    """``{n, median, min, max[, p1, p99]}`` over the values that are not None."""
    vals = [float(v) for v in values if v is not None]
    out: dict = {"n": len(vals)}
    if not vals:
        return out | {"median": None, "min": None, "max": None}
    out |= {"median": median(vals), "min": min(vals), "max": max(vals)}
    if len(vals) >= MIN_RUNS_FOR_PERCENTILES:
        out |= {"p1": nearest_rank(vals, 0.01), "p99": nearest_rank(vals, 0.99)}
    return out
