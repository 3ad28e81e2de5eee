"""The report of ``tgen search``: its part of the JSON document (``goals[]`` with each
goal's bounds, conditional throughput and regularity; every trial with intended, offered
and received per direction; the latency ladder) and metrics for the results store;
its tables, text lines and plot are in :mod:`.output`."""

from __future__ import annotations

from typing import Any

from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.mlr.search import MlrResult
from tgen_tui.results.models import (
    Doc,
    LadderStep,
    SearchReport,
    SearchTrial,
    Trial,
    TrialRecord,
)


def _trial(t: Trial, index: int) -> SearchTrial:
    """A search trial in the report: without its streams, with its index, its loss ratio
    and its counts per direction beside it."""
    d = t.to_doc(exclude={"extra": {"streams"}})
    d["loss_ratio"] = t.extra.loss_ratio
    d["directions"] = d["extra"].get("directions", {})
    return SearchTrial.model_validate(d | {"index": index})


def search_report(state: RunState, partial: bool) -> dict[str, Any]:
    """The goals' outcomes, every trial, the loads' classifications and the ladder."""
    b = state.body
    res: MlrResult | None = b.get("mlr")
    cfg = b.get("config")
    doc: dict[str, Any] = {
        "preset": getattr(cfg, "preset", None),
        "preset_definition": getattr(cfg, "preset_text", ""),
        "frame_size": b.get("frame_size"),
        "stream_names": b.get("streams", []),
        "load_unit": "frames/s per interface (each direction)",
        "aggregate_factor": b.get("aggregate_factor", 1),
        "max_load_source": b.get("max_load_source"),
        "dut_drops": getattr(cfg, "dut_drops", {}) or {},
    }
    if res is None:
        return doc | {"goals": [g.to_dict() for g in getattr(cfg, "goals", [])], "trials": []}
    mlr = res.to_dict()
    doc |= {k: v for k, v in mlr.items() if k != "goals"}
    doc["goals"] = mlr["goals"] or [
        {"name": g.name, "goal": g.to_dict(), "regular": False, "irregular": "search incomplete"}
        for g in res.goals
    ]
    doc["trials"] = [_trial(t, i) for i, t in enumerate(res.trials)]
    doc["ladder"] = [
        LadderStep.model_validate(
            {k: v for k, v in row.items() if k != "trial"} | {"trial": _trial(row["trial"], i)}
        )
        for i, row in enumerate(b.get("ladder", []))
    ]
    return doc


def search_metrics(report: SearchReport) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for g in report.goals:
        out[f"{g.name}_pps"] = g.conditional_throughput_pps
        out[f"{g.name}_rlb_pps"] = g.relevant_lower_bound_pps
        out[f"{g.name}_rub_pps"] = g.relevant_upper_bound_pps
    out["trials"] = report.n_trials
    return out


def search_trials(state: RunState) -> list[Doc]:
    """Every trial of the search, then the ladder's (``ladder_step``), as the store keeps
    them."""
    res: MlrResult | None = state.body.get("mlr")
    out: list[Doc] = [
        TrialRecord.model_validate(_trial(t, i).to_doc()) for i, t in enumerate(res.trials)
    ] if res else []  # fmt: skip
    for row in state.body.get("ladder", []):
        d = _trial(row["trial"], len(out)).to_doc() | {"ladder_step": row["step"]}
        out.append(TrialRecord.model_validate(d))
    return out
