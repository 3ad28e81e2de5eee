"""The sweep's part of the report: one row per session count, with its searches."""

from __future__ import annotations

from tgen_tui.methodology.kit.state import RunState


def sweep_report(state: RunState, partial: bool) -> dict:
    rows = state.body.get("rows", [])
    return {
        "sweep": "sessions",
        "sessions": state.body.get("sessions", []),
        "rows": rows,
    }


def sweep_metrics(doc: dict) -> dict:
    out = {}
    for r in doc.get("rows", []):
        out[f"cps_{r['sessions']}"] = r.get("cps")
        out[f"throughput_{r['sessions']}"] = r.get("throughput")
    return out


def sweep_trials(state: RunState) -> list[dict]:
    return []
