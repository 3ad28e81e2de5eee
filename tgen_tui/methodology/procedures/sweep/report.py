"""The sweep's part of the report (SweepReport): one row per session count, with its
connection-rate and throughput searches."""

from __future__ import annotations

from typing import Any

from tgen_tui.methodology.kit.search import SearchResult
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.results.models import Doc, SweepReport, SweepRow


def sweep_report(state: RunState, partial: bool) -> dict[str, Any]:
    """The rows as far as they got (an interrupted point has the fields it reached)."""
    rows = [
        SweepRow.model_validate(
            {k: (v.to_model() if isinstance(v, SearchResult) else v) for k, v in r.items()}
        )
        for r in state.body.get("rows", [])
    ]
    return {"sweep": "sessions", "sessions": state.body.get("sessions", []), "rows": rows}


def sweep_metrics(report: SweepReport) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for r in report.rows:
        out[f"cps_{r.sessions}"] = r.cps
        out[f"throughput_{r.sessions}"] = r.throughput
    return out


def sweep_trials(state: RunState) -> list[Doc]:
    return []
