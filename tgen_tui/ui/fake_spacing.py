"""The fake's receive spacing: the rx row's inter-arrival counters, as functions of the
frames received (so they are exact and deterministic, like the fake's latency).

Gaps cycle through a fixed pattern of factors of the asked gap: for a constant stream 97
of 100 gaps within ±7 % of it and 3 off (two back-to-back frames and a late one; the
factors sum to 100, so the mean gap is the asked one); for a random law, 100 quantiles
of an exponential with mean 1 in a fixed order.
"""

from __future__ import annotations

import numpy as np

from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import lat_bucket

IAT_N = 100


def _factors(law: str) -> np.ndarray:
    if law == "constant":
        f = np.linspace(0.93, 1.07, IAT_N - 3)
        f = np.concatenate((f, [0.02, 0.02, 2.96]))
    else:
        f = -np.log1p(-(np.arange(IAT_N) + 0.5) / IAT_N)
        f = f / f.mean()
    return f[(np.arange(IAT_N) * 37) % IAT_N]  # a fixed permutation (37 is prime to 100)


_FACTORS = {law: _factors(law) for law in ("constant", "random")}


def write_iat(row: np.ndarray, frames: int, pps: float, law: str) -> None:
    """The inter-arrival slots of an rx row after ``frames`` frames at ``pps``."""
    gaps = max(0, frames - 1)
    asked = round(1e9 / pps) if pps > 0 else 0
    f = _FACTORS["constant" if law == "constant" else "random"]
    g = np.rint(f * asked).astype(np.int64)
    q, r = divmod(gaps, IAT_N)
    part = g[:r]
    err = np.abs(g - asked)
    within = err * 10 <= asked
    row[C.R_IAT_COUNT] = gaps
    row[C.R_IAT_SUM] = q * int(g.sum()) + int(part.sum())
    row[C.R_IAT_ASKED_COUNT] = gaps if asked else 0
    row[C.R_IAT_ABS_ERR] = (q * int(err.sum()) + int(err[:r].sum())) if asked else 0
    row[C.R_IAT_WITHIN] = (q * int(within.sum()) + int(within[:r].sum())) if asked else 0
    row[C.R_IAT_ASKED] = asked
    b = lat_bucket(g)
    full = np.bincount(b, minlength=C.HIST_BUCKETS)
    row[C.R_IAT_HIST : C.R_HIST] = q * full + np.bincount(b[:r], minlength=C.HIST_BUCKETS)
