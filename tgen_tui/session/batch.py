"""Count-limited batches: a profile's streams scaled to a rate and a number of frames.

A trial (``tgen rfc2544 ...``), a TCP handshake phase and a preflight burst all send
"N frames at rate r": each stream keeps its share of the rate (its profile rate over the
sum of its direction's), sends its share of the frames, and its schedule loses its
on/off pattern and stop time (the count ends it). A stream with a rate shape or bursts
sends the frames its schedule makes due in the trial's duration, not rate × duration.
"""

from __future__ import annotations

import dataclasses
import math

from tgen_tui.packets.program import StreamProgram
from tgen_tui.packets.schedule import DueTimes


def scaled_programs(
    groups: dict[str, list[StreamProgram]],
    rate: float,
    duration_s: float,
    *,
    count: int | None = None,
) -> list[StreamProgram]:
    """Each direction's streams share ``rate`` in proportion to their profile rates; each
    stream sends its share for ``duration_s`` (or ``count`` frames per direction)."""
    out = []
    for progs in groups.values():
        total = sum(p.schedule.pps for p in progs) or 1.0
        for p in progs:
            share = p.schedule.pps / total if total else 1.0 / len(progs)
            pps = rate * share
            sc = dataclasses.replace(
                p.schedule, pps=float(pps), count=None, stop_s=None, on_s=0.0, off_s=0.0
            )
            if count is not None:
                n = round(count * share)
            elif sc.shape or sc.burst:  # the frames its shape or bursts make due in the trial
                n = DueTimes(sc).count_until(math.nextafter(duration_s, 0.0))
            else:
                n = round(pps * duration_s)
            sc = dataclasses.replace(sc, count=max(1, n))
            out.append(dataclasses.replace(p, schedule=sc))
    return out


__all__ = ["scaled_programs"]
