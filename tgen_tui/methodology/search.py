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
from dataclasses import asdict, dataclass, field

from tgen_tui.methodology.stats import summary

#: trial kinds: the upper-bound check, a halving step, the full-length confirmation
KINDS = ("upper_bound", "search", "confirm")


@dataclass
class TrialResult:
    """One trial: what was asked, what the sender did, what arrived, and the verdict."""

    rate_pps: float  # requested rate (per direction, or connections/s for stateful trials)
    kind: str = "search"
    passed: bool = False
    valid: bool = True  # False: the sender fell behind (sending took > duration × (1 + tol))
    reason: str = ""  # why it failed, in words ("lost 3 frames", "invalid: sender late ...")
    duration_s: float = 0.0
    tx_frames: int = 0
    rx_frames: int = 0
    lost: int = 0
    achieved_pps: float = 0.0
    send_time_s: float | None = None
    stopped_early: bool = False
    extra: dict = field(default_factory=dict)  # per-stream counts, latency, conntrack, ...

    @property
    def loss_pct(self) -> float:
        return 100.0 * self.lost / self.tx_frames if self.tx_frames else 0.0

    @property
    def verdict(self) -> str:
        if self.passed:
            return "pass"
        return "invalid" if not self.valid else "fail"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict
        d["loss_pct"] = self.loss_pct
        return d


@dataclass(frozen=True)
class LossTolerance:
    """Frames a passing trial may lose: 0 by default (RFC 2544); a non-zero tolerance is a
    deviation and the report says so. ``frames`` is absolute, ``percent`` of frames sent."""

    frames: int = 0
    percent: float = 0.0

    @property
    def is_zero(self) -> bool:
        return self.frames == 0 and self.percent == 0.0

    def allows(self, lost: int, sent: int) -> bool:
        if self.frames:
            return lost <= self.frames
        if self.percent:
            return sent > 0 and 100.0 * lost / sent <= self.percent
        return lost == 0

    def text(self) -> str:
        if self.is_zero:
            return "0 frames"
        return f"{self.frames} frames" if self.frames else f"{self.percent:g} %"


def judge(t: TrialResult, tol: LossTolerance = LossTolerance()) -> TrialResult:
    """Set ``passed`` and ``reason``: invalid trials fail; otherwise loss within ``tol``."""
    if not t.valid:
        t.passed = False
        t.reason = t.reason or "invalid: the sender fell behind"
        if not t.reason.startswith("invalid"):
            t.reason = "invalid: " + t.reason
        return t
    if t.tx_frames == 0:
        t.passed, t.reason = False, "nothing was sent"
        return t
    ok = tol.allows(t.lost, t.tx_frames)
    t.passed = ok and not t.reason
    if not ok and not t.reason:
        t.reason = f"lost {t.lost:,} of {t.tx_frames:,} frames"
    return t


TrialFn = Callable[[float, str], Awaitable[TrialResult]]
ProgressFn = Callable[["SearchResult", TrialResult], None]


@dataclass
class SearchResult:
    """One binary search. ``l_pps`` passes, ``h_pps`` fails (None: upper bound not reached)."""

    max_rate: float
    error: float
    l_pps: float = 0.0
    h_pps: float | None = None
    status: str = "running"  # ok | upper bound not reached | no passing rate | partial
    trials: list[TrialResult] = field(default_factory=list)
    confirmed: bool | None = None  # the full-length trial at l passed (None: not run)

    @property
    def search_trials(self) -> int:
        """Halving trials only (ceil(log2(max/error)) of them), without the bound check."""
        return sum(1 for t in self.trials if t.kind == "search")

    def to_dict(self) -> dict:
        return {
            "l_pps": self.l_pps,
            "h_pps": self.h_pps,
            "status": self.status,
            "max_rate": self.max_rate,
            "error": self.error,
            "n_trials": {
                "search": self.search_trials,
                "upper_bound": sum(1 for t in self.trials if t.kind == "upper_bound"),
                "confirm": sum(1 for t in self.trials if t.kind == "confirm"),
                "total": len(self.trials),
            },
            "confirmed": self.confirmed,
            "trials": [t.to_dict() for t in self.trials],
        }


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

    async def run(rate: float, kind: str) -> TrialResult:
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

    def summary(self) -> dict:
        done = [s for s in self.searches if s.status in ("ok", "upper bound not reached")]
        out = summary([s.l_pps for s in done])
        out["h"] = summary([s.h_pps for s in done if s.h_pps is not None])
        out["upper_bound_not_reached"] = sum(
            s.status == "upper bound not reached" for s in self.searches
        )
        out["no_passing_rate"] = sum(s.status == "no passing rate" for s in self.searches)
        out["unconfirmed"] = sum(s.confirmed is False for s in self.searches)
        return out

    def to_dict(self) -> dict:
        return {
            "searches": [s.to_dict() for s in self.searches],
            "summary": self.summary(),
        }


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
