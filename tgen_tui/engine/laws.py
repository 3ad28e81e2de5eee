"""The inter-departure laws' distribution functions, for the Kolmogorov-Smirnov check.

Why: a law that the wire does not show is not a law. The receiving worker histograms the
gaps between a stream's frames; :func:`tgen_tui.engine.spacing.ks_distance` compares that
histogram with the CDF here, at the histogram's bucket edges (a few hundred points, so
plain ``math`` is fast enough). Each CDF is of the gaps exactly as
:mod:`tgen_tui.packets.schedule` draws them, with mean ``mean_ns`` (the asked gap) and the
law's parameter (:data:`~tgen_tui.packets.schedule.IDT_DEFAULTS` when none is given).

The regularised incomplete gamma function is the usual pair (a series below ``a + 1``, a
continued fraction above), written here rather than taking SciPy as a dependency of the
engine for one function; the tests check it against SciPy.
"""

from __future__ import annotations

import math

import numpy as np

from tgen_tui.packets.schedule import IDT_DEFAULTS, QUAKE3_PARTS, cauchy_bounds

_EPS = 1e-14
_MAX_TERMS = 500


def gamma_p(a: float, x: float) -> float:
    """The regularised lower incomplete gamma function P(a, x), for a > 0."""
    if x <= 0.0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:  # series: e^-x x^a / Γ(a+1) · Σ x^n / ((a+1)…(a+n))
        term = total = 1.0 / a
        ap = a
        for _ in range(_MAX_TERMS):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return min(1.0, total * math.exp(log_front))
    # continued fraction for Q(a, x) (modified Lentz)
    b = x + 1.0 - a
    c = 1.0 / 1e-300
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_TERMS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return max(0.0, 1.0 - math.exp(log_front) * h)


def law_cdf(law: str, params: tuple[float, ...], mean_ns: float, x: np.ndarray) -> np.ndarray:
    """P(gap <= x) for gaps of ``law`` with mean ``mean_ns`` (the schedule's definitions)."""
    m = float(mean_ns)
    x = np.asarray(x, dtype=np.float64)
    p = float(params[0]) if params else IDT_DEFAULTS.get(law, 0.0)
    if law == "exponential":
        return 1.0 - np.exp(-x / m)
    if law == "pareto":
        xm = m * (p - 1.0) / p
        return np.where(x < xm, 0.0, 1.0 - np.power(xm / np.maximum(x, xm), p))
    if law == "normal":
        z = (x / m - 1.0) / (p * math.sqrt(2.0))
        return 0.5 * (1.0 + np.array([math.erf(v) for v in z]))
    if law == "uniform":
        lo, hi = m * (1.0 - p), m * (1.0 + p)
        return np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    if law == "gamma":
        return np.array([gamma_p(p, v * p / m) for v in x])
    if law == "weibull":
        lam = m / math.gamma(1.0 + 1.0 / p)
        return 1.0 - np.exp(-np.power(np.maximum(x, 0.0) / lam, p))
    if law == "lognormal":
        mu = math.log(m) - 0.5 * p * p
        logs = np.log(np.maximum(x, 1e-300))
        return 0.5 * (1.0 + np.array([math.erf((v - mu) / (p * math.sqrt(2.0))) for v in logs]))
    if law == "cauchy":
        lo, hi = cauchy_bounds(p)
        f = 0.5 + np.arctan((x / m - 1.0) / p) / math.pi
        return np.clip((f - lo) / (hi - lo), 0.0, 1.0)
    if law == "quake3":
        p_exp, m_exp, m_const = QUAKE3_PARTS
        ex = 1.0 - np.exp(-np.maximum(x, 0.0) / (m * m_exp))
        return p_exp * ex + (1.0 - p_exp) * (x >= m * m_const)
    raise ValueError(f"no law {law!r}")


__all__ = ["gamma_p", "law_cdf"]
