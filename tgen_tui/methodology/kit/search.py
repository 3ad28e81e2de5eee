"""The binary search of RFC 2544 §26.1 / METHODOLOGY.md, and its repetition.

The search tests the maximum first ("upper bound not reached" if it passes), then halves
the interval ``(l, h]`` until ``h − l ≤ error``. It reports l (the highest passing rate)
and h (the lowest failing rate), never the last rate tried (siitperf's scripts do that,
and it can be a failing rate). An invalid trial (the sender fell behind) counts as failed
and is named as such. l is then confirmed by a full-length trial.

Everything here is pure: ``trial`` is any async callable, so the simulated DUTs of the
tests and the real lab run the same code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tgen_tui.methodology.kit.stats import summary
from tgen_tui.results.models import Search, SearchSummary, Trial

#: trial kinds: the upper-bound check, a halving step, the full-length confirmation
KINDS = ("upper_bound", "search", "confirm")

TrialFn = Callable[[float, str], Awaitable[Trial]]
ProgressFn = Callable[["SearchResult", Trial], None]


@dataclass
class SearchResult:
    """One binary search. ``l_pps`` passes, ``h_pps`` fails (None: upper bound not reached)."""

    max_rate: float
    error: float
    l_pps: float = 0.0
    h_pps: float | None = None
    status: str = "running"  # ok | upper bound not reached | no passing rate | partial
    trials: list[Trial] = field(default_factory=list)
    confirmed: bool | None = None  # the full-length trial at l passed (None: not run)

    @property
    def search_trials(self) -> int:
        """Halving trials only (ceil(log2(max/error)) of them), without the bound check."""
        return sum(1 for t in self.trials if t.kind == "search")

    def n_trials(self) -> dict[str, int]:
        """The trials by kind (halving, bound check, confirmation) and in all."""
        return {
            "search": self.search_trials,
            "upper_bound": sum(1 for t in self.trials if t.kind == "upper_bound"),
            "confirm": sum(1 for t in self.trials if t.kind == "confirm"),
            "total": len(self.trials),
        }

    def to_model(self, **kw: Any) -> Search:
        """The search in a report (``kw``: where it belongs, e.g. ``frame_size``)."""
        return Search(
            l_pps=self.l_pps,
            h_pps=self.h_pps,
            status=self.status,
            max_rate=self.max_rate,
            error=self.error,
            n_trials=self.n_trials(),
            confirmed=self.confirmed,
            trials=self.trials,
            **kw,
        )


async def binary_search(
    trial: TrialFn,
    max_rate: float,
    error: float,
    *,
    confirm: bool = True,
    result: SearchResult | None = None,
    on_trial: ProgressFn | None = None,
) -> SearchResult:
    """Search the highest passing rate in ``[0, max_rate]`` to within ``error``.

    Rates are whole numbers (frames or connections per second): the midpoint is
    ``(l + h) // 2``. Pass ``result`` to have the trials recorded into an object the
    caller already holds (so an interrupted run still reports every trial so far).
    """
    if not max_rate > 0:
        raise ValueError("max_rate must be > 0")
    if not error > 0:
        raise ValueError("error must be > 0")
    res = result or SearchResult(max_rate=max_rate, error=error)

    async def run(rate: float, kind: str) -> Trial:
        t = await trial(rate, kind)
        t.kind = kind
        res.trials.append(t)
        if on_trial:
            on_trial(res, t)
        return t

    first = await run(max_rate, "upper_bound")
    if first.passed:
        res.l_pps, res.h_pps, res.status = max_rate, None, "upper bound not reached"
    else:
        lo, hi = 0, int(max_rate)
        res.l_pps, res.h_pps = lo, hi
        while hi - lo > error:
            r = (lo + hi) // 2
            if (await run(r, "search")).passed:
                lo = r
            else:
                hi = r
            res.l_pps, res.h_pps = lo, hi
        res.status = "ok" if lo > 0 else "no passing rate"
    if confirm and res.l_pps > 0:
        res.confirmed = (await run(res.l_pps, "confirm")).passed
    return res


@dataclass
class RepeatedSearch:
    """``repeats`` searches of one quantity, and their summary."""

    name: str  # what is searched: "throughput", "cps", ...
    unit: str  # "fps", "conn/s"
    searches: list[SearchResult] = field(default_factory=list)
    partial: bool = False

    def summary(self, **kw: Any) -> SearchSummary:
        """l over the finished searches (median, min, max, p1/p99 from 10), h likewise,
        and how many did not reach the bound, passed nothing, or were not confirmed."""
        done = [s for s in self.searches if s.status in ("ok", "upper bound not reached")]
        out = summary([s.l_pps for s in done])
        out["h"] = summary([s.h_pps for s in done if s.h_pps is not None])
        out["upper_bound_not_reached"] = sum(
            s.status == "upper bound not reached" for s in self.searches
        )
        out["no_passing_rate"] = sum(s.status == "no passing rate" for s in self.searches)
        out["unconfirmed"] = sum(s.confirmed is False for s in self.searches)
        return SearchSummary.model_validate(kw | out)


async def repeated_search(
    trial: TrialFn,
    max_rate: float,
    error: float,
    repeats: int,
    *,
    record: RepeatedSearch,
    confirm: bool = True,
    on_trial: ProgressFn | None = None,
) -> RepeatedSearch:
    """Run the whole search ``repeats`` times, appending each to ``record`` as it starts."""
    for _ in range(repeats):
        s = SearchResult(max_rate=max_rate, error=error)
        record.searches.append(s)
        await binary_search(trial, max_rate, error, confirm=confirm, result=s, on_trial=on_trial)
    return record
