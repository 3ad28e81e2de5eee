"""The RFC 2544 / RFC 8219 procedures' part of the report (typed: ThroughputReport,
LossReport, LatencyReport): the searches and their summary per frame size, the loss
curves, the latency and PDV trials; their metrics and their trials for the store."""

from __future__ import annotations

from typing import Any

from tgen_tui.methodology.kit.documents import search_trials, trial_record
from tgen_tui.methodology.kit.search import RepeatedSearch
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.stats import summary
from tgen_tui.results.models import (
    Doc,
    LatencyReport,
    LatencySize,
    LatencyTrial,
    LossCurve,
    Summary,
    ThroughputReport,
    ThroughputSize,
)


def throughput_report(state: RunState, partial: bool) -> dict[str, Any]:
    """Per frame size: the repeated searches and their summary; every search, flat."""
    per, allsearch = [], []
    for fs in state.body.get("frame_sizes", []):
        rec: RepeatedSearch = fs["record"]
        per.append(
            ThroughputSize(
                frame_size=fs["frame_size"],
                max_rate=fs["max_rate"],
                streams=fs["streams"],
                summary=rec.summary(),
                searches=[s.to_model() for s in rec.searches],
            )
        )
        allsearch += [s.to_model(frame_size=fs["frame_size"]) for s in rec.searches]
    if not per:
        return {}
    first: RepeatedSearch = state.body["frame_sizes"][0]["record"]
    return {
        "searches": allsearch,
        "summary": first.summary(frame_size=per[0].frame_size),
        "by_frame_size": per,
    }


def throughput_metrics(report: ThroughputReport) -> dict[str, float | None]:
    per = report.by_frame_size
    return {"throughput_fps": per[0].summary.median} if per else {}


def throughput_trials(state: RunState) -> list[Doc]:
    out: list[Doc] = []
    for fs in state.body.get("frame_sizes", []):
        out += search_trials(fs["record"], "throughput_fps", frame_size=fs["frame_size"])
    return out


def loss_report(state: RunState, partial: bool) -> dict[str, Any]:
    """One loss curve per frame size."""
    fss = state.body.get("frame_sizes", [])
    if not fss:
        return {}
    return {
        "frame_loss": [
            LossCurve(
                frame_size=fs["frame_size"],
                max_rate=fs["max_rate"],
                points=[pt.to_model() for pt in fs["points"]],
            )
            for fs in fss
        ]
    }


def loss_trials(state: RunState) -> list[Doc]:
    return [
        trial_record(pt.trial, frame_size=fs["frame_size"], load_pct=pt.load_pct)
        for fs in state.body.get("frame_sizes", [])
        for pt in fs["points"]
    ]


def latency_report(state: RunState, partial: bool, figures: tuple[str, ...]) -> dict[str, Any]:
    """Latency (``figures`` tl_ns, wcl_ns) or PDV (pdv_ns): trials and their summary."""
    per, summaries = [], []
    for fs in state.body.get("frame_sizes", []):
        trials = [
            LatencyTrial(repeat=tr["repeat"], figures=tr["figures"], trial=tr["trial"])
            for tr in fs["trials"]
        ]
        sums = {k: summary([getattr(t.figures, k) for t in trials]) for k in figures}
        summaries.append(sums)
        per.append(
            LatencySize(
                frame_size=fs["frame_size"],
                rate_pps=fs["rate_pps"],
                delay_s=fs["delay_s"],
                trials=trials,
                summary={k: Summary.model_validate(v) for k, v in sums.items()},
            )
        )
    if not per:
        return {}
    out: dict[str, Any] = {
        "by_frame_size": per,
        "summary": {"frame_size": per[0].frame_size} | summaries[0],
    }
    if state.body.get("throughput_searches"):
        out["throughput_searches"] = [
            x["search"].to_model(frame_size=x["frame_size"])
            for x in state.body["throughput_searches"]
        ]
    return out


def latency_metrics(report: LatencyReport) -> dict[str, float | None]:
    s = report.by_frame_size[0].summary if report.by_frame_size else {}
    return {k: v.median for k, v in s.items()}


def latency_trials(state: RunState) -> list[Doc]:
    return [
        trial_record(tr["trial"], repeat=tr["repeat"], frame_size=fs["frame_size"])
        for fs in state.body.get("frame_sizes", [])
        for tr in fs["trials"]
    ]
