"""Simulated DUTs: fast, root-free stand-ins that the algorithm tests run against.

Each is an async ``trial(rate, kind)`` returning a judged :class:`Trial`, like the
real runner. They model the three ways a trial fails: the DUT drops frames above a
capacity (optionally noisy), the sender cannot keep the rate (the trial is invalid), and
a state table of fixed size with early drop does not fill (RFC 9693).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tgen_tui.methodology.kit.verdict import LossTolerance, judge
from tgen_tui.results.models import Trial


@dataclass
class RateDut:
    """Loses ``(rate − capacity) × duration`` frames above ``capacity`` fps.

    ``noise_sd``: the capacity of each trial is drawn from N(capacity, sd) (seeded).
    ``sender_max``: above it the sender falls behind, so the trial is invalid.
    ``lose_one_above``: lose exactly one frame above this rate (the 'one frame' case).
    """

    capacity: float
    duration_s: float = 1.0
    noise_sd: float = 0.0
    sender_max: float | None = None
    lose_one_above: float | None = None
    seed: int = 1
    tolerance: LossTolerance = field(default_factory=LossTolerance)
    calls: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def __call__(self, rate: float, kind: str = "search") -> Trial:
        self.calls.append(rate)
        cap = self.capacity + (self._rng.gauss(0, self.noise_sd) if self.noise_sd else 0.0)
        tx = round(rate * self.duration_s)
        t = Trial(rate_pps=rate, kind=kind, duration_s=self.duration_s, tx_frames=tx)
        if self.sender_max is not None and rate > self.sender_max:
            t.valid = False
            t.achieved_pps = self.sender_max
            t.send_time_s = tx / self.sender_max
            t.reason = (
                f"invalid: sending took {t.send_time_s:.3f} s for a {self.duration_s:g} s trial"
            )
        else:
            t.achieved_pps = rate
            t.send_time_s = self.duration_s
        lost = max(0, round((rate - cap) * self.duration_s)) if rate > cap else 0
        if self.lose_one_above is not None and rate > self.lose_one_above:
            lost = max(lost, 1)
        t.lost = min(lost, tx)
        t.rx_frames = tx - t.lost
        return judge(t, self.tolerance)


@dataclass
class TableDut:
    """A NAT with a state table of ``size`` entries and early drop, and a maximum
    connection establishment rate ``cps``.

    A cps trial sends ``n`` frames with unique tuples at ``rate``. Above ``cps`` frames are
    dropped. When the table is full, early drop evicts an unreplied entry for each new one,
    so every frame still passes but the table holds only ``size``: the trial fails with
    "failed to fill the state table" because the entry count rose by less than n.
    """

    size: int
    cps: float
    calls: list[tuple[int, float]] = field(default_factory=list)

    async def trial(self, n: int, rate: float, kind: str = "search") -> Trial:
        self.calls.append((n, rate))
        t = Trial(rate_pps=rate, kind=kind, duration_s=n / rate, tx_frames=n)
        t.achieved_pps = rate
        lost = 0 if rate <= self.cps else round(n * (rate - self.cps) / rate)
        t.lost, t.rx_frames = lost, n - lost
        rise = min(t.rx_frames, self.size)
        t.extra.conntrack_rise = rise
        if t.lost == 0 and rise < n:
            t.reason = f"failed to fill the state table: conntrack rose by {rise:,} of {n:,}"
        return judge(t)
