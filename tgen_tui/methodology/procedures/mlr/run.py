"""``tgen search``: the RFC 9971 search on the lab (or real ports) through the methodology
trial runner, then the latency ladder. The command puts its settings in
``state.body["config"]`` (a :class:`SearchConfig`); the report is built from the state.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from tgen_tui.methodology.kit.params import Params
from tgen_tui.methodology.kit.setup import (
    frame_sizes_of,
    load,
    make_runner,
    max_rate_for,
    preflight,
)
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.trial import TrialRunner, select_streams
from tgen_tui.methodology.kit.verdict import LossTolerance
from tgen_tui.methodology.procedures.mlr.goals import Goal
from tgen_tui.methodology.procedures.mlr.search import GoalOutcome, MlrResult, mlr_search
from tgen_tui.results.models import DirectionCounts, Trial

LADDER_PCTS = (10.0, 50.0, 90.0)


@dataclass
class SearchConfig:
    goals: list[Goal]
    preset: str | None = None
    preset_text: str = ""
    min_load: float | None = None  # None: CSIT's 9,001 fps, or max load / 10 when lower
    unsent_is_loss: bool = True
    warmup_s: float = 1.0
    ladder: bool = True
    ladder_low_pps: float = 1000.0
    quick_text: str = ""
    dut_drops: dict = field(default_factory=dict)  # issue 20's loss attribution, when it lands


def max_load_for(params: Params, compiled, size: int) -> tuple[float, str]:
    """Max Load: --max-rate, else the send rate ``tgen calibrate`` measured for the first
    port (this host, its driver), else the port's line rate at the frame size."""
    if params.max_rate:
        return float(params.max_rate), "--max-rate"
    groups = select_streams(compiled, params.direction)
    port = compiled.ports[next(iter(groups.values()))[0].port]
    try:
        from tgen_tui.calibrate import cache, iface

        drv = iface.driver(port.interface, port.netns)
        _, entry, stale = cache.lookup(drv, port.interface, port.netns)
        if entry and not stale:
            best = [
                r for r in entry.get("table", []) if r.get("tx_path") == entry["choice"]["tx_path"]
            ]
            kpps = max((float(r.get("kpps") or 0) for r in best), default=0.0)
            if kpps > 0:
                return kpps * 1000.0, f"tgen calibrate ({entry['choice']['tx_path']}, {drv})"
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    return max_rate_for(params, compiled, size), "the port's line rate"


def direction_counts(
    runner: TrialRunner, t: Trial, load: float, d: float
) -> dict[str, DirectionCounts]:
    """Per direction: intended load and frames, offered (sent) and received frames (and
    which streams are in each direction: ``t.extra.direction_streams``)."""
    streams = t.extra.streams or {}
    out = {}
    t.extra.direction_streams = {k: [p.name for p in v] for k, v in runner.groups.items()}
    for direction, progs in runner.groups.items():
        s = [streams[p.name] for p in progs if p.name in streams]
        intended = sum(x.count for x in s)
        offered = sum(x.tx_frames for x in s)
        received = sum(x.rx_frames for x in s)
        out[direction] = DirectionCounts(
            intended_pps=load,
            intended_frames=intended,
            offered_frames=offered,
            received_frames=received,
            offered_pps=round(offered / d, 1) if d else None,
            received_pps=round(received / d, 1) if d else None,
            duplicates=sum(x.duplicates for x in s),
            out_of_order=sum(x.out_of_order for x in s),
            sender_fell_behind=offered < intended and not t.stopped_early,
        )
    return out


def _deviations(state: RunState, cfg: SearchConfig, factor: int) -> list[str]:
    p = state.params
    out = []
    if cfg.quick_text:
        out.append(cfg.quick_text)
    for g in cfg.goals:
        if (g.final_trial_duration_s, g.duration_sum_s, g.loss_ratio, g.exceed_ratio) != (
            60.0,
            60.0,
            0.0,
            0.0,
        ):
            out.append(
                f"goal {g.name}: {g.final_trial_duration_s:g} s trials, {g.duration_sum_s:g} s "
                f"sum, loss ratio {100 * g.loss_ratio:g} %, exceed ratio {g.exceed_ratio:g} "
                "(RFC 2544: one 60 s trial, no loss)"
            )
        if g.initial_trial_duration_s < g.final_trial_duration_s:
            out.append(
                f"goal {g.name}: search trials from {g.initial_trial_duration_s:g} s "
                "(shorter trials only narrow the interval; bounds need full-length trials)"
            )
    out += [
        f"waits: {p.timeout_s:g} s counting after sending (RFC 2544: 2 s), {p.settle_s:g} s "
        "between trials; no learning frames before each trial (the DUT's state persists)",
        "load is per interface (each direction); the aggregate is "
        f"{factor} x the load ({p.direction})",
        "a trial is stopped early once its loss exceeds the highest goal loss ratio; its "
        "loss ratio is over the frames sent by then"
        if p.early_stop
        else "every trial runs to its end (--no-early-stop)",
        "frames due but not sent count as loss (CSIT)"
        if cfg.unsent_is_loss
        else "frames due but not sent do not count as loss (--unsent-not-loss)",
        "duplicates and reordered frames are counted per stream, not as loss; lost = "
        "sequence gaps never filled",
    ]
    if cfg.warmup_s:
        out.append(
            f"a {cfg.warmup_s:g} s warm-up trial at max load before the search (not counted)"
        )
    return out


async def run_search(state: RunState) -> None:
    p = state.params
    cfg: SearchConfig = state.body["config"]
    prof = load(p)
    size = frame_sizes_of(p, prof)[0]
    runner, compiled = make_runner(p, prof, size)
    top = max(g.loss_ratio for g in cfg.goals)
    runner.loss_tolerance = LossTolerance(percent=100 * top) if top else LossTolerance()
    longest = max(g.final_trial_duration_s for g in cfg.goals)
    state.params = dataclasses.replace(p, quick=False, search_duration_s=None)
    try:
        preflight(state, prof, compiled, longest + p.timeout_s)
    finally:
        state.params = p
    max_load, source = max_load_for(p, compiled, size)
    min_load = cfg.min_load or min(9001.0, max_load / 10)
    state.deviations += _deviations(state, cfg, len(runner.groups))
    res = MlrResult(cfg.goals, min_load, max_load, cfg.warmup_s, cfg.unsent_is_loss)
    state.body |= {
        "mlr": res,
        "frame_size": size,
        "max_load_source": source,
        "aggregate_factor": len(runner.groups),
        "streams": runner.stream_names,
    }

    if state.progress:  # a rough estimate for the bar: each goal's two bounds, a few steps
        state.progress.expected = sum(
            2 * math.ceil(g.duration_sum_s / g.final_trial_duration_s) + 4 for g in cfg.goals
        ) + (4 * len(cfg.goals) if cfg.ladder else 0)

    async def trial(load: float, d: float) -> Trial:
        t = await runner.with_retries(lambda: runner.run(load, "search", duration_s=d))
        t.extra.directions = direction_counts(runner, t, load, d)
        return t

    def done(t: Trial) -> None:
        state.trial_done(t, lr=f"{100 * (t.extra.loss_ratio or 0):.3f}%", d=f"{t.duration_s:g}s")

    await mlr_search(
        trial,
        cfg.goals,
        min_load=min_load,
        max_load=max_load,
        warmup_s=cfg.warmup_s,
        unsent_is_loss=cfg.unsent_is_loss,
        result=res,
        on_trial=done,
    )
    for o in res.outcomes:
        ct = o.conditional_throughput_pps
        state.note(
            f"{o.goal.name}: RLB {o.relevant_lower_bound_pps or 0:,.0f} RUB "
            f"{o.relevant_upper_bound_pps or 0:,.0f} CT {ct or 0:,.0f} fps"
            + (f" (irregular: {o.irregular})" if o.irregular else "")
        )
    if cfg.ladder:
        await _ladder(state, runner, res, cfg)


async def _ladder(state: RunState, runner: TrialRunner, res: MlrResult, cfg: SearchConfig):
    """Latency at a low rate and at 10, 50 and 90 % of each PDR (each goal with a loss
    ratio above 0 and a conditional throughput; every goal's when none has)."""
    outs = [o for o in res.outcomes if o.conditional_throughput_pps]
    pdrs = [o for o in outs if o.goal.loss_ratio > 0] or outs
    rows: list[dict] = []
    state.body["ladder"] = rows
    if not pdrs:
        return
    d = max(o.goal.final_trial_duration_s for o in pdrs)
    steps: list[tuple[str, GoalOutcome | None, float]] = [("low", None, cfg.ladder_low_pps)]
    steps += [
        (f"{pct:g}%", o, (o.conditional_throughput_pps or 0.0) * pct / 100)
        for o in pdrs
        for pct in LADDER_PCTS
    ]
    for label, o, rate in steps:
        t = await runner.run(rate, "latency", duration_s=d, early_stop=False)
        t.extra.directions = direction_counts(runner, t, rate, d)
        rows.append(
            {
                "goal": o.goal.name if o else None,
                "step": label,
                "rate_pps": rate,
                "latency": _latency(t),
                "trial": t,
            }
        )
        state.trial_done(t, step=label, goal=o.goal.name if o else "-")


PCTS = ("min", "p50", "p99", "p999", "p9999", "max")


def _latency(t: Trial) -> dict:
    """Per direction: the worst stream's percentiles (ns) and the latency source."""
    streams = t.extra.streams or {}
    out = {}
    for direction in t.extra.directions or {}:
        names = set((t.extra.direction_streams or {}).get(direction, ()))
        ss = [s for n, s in streams.items() if n in names]
        lat = {k: _worst([getattr(s.latency_ns, k) for s in ss]) for k in PCTS}
        srcs = sorted({s.latency_source for s in ss if s.latency_source})
        out[direction] = {f"{k}_ns": v for k, v in lat.items()} | {"source": ", ".join(srcs)}
    return out


def _worst(vals: list) -> float | None:
    v = [x for x in vals if x is not None]
    return max(v) if v else None
