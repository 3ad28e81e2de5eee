"""Loss attribution in methodology: each trial records its streams' loss causes and the
drop counters that moved (from the trial's final snapshot), and every report carries an
NFVbench-style table of drops per interface and per counter, summed over its trials.

Trial record (``extra``): ``loss_causes`` ``{stream: [LossCauseResult]}``,
``loss_unexplained`` ``{stream: frames}``, ``drops`` ``[DropCounter]`` (the counters that
moved, DUT and tester).
"""

from __future__ import annotations

from dataclasses import asdict

from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.results.models import DropCounter, LossCauseResult, TrialExtra


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


def drops_summary(trials: list[dict]) -> list[dict]:
    """Each (where, counter) summed over the trials that recorded it."""
    acc: dict[tuple[str, str], dict] = {}
    for t in trials:
        extra = t.get("extra") if isinstance(t, dict) else None
        for r in (extra or {}).get("drops") or []:
            key = (r.get("where", "?"), r.get("counter", "?"))
            a = acc.setdefault(
                key,
                {"where": key[0], "counter": key[1], "cause": r.get("cause"), "frames": 0,
                 "matched": None, "excess": None, "trials": 0},
            )  # fmt: skip
            a["frames"] += int(r.get("frames") or 0)
            a["trials"] += 1
            for k in ("matched", "excess"):
                if r.get(k) is not None:
                    a[k] = (a[k] or 0) + int(r[k])
    return sorted(acc.values(), key=lambda a: (a["where"], -a["frames"]))


def unexplained_total(trials: list[dict]) -> int:
    """Lost frames no counter explained, over every trial."""
    n = 0
    for t in trials:
        extra = t.get("extra") if isinstance(t, dict) else None
        n += sum(int(v or 0) for v in ((extra or {}).get("loss_unexplained") or {}).values())
    return n


def drops_table(doc: dict) -> list[tuple]:
    """The report's drops table (title, header, columns, rows); none when nothing dropped."""
    rows = doc.get("drops") or []
    if not rows:
        return []
    cols = ["frames", "matched to loss", "excess", "trials"]
    body = [
        (f"{r['where']}: {r['counter']}", [r["frames"], r["matched"], r["excess"], r["trials"]])
        for r in rows
    ]
    body.append(("unexplained loss (no counter)", [doc.get("loss_unexplained"), None, None, None]))
    return [("Drops per interface and counter (all trials)", "where: counter", cols, body)]
