"""What spacing the trials of a methodology report had: the share of gaps within 10 % of
the asked gap and the mean gap at the receiver, pooled over trials, worst stream.

Why: a throughput or loss figure measured with frames that left in micro-bursts is a
figure at another rate than the one asked (BASELINES.md, "Spacing at the wire"); the
reports say how the trials were spaced (tgen_tui/engine/spacing.py measures it, the trial
runner copies it into ``Trial.extra.spacing``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from tgen_tui.results.models import SpacingResult, Trial


def pooled(trials: Iterable[Trial]) -> dict[str, tuple[float | None, float | None, int]]:
    """Per stream over ``trials``: (share within 10 %, mean gap ns, gaps), gap-weighted."""
    acc: dict[str, list[float]] = {}  # name -> [gaps, gaps with a share, within, sum]
    for t in trials:
        for name, sp in (t.extra.spacing or {}).items():
            a = acc.setdefault(name, [0.0, 0.0, 0.0, 0.0])
            n = float(sp.gaps or 0)
            a[0] += n
            a[3] += n * float(sp.mean_gap_ns or 0.0)
            if sp.within_10pct is not None:
                a[1] += n
                a[2] += n * float(sp.within_10pct)
    return {
        k: (a[2] / a[1] if a[1] else None, a[3] / a[0] if a[0] else None, int(a[0]))
        for k, a in acc.items()
        if a[0]
    }


def share(trials: Iterable[Trial]) -> float | None:
    """The worst stream's share (0..1) of gaps within 10 % over ``trials``; None unknown."""
    vals = [w for w, _, _ in pooled(trials).values() if w is not None]
    return min(vals) if vals else None


def share_pct(trials: Iterable[Trial]) -> str:
    """The worst share as a table cell: '97.1', or '-'."""
    w = share(list(trials))
    return "-" if w is None else f"{100 * w:.1f}"


def spacing_text(trials: list[Trial]) -> str | None:
    """'97.1 % of gaps within 10 % of the asked gap (worst stream up, mean gap 100.2 us)'."""
    per = pooled(trials)
    known = {k: v for k, v in per.items() if v[0] is not None}
    if known:
        name, (w, mean, _) = min(known.items(), key=lambda kv: kv[1][0] or 0.0)
        return (
            f"{100 * (w or 0.0):.1f} % of gaps within 10 % of the asked gap "
            f"(worst stream {name}, mean gap {_us(mean)})"
        )
    if per:
        name, (_, mean, _) = next(iter(per.items()))
        return f"asked gap unknown; mean gap {_us(mean)} (stream {name})"
    return None


def from_snapshot(streams, names: Iterable[str]) -> dict[str, SpacingResult]:
    """The trial's record of its streams' spacing (``Trial.extra.spacing``) from the final
    snapshot's StreamStats."""
    by = {s.name: s for s in streams}
    return {
        n: SpacingResult.model_validate(dataclasses.asdict(by[n].spacing)) for n in names if n in by
    }


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f} us"


__all__ = ["from_snapshot", "pooled", "share", "share_pct", "spacing_text"]
