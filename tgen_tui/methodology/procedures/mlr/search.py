"""The RFC 9971 multiple loss ratio search, through FD.io CSIT's implementation
(PyPI ``MLRsearch``), driven by any async trial function.

``trial(load, duration)`` returns a :class:`Trial` (the lab's trial runner or a
simulated DUT); it runs in trio, while MLRsearch (synchronous) runs in a worker thread and
asks for each trial through ``trio.from_thread.run``. Everything MLRsearch decides comes
from the trials' counts: intended frames (load × duration per direction), offered (sent)
and received. Frames due but not sent count as loss unless ``unsent_is_loss`` is off.

After the search (or when it is interrupted) every goal gets its relevant lower bound
(RLB), relevant upper bound (RUB), conditional throughput and ``regular`` flag, and every
load tried its classification per goal (lower bound, upper bound, undecided).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from tgen_tui.methodology.procedures.mlr.goals import Goal
from tgen_tui.results.models import Trial

TrialFn = Callable[[float, float], Awaitable[Trial]]
OnTrial = Callable[[Trial], None]

NO_LOAD_PASSED = "no load passed"  # min load is an upper bound: no lower bound
MAX_LOAD_PASSED = "max load passed"  # max load is a lower bound: no upper bound


@dataclass
class GoalOutcome:
    goal: Goal
    relevant_lower_bound_pps: float | None = None
    relevant_upper_bound_pps: float | None = None
    conditional_throughput_pps: float | None = None
    quantile_loss_ratio: float | None = None  # the RLB's trials' loss ratio at the quantile
    regular: bool = False
    irregular: str | None = None  # NO_LOAD_PASSED | MAX_LOAD_PASSED | "search incomplete"

    def to_dict(self) -> dict:
        return {
            "name": self.goal.name,
            "goal": self.goal.to_dict(),
            "relevant_lower_bound_pps": self.relevant_lower_bound_pps,
            "relevant_upper_bound_pps": self.relevant_upper_bound_pps,
            "conditional_throughput_pps": self.conditional_throughput_pps,
            "quantile_loss_ratio": self.quantile_loss_ratio,
            "regular": self.regular,
            "irregular": self.irregular,
        }


@dataclass
class MlrResult:
    goals: list[Goal]
    min_load: float
    max_load: float
    warmup_s: float = 0.0
    unsent_is_loss: bool = True
    trials: list[Trial] = field(default_factory=list)
    outcomes: list[GoalOutcome] = field(default_factory=list)
    loads: list[dict] = field(default_factory=list)  # per load: trials, classification per goal
    status: str = "running"  # done | partial | error: ...

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "min_load_pps": self.min_load,
            "max_load_pps": self.max_load,
            "warmup_s": self.warmup_s,
            "unsent_is_loss": self.unsent_is_loss,
            "goals": [o.to_dict() for o in self.outcomes],
            "loads": self.loads,
            "n_trials": len(self.trials),
            "trial_seconds": round(sum(t.duration_s for t in self.trials), 3),
        }


def loss_counts(t: Trial, unsent_is_loss: bool = True) -> tuple[int, int, int]:
    """(intended, offered, lost) frames of a trial, all directions together. A trial
    stopped early is judged on what it had sent (its unsent frames are not the sender's)."""
    dirs = t.extra.directions or {}
    intended = sum(d.intended_frames for d in dirs.values()) if dirs else t.tx_frames
    if t.stopped_early or not unsent_is_loss:
        intended = t.tx_frames
    return intended, t.tx_frames, t.lost


def loss_ratio(t: Trial, unsent_is_loss: bool = True) -> float:
    """CSIT's trial loss ratio: (lost + |intended − offered|) / max(intended, offered)."""
    intended, offered, lost = loss_counts(t, unsent_is_loss)
    overall = max(intended, offered)
    return (abs(lost) + abs(intended - offered)) / overall if overall else 0.0


def _config(goals: list[Goal], min_load: float, max_load: float, warmup_s: float):
    from MLRsearch import Config, SearchGoal

    cfg = Config()
    cfg.goals = [
        SearchGoal(
            loss_ratio=g.loss_ratio,
            exceed_ratio=g.exceed_ratio,
            relative_width=g.width,
            initial_trial_duration=g.initial_trial_duration_s,
            final_trial_duration=g.final_trial_duration_s,
            duration_sum=g.duration_sum_s,
            fail_fast=False,  # "no load passed" is an irregular result, not an error
        )
        for g in goals
    ]
    cfg.min_load = float(min_load)  # first: each setter checks against the other
    cfg.max_load = float(max_load)
    cfg.search_duration_max = 1e9  # the search ends by its goals or by Ctrl-C
    cfg.warmup_duration = warmup_s or None
    return cfg


async def mlr_search(
    trial: TrialFn,
    goals: list[Goal],
    *,
    min_load: float,
    max_load: float,
    warmup_s: float = 0.0,
    unsent_is_loss: bool = True,
    result: MlrResult | None = None,
    on_trial: OnTrial | None = None,
) -> MlrResult:
    """Search every goal at once; fills (and returns) ``result`` as trials complete."""
    from MLRsearch import AbstractMeasurer, MeasurementResult, MultipleLossRatioSearch

    if not 0 < min_load < max_load:
        from tgen_tui.diagnostics import BadInput

        raise BadInput(
            f"--min-load {min_load:g} must be above 0 and below the max load {max_load:g} fps"
        )
    res = result or MlrResult(goals, min_load, max_load, warmup_s, unsent_is_loss)
    cfg = _config(goals, min_load, max_load, warmup_s)
    search = MultipleLossRatioSearch(cfg)

    class Measurer(AbstractMeasurer):
        def measure(self, intended_duration: float, intended_load: float):
            t = trio.from_thread.run(trial, float(intended_load), float(intended_duration))
            if warmup_s and not res.trials:
                t.kind = "warmup"
            t.extra.loss_ratio = loss_ratio(t, unsent_is_loss)
            res.trials.append(t)
            if on_trial:
                trio.from_thread.run_sync(on_trial, t)
            intended, offered, lost = loss_counts(t, unsent_is_loss)
            return MeasurementResult(
                intended_duration=intended_duration,
                intended_load=intended_load,
                offered_count=offered,
                loss_count=lost,
                intended_count=intended,
            )

    try:
        await trio.to_thread.run_sync(lambda: search.search(Measurer(), debug=lambda _: None))
        res.status = "done"
    finally:
        if res.status != "done":
            res.status = "partial"
        _conclude(search, res)
    return res


def _conclude(search, res: MlrResult) -> None:
    """Each goal's bounds, conditional throughput and regularity, and each load's
    classification, from MLRsearch's database (also after an interrupted search)."""
    database = getattr(search, "database", None)
    scaling = getattr(search, "scaling", None)
    res.outcomes = [GoalOutcome(g) for g in res.goals]
    if database is None or scaling is None:
        for o in res.outcomes:
            o.irregular = "search incomplete"
        return
    targets = [scaling.goal_to_final_target[sg] for sg in search.config.goals]
    for o, target in zip(res.outcomes, targets, strict=True):
        bounds = database.get_relevant_bounds(target=target)
        if bounds.clo is not None:
            o.relevant_lower_bound_pps = float(bounds.clo)
            q = next(iter(bounds.clo.target_to_stat.values())).pessimistic_loss_ratio
            o.quantile_loss_ratio = q
            o.conditional_throughput_pps = float(bounds.clo) * (1.0 - q)
        if bounds.chi is not None:
            o.relevant_upper_bound_pps = float(bounds.chi)
        if bounds.clo is None:
            o.irregular = NO_LOAD_PASSED if bounds.chi is not None else "search incomplete"
        elif bounds.chi is None:
            o.irregular = MAX_LOAD_PASSED
        o.regular = o.irregular is None and res.status == "done"
        if o.irregular is None and res.status != "done":
            o.irregular = "search incomplete"
    res.loads = _classify(database, targets, res)


def _classify(database, targets, res: MlrResult) -> list[dict]:
    out = []
    for stats in database.load_to_stats.values():
        load = float(stats)
        cls = {}
        for g, target in zip(res.goals, targets, strict=True):
            opt, pes = stats.estimates(target)
            cls[g.name] = (
                "lower bound" if opt and pes else ("upper bound" if not opt else "undecided")
            )
        ts = [t for t in res.trials if t.kind != "warmup" and abs(t.rate_pps - load) < 1e-6]
        out.append(
            {
                "load_pps": load,
                "trials": len(ts),
                "duration_sum_s": round(sum(t.duration_s for t in ts), 6),
                "max_loss_ratio": max((t.extra.loss_ratio or 0.0 for t in ts), default=None),
                "classification": cls,
            }
        )
    return sorted(out, key=lambda d: d["load_pps"])
