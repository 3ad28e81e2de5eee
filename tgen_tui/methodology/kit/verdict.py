"""A trial's verdict: the loss a passing trial may have (:class:`LossTolerance`) and
:func:`judge`, which sets ``passed`` and ``reason`` (an invalid trial always fails)."""

from __future__ import annotations

from dataclasses import dataclass

from tgen_tui.results.models import Trial


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


def judge(t: Trial, tol: LossTolerance = LossTolerance()) -> Trial:
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
