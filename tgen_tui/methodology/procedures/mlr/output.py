"""``tgen search``'s tables (the goals, the latency ladder), text lines and the plot of
loss ratio against load with the relevant bounds marked, from its SearchReport."""

from __future__ import annotations

from tgen_tui.methodology.kit.procedure import PathFn, Table
from tgen_tui.methodology.kit.spacing import spacing_text
from tgen_tui.results.models import GoalResult, LadderStep, SearchReport
from tgen_tui.results.plot import chart


def _n(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"


def _spec(g: GoalResult, field: str, times: float = 1.0) -> str:
    v = getattr(g.goal, field, None) if g.goal is not None else None
    return "-" if v is None else f"{times * v:g}"


def search_tables(report: SearchReport, unit: str = "fps") -> list[Table]:
    goals = report.goals
    out: list[Table] = [
        (
            f"RFC 9971 search goals ({report.load_unit}; aggregate x{report.aggregate_factor})",
            "goal",
            [g.name for g in goals],
            [
                ("loss %", [_spec(g, "loss_pct") for g in goals]),
                ("exceed", [_spec(g, "exceed_ratio") for g in goals]),
                ("trial s", [_spec(g, "final_trial_duration_s") for g in goals]),
                ("sum s", [_spec(g, "duration_sum_s") for g in goals]),
                ("width %", [_spec(g, "width", 100) for g in goals]),
                (f"RLB {unit}", [_n(g.relevant_lower_bound_pps) for g in goals]),
                (f"RUB {unit}", [_n(g.relevant_upper_bound_pps) for g in goals]),
                (f"cond. throughput {unit}", [_n(g.conditional_throughput_pps) for g in goals]),
                (
                    "result",
                    ["regular" if g.regular else f"IRREGULAR: {g.irregular}" for g in goals],
                ),
            ],
        )
    ]
    if report.ladder:
        out.append(_ladder_table(report.ladder))
    return out


def _ladder_table(ladder: list[LadderStep]) -> Table:
    """Latency at each ladder step: the worst stream's percentiles per direction."""
    dirs = sorted({d for r in ladder for d in r.latency})
    cols = []
    for d in dirs:
        for k in ("p50", "p99", "p999", "p9999", "max"):
            vals = [
                _us(getattr(r.latency[d], f"{k}_ns")) if d in r.latency else "-" for r in ladder
            ]
            cols.append((f"{d} {k} us", vals))
    return (
        "Latency ladder (worst stream per direction)",
        "step",
        [f"{r.goal or ''} {r.step}".strip() for r in ladder],
        [("rate fps", [_n(r.rate_pps) for r in ladder])] + cols,
    )


def search_lines(report: SearchReport) -> list[str]:
    """Max and min load, trials and time, the preset, irregular goals, the ladder's source."""
    out = [
        f"max load {_n(report.max_load_pps)} fps ({report.max_load_source}); min load "
        f"{_n(report.min_load_pps)} fps; {report.n_trials or 0} trials, "
        f"{report.trial_seconds or 0} s of traffic; search {report.status}"
    ]
    if report.preset:
        out.append(f"preset {report.preset}: {report.preset_definition}")
    for g in report.goals:
        if not g.regular:
            out.append(f"goal {g.name}: IRREGULAR result: {g.irregular}")
        rlb = g.relevant_lower_bound_pps
        text = spacing_text([t for t in report.trials if rlb is not None and t.rate_pps == rlb])
        if text:
            out.append(f"goal {g.name}: spacing at the RLB ({_n(rlb)} fps): {text}")
    srcs = sorted({v.source for r in report.ladder for v in r.latency.values()} - {""})
    if srcs:
        out.append(f"ladder latency source: {', '.join(srcs)}")
    return out


def search_plots(
    report: SearchReport, path: PathFn, axis: str = "load (fps per interface)"
) -> list[str]:
    trials = [t for t in report.trials if t.kind != "warmup"]
    if not trials:
        return []
    x = [t.rate_pps for t in trials]
    y = [100 * (t.loss_ratio or 0.0) for t in trials]
    top = max(y + [0.1])
    series = [("trial loss ratio (%)", x, y)]
    for g in report.goals:
        for v, tag in ((g.relevant_lower_bound_pps, "RLB"), (g.relevant_upper_bound_pps, "RUB")):
            if v is not None:
                series.append((f"{g.name} {tag}", [v, v], [0.0, top]))
    return [
        chart(
            "Trial loss ratio against load (relevant bounds marked)",
            axis,
            "loss ratio (%)",
            series,
            kind="scatter",
            path=path("loss_ratio_vs_load"),
        )
    ]
