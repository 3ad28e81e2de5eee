"""``tgen rfc9411 cps`` and ``tgen rfc9411 concurrent``: RFC 9411-style searches over a
profile's request/response (app) flows on the RFC 9971 search's machinery
(:func:`~tgen_tui.methodology.procedures.mlr.search.mlr_search`), each trial one ``tgen
run --flush-dut`` of the profile (:mod:`.cps`: the trials and what counts as a failed
connection). The report is ``tgen search``'s (goals, bounds, every trial, the loads'
classifications) in connections/s or connections, with the definition of a failed trial
and each trial's attempted, established and failed connections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.mlr import cps
from tgen_tui.methodology.procedures.mlr.goals import Goal
from tgen_tui.methodology.procedures.mlr.report import search_report
from tgen_tui.methodology.procedures.mlr.search import MlrResult, mlr_search
from tgen_tui.results.models import Trial

#: kind -> (the app load it searches, the load's unit, the report's words for it)
KINDS = {
    "cps": ("connections_per_s", "connections/s (new connections per second)", "conn/s"),
    "concurrent": ("concurrent", "connections (concurrent, held open)", "connections"),
}

#: RFC 9411 7.2.3.4 / 7.6.3.4: failed transactions and connections under 0.001 %
RFC9411_LOSS = 0.00001


@dataclass
class AppSearchConfig:
    kind: str  # cps | concurrent
    goals: list[Goal]
    min_load: float | None = None  # None: max load / 10
    max_load: float | None = None  # None: the profile's own load
    quick_text: str = ""
    trial_args: list[str] = field(default_factory=list)  # passed to every tgen run


def default_goal(trial_s: float, width: float) -> Goal:
    """One goal: at most 0.001 % of the intended connections lost (RFC 9411's criterion
    for failed connections and transactions), one full-length trial per load."""
    return Goal("failed", RFC9411_LOSS, 0.0, trial_s, trial_s, width, trial_s).check()


def base_load(prof, kind: str) -> float:
    """The profile's own load of the searched kind, over its app flows (BadInput when it
    has none)."""
    key = KINDS[kind][0]
    flows = cps.app_flows(prof, "cps" if kind == "cps" else "concurrent")
    if not flows:
        raise BadInput(
            f"{prof.name}: no app flow with load: {{{key}: N}}: tgen rfc9411 {kind} searches "
            f"the {key} target of the profile's request/response flows (transport: app:/load:)"
        )
    return float(sum(getattr(t.load, key) for t in flows))


def _deviations(prof, cfg: AppSearchConfig, settle_s: float) -> list[str]:
    out = [cfg.quick_text] if cfg.quick_text else []
    for g in cfg.goals:
        out.append(
            f"goal {g.name}: {g.final_trial_duration_s:g} s trials, {g.duration_sum_s:g} s "
            f"sum, loss ratio {100 * g.loss_ratio:g} %, exceed ratio {g.exceed_ratio:g} "
            "(RFC 9411: a sustain phase of 300 s at the load, failed under 0.001 %)"
        )
    out.append(
        "each trial is one tgen run --flush-dut (the DUT's conntrack flushed before it), "
        f"no ramp-up or ramp-down phase, {settle_s:g} s between trials"
    )
    key = KINDS[cfg.kind][0]
    others = [t.name for t in prof.transport if t.enabled and t.load and t.load.mode != (
        "cps" if cfg.kind == "cps" else "concurrent")]  # fmt: skip
    if others:
        out.append(f"app flows not scaled by the load ({key} is searched): {', '.join(others)}")
    return out


async def run_app_search(state: RunState) -> None:
    from tgen_tui.engine.cli_options import check_environment
    from tgen_tui.methodology.kit.setup import dut_control
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile

    p = state.params
    cfg: AppSearchConfig = state.body["config"]
    prof = load_profile(p.profile)
    base = base_load(prof, cfg.kind)
    max_load = cfg.max_load or base
    min_load = cfg.min_load or max_load / 10
    if min_load >= max_load:
        raise BadInput(f"--min-load {min_load:g} must be below the max load {max_load:g}")
    compiled = compile_profile(prof)
    check_environment(compiled, p.cluster)
    dut = dut_control(p, compiled)
    state.dut_settings = dut.settings() if dut else {"source": "none"}
    d = prof.model_dump(mode="json", exclude_none=True)
    state.profile_doc = {"path": p.profile, "name": prof.name, "hash": compiled.profile_hash,
                         "seed": prof.seed, "transport": d.get("transport", [])}  # fmt: skip
    state.deviations += _deviations(prof, cfg, p.settle_s)
    res = MlrResult(cfg.goals, min_load, max_load, 0.0, True)
    names = [t.name for t in cps.app_flows(prof, "cps" if cfg.kind == "cps" else "concurrent")]
    state.body |= {"mlr": res, "streams": names, "aggregate_factor": 1, "base_load": base}
    extra = list(cfg.trial_args)
    if state.progress:
        state.progress.expected = sum(8 + 2 * round(g.duration_sum_s / g.final_trial_duration_s)
                                      for g in cfg.goals)  # fmt: skip
        if cfg.kind == "concurrent":
            state.progress.unit = " conn"

    async def trial(load: float, dur: float) -> Trial:
        if cfg.kind == "cps":
            t = await cps.run_trial(Path(p.profile), base, load, dur, extra)
        else:
            t = await cps.run_concurrent_trial(Path(p.profile), load, dur, extra)
        await trio.sleep(p.settle_s)
        return t

    def done(t: Trial) -> None:
        state.trial_done(t, lr=f"{100 * (t.extra.loss_ratio or 0):.3f}%", d=f"{t.duration_s:g}s")

    await mlr_search(trial, cfg.goals, min_load=min_load, max_load=max_load, result=res,
                     on_trial=done)  # fmt: skip
    unit = KINDS[cfg.kind][2]
    for o in res.outcomes:
        state.note(
            f"{o.goal.name}: RLB {o.relevant_lower_bound_pps or 0:,.0f} RUB "
            f"{o.relevant_upper_bound_pps or 0:,.0f} {unit}"
            + (f" (irregular: {o.irregular})" if o.irregular else "")
        )


def app_search_report(state: RunState, partial: bool) -> dict[str, Any]:
    """``tgen search``'s report in the search's unit, the definition of a failed trial,
    the profile's own load, and each trial's connection counts."""
    cfg: AppSearchConfig | None = state.body.get("config")
    kind = cfg.kind if cfg else "cps"
    doc = search_report(state, partial)
    doc |= {
        "load_unit": KINDS[kind][1],
        "search_kind": kind,
        "base_load": state.body.get("base_load"),
        "failed_trial": (
            "a trial is high-loss when its loss ratio exceeds the goal's; "
            + (cps.DEFINITION if kind == "cps" else cps.CONCURRENT_DEFINITION)
        ),
    }
    return doc


def app_search_lines(report) -> list[str]:
    """The max and min load, the trials, each goal's bounds in the search's unit, what
    counted as a failed trial."""
    unit = "conn/s" if getattr(report, "search_kind", "cps") == "cps" else "connections"
    out = [
        f"max load {report.max_load_pps or 0:,.0f} {unit}, min load {report.min_load_pps or 0:,.0f}"
        f" {unit}; {report.n_trials or 0} trials, {report.trial_seconds or 0} s of traffic; "
        f"search {report.status}"
    ]
    for g in report.goals:
        out.append(
            f"goal {g.name}: RLB {_n(g.relevant_lower_bound_pps)} RUB "
            f"{_n(g.relevant_upper_bound_pps)} {unit}"
            + ("" if g.regular else f"; IRREGULAR result: {g.irregular}")
        )
    out.append(f"failed trial: {getattr(report, 'failed_trial', '')}")
    return out


def _n(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"
