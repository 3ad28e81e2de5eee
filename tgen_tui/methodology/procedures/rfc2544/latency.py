"""RFC 8219 latency figures: TL and WCL with the penalty rule for lost tagged frames, and
PDV (METHODOLOGY.md "Latency", "PDV"). Pure: the figures of one trial's counts."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tgen_tui.methodology.kit.stats import nearest_rank


def penalty_ns(duration_s: float, delay_s: float, timeout_s: float) -> float:
    """RFC 8219: a lost tagged frame counts as ``(duration − delay) + timeout``."""
    return ((duration_s - delay_s) + timeout_s) * 1e9


def tl_wcl_from_sample(latencies_ns: Sequence[float], lost: int, penalty: float) -> dict:
    """TL (median) and WCL (99.9th, nearest rank) of tagged frames, lost ones as ``penalty``."""
    sample = [float(x) for x in latencies_ns] + [penalty] * lost
    if not sample:
        return {"tl_ns": None, "wcl_ns": None, "tagged": 0, "lost_tagged": lost}
    return {
        "tl_ns": nearest_rank(sample, 0.5),
        "wcl_ns": nearest_rank(sample, 0.999),
        "tagged": len(sample),
        "lost_tagged": lost,
    }


def tl_wcl_from_percentiles(
    p50_ns: float | None, p999_ns: float | None, received: int, lost: int, penalty: float
) -> dict:
    """TL and WCL from the engine's per-stream histogram percentiles.

    The lost frames are the largest values of the sample, so a quantile whose nearest
    rank ``ceil(q·(received + lost))`` falls among them is the penalty; otherwise the
    received frames' own percentile is used (exact when nothing was lost, slightly low
    otherwise: the histogram gives percentiles, not ranks).
    """
    n = received + lost
    out: dict = {"tagged": n, "lost_tagged": lost}
    for key, q, p in (("tl_ns", 0.5, p50_ns), ("wcl_ns", 0.999, p999_ns)):
        if n == 0:
            out[key] = None
        elif math.ceil(q * n) > received:
            out[key] = penalty
        else:
            out[key] = p
    return out


def pdv_ns(min_ns: float | None, p999_ns: float | None) -> dict:
    """PDV = D99.9th − Dmin, with negative delays clamped to 0 (and counted)."""
    if min_ns is None or p999_ns is None:
        return {"pdv_ns": None, "clamped_min": False}
    lo = max(0.0, min_ns)
    return {"pdv_ns": max(0.0, p999_ns) - lo, "clamped_min": min_ns < 0}
