"""Simulated DUTs with known loss curves for the multiple loss ratio search: simulated
time (a trial returns at once), seeded randomness, the same Trial as the lab's."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tgen_tui.results.models import DirectionCounts, Trial


@dataclass
class CurveDut:
    """Forwards at most ``capacity`` fps; below it loses each frame with probability
    ``floor_loss`` (a binomial draw, seeded); ``noise_sd``: each trial's capacity is drawn
    from N(capacity, sd); ``inversion``: (low, high, ratio): trials at loads in [low, high)
    lose ``ratio`` of their frames (a loss inversion: a lower load fails, a higher passes);
    ``sender_max``: the sender cannot offer more (the rest is unsent); ``degrade``:
    (n, capacity): from the n-th trial on the DUT forwards only that much (a higher load
    measured earlier stays a lower bound while a lower one becomes an upper bound)."""

    capacity: float
    floor_loss: float = 0.0
    noise_sd: float = 0.0
    inversion: tuple[float, float, float] | None = None
    sender_max: float | None = None
    degrade: tuple[int, float] | None = None
    seed: int = 1
    calls: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _lost(self, load: float, offered: int, duration: float) -> int:
        cap = self.capacity
        if self.degrade and len(self.calls) > self.degrade[0]:
            cap = self.degrade[1]
        cap = cap + (self._rng.gauss(0, self.noise_sd) if self.noise_sd else 0.0)
        lost = max(0, round((load - cap) * duration)) if load > cap else 0
        if self.floor_loss:
            # binomial draw of the remaining frames (normal approximation when large)
            n, p = offered - lost, self.floor_loss
            if n * p > 50:
                k = round(self._rng.gauss(n * p, (n * p * (1 - p)) ** 0.5))
            else:
                k = (
                    sum(1 for _ in range(n) if self._rng.random() < p)
                    if n < 200_000
                    else round(n * p)
                )
            lost += max(0, k)
        if self.inversion and self.inversion[0] <= load < self.inversion[1]:
            lost = max(lost, round(offered * self.inversion[2]))
        return min(lost, offered)

    async def __call__(self, load: float, duration: float) -> Trial:
        self.calls.append((load, duration))
        intended = round(load * duration)
        offered = intended
        if self.sender_max is not None and load > self.sender_max:
            offered = round(self.sender_max * duration)
        t = Trial(rate_pps=load, kind="search", duration_s=duration, tx_frames=offered)
        t.lost = self._lost(min(load, self.sender_max or load), offered, duration)
        t.rx_frames = offered - t.lost
        t.achieved_pps = offered / duration
        t.send_time_s = duration
        t.valid = offered == intended
        t.passed = t.valid and t.lost == 0
        if not t.valid:
            t.reason = f"invalid: the sender offered {offered:,} of {intended:,} frames"
        t.extra.directions = {
            "forward": DirectionCounts(
                intended_pps=load,
                intended_frames=intended,
                offered_frames=offered,
                received_frames=t.rx_frames,
                offered_pps=offered / duration,
                received_pps=t.rx_frames / duration,
                sender_fell_behind=offered < intended,
            )
        }
        return t
