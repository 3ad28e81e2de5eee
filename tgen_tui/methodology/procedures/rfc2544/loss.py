"""RFC 2544 frame loss rate over an abstract trial: the offered load steps down from 100 %
until two successive trials lose nothing (METHODOLOGY.md "Frame loss rate")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tgen_tui.results import models
from tgen_tui.results.models import Trial


@dataclass
class LossPoint:
    """One step of the curve: the offered load and its trial."""

    load_pct: float  # offered load, % of the maximum frame rate
    rate_pps: float
    trial: Trial

    def to_model(self) -> models.LossPoint:
        return models.LossPoint(
            load_pct=self.load_pct,
            rate_pps=self.rate_pps,
            flr_pct=self.trial.loss_pct,
            trial=self.trial,
        )


def flr_pct(sent: int, received: int) -> float:
    """RFC 2544 frame loss rate: ``(sent − received) × 100 / sent``."""
    return (sent - received) * 100.0 / sent if sent else 0.0


async def frame_loss(
    trial: Callable[[float, str], Awaitable[Trial]],
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
