"""The RFC 9693 procedures' part of the report (typed: CpsReport, CapacityReport,
TeardownReport): the connection rate searches, the capacity steps, the tear-down
repeats; their metrics and their trials for the store."""

from __future__ import annotations

from typing import Any

from tgen_tui.methodology.kit.documents import search_trials, trial_record
from tgen_tui.methodology.kit.search import RepeatedSearch
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.stats import summary
from tgen_tui.results.models import CapacityReport, CapacitySummary, Doc, Summary, TeardownRow


def cps_report(state: RunState, partial: bool) -> dict[str, Any]:
    """The repeated searches of the connection establishment rate, and their summary."""
    b = state.body
    if "record" not in b:
        return {}
    rec: RepeatedSearch = b["record"]
    return {
        "connections": b["connections"],
        "unique_space": b["unique_space"],
        "searches": [s.to_model() for s in rec.searches],
        "summary": rec.summary(),
    }


def cps_trials(state: RunState) -> list[Doc]:
    rec = state.body.get("record")
    return search_trials(rec, "cps") if rec is not None else []


def capacity_report(state: RunState, partial: bool) -> dict[str, Any]:
    """The capacity search's steps and its outcome."""
    cap = state.body.get("capacity")
    if cap is None:
        return {}
    return {
        "capacity": cap.to_model(),
        "summary": CapacitySummary(
            capacity=cap.capacity, h_connections=cap.h_connections, r0=cap.r0, status=cap.status
        ),
    }


def capacity_metrics(report: CapacityReport) -> dict[str, float | None]:
    return {"capacity": report.summary.capacity if report.summary is not None else None}


def capacity_trials(state: RunState) -> list[Doc]:
    cap = state.body.get("capacity")
    out: list[Doc] = []
    for st in cap.steps if cap is not None else []:
        if st.trial:
            out.append(trial_record(st.trial, connections=st.connections, phase=st.phase))
        if st.search:
            out += [
                trial_record(t, connections=st.connections, phase=st.phase)
                for t in st.search.trials
            ]
    return out


def teardown_report(state: RunState, partial: bool) -> dict[str, Any]:
    """Every repeat's timed flushes and load trial, and the rates' summary."""
    b = state.body
    if "repeats" not in b:
        return {}
    rows = b["repeats"]
    return {
        "connections": b["connections"],
        "load_rate": b["load_rate"],
        "teardown": [TeardownRow.model_validate(r) for r in rows],
        "summary": Summary.model_validate(summary([r["rate_per_s"] for r in rows])),
    }


def teardown_trials(state: RunState) -> list[Doc]:
    return [
        trial_record(r["load_trial"], repeat=r["repeat"]) for r in state.body.get("repeats", [])
    ]
