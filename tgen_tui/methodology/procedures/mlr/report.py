"""The report of ``tgen search``: its part of the JSON document (``goals[]`` with each
goal's bounds, conditional throughput and regularity; every trial with intended, offered
and received per direction; the latency ladder) and metrics for the results store;
its tables, text lines and plot are in :mod:`.output`."""

from __future__ import annotations

from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.mlr.search import MlrResult
from tgen_tui.results.models import Trial


def _trial(t: Trial, index: int) -> dict:
    d = t.to_doc(exclude={"extra": {"streams"}})
    d["loss_ratio"] = t.extra.loss_ratio
    d["directions"] = d["extra"].get("directions", {})
    return d | {"index": index}


def search_report(state: RunState, partial: bool) -> dict:
    b = state.body
    res: MlrResult | None = b.get("mlr")
    cfg = b.get("config")
    doc: dict = {
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
        {k: v for k, v in row.items() if k != "trial"} | {"trial": _trial(row["trial"], i)}
        for i, row in enumerate(b.get("ladder", []))
    ]
    return doc


def search_metrics(doc: dict) -> dict:
    out: dict = {}
    for g in doc.get("goals", []):
        n = g["name"]
        out[f"{n}_pps"] = g.get("conditional_throughput_pps")
        out[f"{n}_rlb_pps"] = g.get("relevant_lower_bound_pps")
        out[f"{n}_rub_pps"] = g.get("relevant_upper_bound_pps")
    out["trials"] = doc.get("n_trials")
    return out


def search_trials(state: RunState) -> list[dict]:
    res: MlrResult | None = state.body.get("mlr")
    out = [_trial(t, i) for i, t in enumerate(res.trials)] if res else []
    for row in state.body.get("ladder", []):
        out.append(_trial(row["trial"], len(out)) | {"ladder_step": row["step"]})
    return out
