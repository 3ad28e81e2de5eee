"""The procedures of METHODOLOGY.md over an abstract trial: frame loss stepping, RFC 8219
latency figures (TL/WCL with the penalty rule), PDV, and the RFC 9693 capacity search.

Nothing here touches the engine: the real runner and the simulated DUTs plug in the same
trial callables.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tgen_tui.methodology.search import SearchResult, TrialResult
from tgen_tui.methodology.stats import nearest_rank

# ---------------------------------------------------------------------------- frame loss


@dataclass
class LossPoint:
    load_pct: float  # offered load, % of the maximum frame rate
    rate_pps: float
    trial: TrialResult

    def to_dict(self) -> dict:
        return {
            "load_pct": self.load_pct,
            "rate_pps": self.rate_pps,
            "flr_pct": self.trial.loss_pct,
            "trial": self.trial.to_dict(),
        }


def flr_pct(sent: int, received: int) -> float:
    """RFC 2544 frame loss rate: ``(sent − received) × 100 / sent``."""
    return (sent - received) * 100.0 / sent if sent else 0.0


async def frame_loss(
    trial: Callable[[float, str], Awaitable[TrialResult]],
    max_rate: float,
    *,
    step_pct: float = 10.0,
    points: list[LossPoint] | None = None,
) -> list[LossPoint]:
    """Offered load from 100 % down in steps of ``step_pct`` (at most 10), until two
    successive trials lose nothing (or the load reaches 0)."""
    if not 0 < step_pct <= 10:
        raise ValueError("the frame-loss step must be in (0, 10] %")
    out = points if points is not None else []
    clean = 0
    k = 0
    while True:
        load = 100.0 - k * step_pct
        if load <= 1e-9:
            break
        rate = max(1, round(max_rate * load / 100.0))
        t = await trial(rate, "loss")
        out.append(LossPoint(load, rate, t))
        clean = clean + 1 if (t.tx_frames > 0 and t.lost == 0 and t.valid) else 0
        if clean >= 2:
            break
        k += 1
    return out


# ---------------------------------------------------------------------------- latency


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


# ---------------------------------------------------------------------------- RFC 9693 capacity

CpsSearch = Callable[[int], Awaitable[SearchResult]]
CpsTrial = Callable[[int, float], Awaitable[TrialResult]]


@dataclass
class CapacityStep:
    phase: str  # "R0", "halve", "double", "search"
    connections: int
    rate: float  # the rate tested (β·R0 or γ·R0), or R0 for the R0 search
    passed: bool
    trial: TrialResult | None = None
    search: SearchResult | None = None

    def to_dict(self) -> dict:
        return {
            "phase": self.phase,
            "connections": self.connections,
            "rate": self.rate,
            "passed": self.passed,
            "trial": self.trial.to_dict() if self.trial else None,
            "search": self.search.to_dict() if self.search else None,
        }


@dataclass
class CapacityResult:
    c0: int
    beta: float
    gamma: float
    error: int
    r0: float = 0.0
    c0_used: int = 0
    capacity: int | None = None  # highest table size that passed
    h_connections: int | None = None  # lowest that failed
    status: str = "running"
    steps: list[CapacityStep] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "capacity": self.capacity,
            "h_connections": self.h_connections,
            "r0": self.r0,
            "c0": self.c0,
            "c0_used": self.c0_used,
            "beta": self.beta,
            "gamma": self.gamma,
            "error": self.error,
            "status": self.status,
            "steps": [s.to_dict() for s in self.steps],
        }


async def capacity_search(
    cps_search: CpsSearch,
    cps_trial: CpsTrial,
    *,
    c0: int,
    beta: float = 0.2,
    gamma: float = 0.4,
    error: int = 1000,
    max_doublings: int = 30,
    result: CapacityResult | None = None,
) -> CapacityResult:
    """RFC 9693 conntrack table capacity.

    R0 is the maximum connection establishment rate with C0 connections (if nothing passes
    with C0, C0 is halved until something does: a deviation the report names). Then C is
    doubled while a trial at β·R0 with C connections passes, and binary-searched between
    the last good and the first bad size with trials at γ·R0 until the width is ≤ E.
    "The rate at C stays above x·R0" is tested as one trial at x·R0: the search is
    monotonic in rate, so a pass there means the maximum rate at C is at least x·R0.
    """
    res = result or CapacityResult(c0=c0, beta=beta, gamma=gamma, error=error)
    c = c0
    while True:
        s = await cps_search(c)
        res.steps.append(
            CapacityStep("R0" if c == c0 else "halve", c, s.l_pps, s.l_pps > 0, search=s)
        )
        if s.l_pps > 0:
            break
        if c // 2 < max(1, error):
            res.status = "no rate passed even with few connections"
            return res
        c //= 2
    res.r0, res.c0_used = s.l_pps, c
    good, bad = c, None
    for _ in range(max_doublings):
        n = good * 2
        rate = max(1.0, math.floor(beta * res.r0))
        t = await cps_trial(n, rate)
        res.steps.append(CapacityStep("double", n, rate, t.passed, trial=t))
        if t.passed:
            good = n
        else:
            bad = n
            break
    if bad is None:
        res.capacity, res.status = good, "upper bound not reached"
        return res
    rate = max(1.0, math.floor(gamma * res.r0))
    while bad - good > error:
        mid = (good + bad) // 2
        t = await cps_trial(mid, rate)
        res.steps.append(CapacityStep("search", mid, rate, t.passed, trial=t))
        if t.passed:
            good = mid
        else:
            bad = mid
    res.capacity, res.h_connections, res.status = good, bad, "ok"
    return res


def relative_scaleup(rates: dict[int, float | None]) -> dict[int, float | None]:
    """``rate_k / (k × rate_1)`` for each core count k (None where a rate is missing)."""
    r1 = rates.get(1)
    return {k: (None if (r is None or not r1) else r / (k * r1)) for k, r in sorted(rates.items())}
