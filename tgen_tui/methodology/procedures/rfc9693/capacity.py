"""The RFC 9693 conntrack table capacity search over abstract trials: R0 with C0
connections, C doubled while a trial at β·R0 passes, then binary-searched with trials at
γ·R0 (METHODOLOGY.md "Conntrack table capacity"). The real runner and the simulated DUTs
plug in the same trial callables."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tgen_tui.methodology.kit.search import SearchResult
from tgen_tui.results import models
from tgen_tui.results.models import Trial

CpsSearch = Callable[[int], Awaitable[SearchResult]]
CpsTrial = Callable[[int, float], Awaitable[Trial]]


@dataclass
class CapacityStep:
    """One step of the search: the R0 search (or a halving of C0), a doubling, a bisection."""

    phase: str  # "R0", "halve", "double", "search"
    connections: int
    rate: float  # the rate tested (β·R0 or γ·R0), or R0 for the R0 search
    passed: bool
    trial: Trial | None = None
    search: SearchResult | None = None

    def to_model(self) -> models.CapacityStep:
        return models.CapacityStep(
            phase=self.phase,
            connections=self.connections,
            rate=self.rate,
            passed=self.passed,
            trial=self.trial,
            search=self.search.to_model() if self.search else None,
        )


@dataclass
class CapacityResult:
    """The capacity search as it goes: R0, the table sizes tried, the capacity found."""

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

    def to_model(self) -> models.Capacity:
        return models.Capacity(
            capacity=self.capacity,
            h_connections=self.h_connections,
            r0=self.r0,
            c0=self.c0,
            c0_used=self.c0_used,
            beta=self.beta,
            gamma=self.gamma,
            error=self.error,
            status=self.status,
            steps=[s.to_model() for s in self.steps],
        )


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
