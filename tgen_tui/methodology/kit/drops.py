"""Loss attribution in methodology: each trial records its streams' loss causes and the
drop counters that moved (from the trial's final snapshot), and every report carries an
NFVbench-style table of drops per interface and per counter, summed over its trials.

Trial record (``extra``): ``loss_causes`` ``{stream: [LossCauseResult]}``,
``loss_unexplained`` ``{stream: frames}``, ``drops`` ``[DropCounter]`` (the counters that
moved, DUT and tester).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.results.models import DropCounter, LossCauseResult, Trial, TrialExtra


def trial_fields(extra: TrialExtra, final: StatsSnapshot, streams: list[str]) -> None:
    """Record in ``extra`` what a trial knows of its loss's causes (see the module doc)."""
    mine = [s for s in final.streams if s.name in streams]
    extra.loss_causes = {
        s.name: [LossCauseResult.model_validate(asdict(c)) for c in s.loss_causes] for s in mine
    }
    extra.loss_unexplained = {s.name: s.loss_unexplained for s in mine}
    if final.dut is not None:
        extra.drops = [
            DropCounter(
                where=r.where,
                counter=r.counter,
                cause=r.cause,
                frames=r.frames,
                matched=r.matched if r.loss_cause else None,
                excess=r.excess if r.loss_cause else None,
            )
            for r in final.dut.counters
            if r.frames
        ]


def drops_summary(trials: Iterable[Trial]) -> list[DropCounter]:
    """Each (where, counter) summed over the trials that recorded it."""
    acc: dict[tuple[str, str], DropCounter] = {}
    for t in trials:
        for r in t.extra.drops or []:
            a = acc.setdefault(
                (r.where, r.counter),
                DropCounter(where=r.where, counter=r.counter, cause=r.cause, frames=0,
                            matched=None, excess=None, trials=0),
            )  # fmt: skip
            a.frames += r.frames
            a.trials = (a.trials or 0) + 1
            if r.matched is not None:
                a.matched = (a.matched or 0) + r.matched
            if r.excess is not None:
                a.excess = (a.excess or 0) + r.excess
    return sorted(acc.values(), key=lambda a: (a.where, -a.frames))


def unexplained_total(trials: Iterable[Trial]) -> int:
    """Lost frames no counter explained, over every trial."""
    return sum(sum((t.extra.loss_unexplained or {}).values()) for t in trials)


def drops_table(report: Any) -> list[tuple]:
    """The report's drops table (title, header, columns, rows); none when nothing dropped
    (``report``: a methodology report, its ``drops`` and ``loss_unexplained``)."""
    rows = getattr(report, "drops", None) or []
    if not rows:
        return []
    cols = ["frames", "matched to loss", "excess", "trials"]
    body = [(f"{r.where}: {r.counter}", [r.frames, r.matched, r.excess, r.trials]) for r in rows]
    body.append(
        (
            "unexplained loss (no counter)",
            [getattr(report, "loss_unexplained", None), None, None, None],
        )
    )
    return [("Drops per interface and counter (all trials)", "where: counter", cols, body)]
