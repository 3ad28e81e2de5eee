"""The RFC 9693 procedures' part of the report: the connection rate searches, the
capacity steps, the tear-down repeats; their metrics and their trials for the store."""

from __future__ import annotations

from tgen_tui.methodology.kit.documents import search_trials, trial_doc
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.stats import summary


def cps_report(state: RunState, partial: bool) -> dict:
    b = state.body
    if "record" not in b:
        return {}
    return {"connections": b["connections"], "unique_space": b["unique_space"]} | b[
        "record"
    ].to_dict()


def cps_trials(state: RunState) -> list[dict]:
    rec = state.body.get("record")
    return search_trials(rec, "cps") if rec is not None else []


def capacity_report(state: RunState, partial: bool) -> dict:
    cap = state.body.get("capacity")
    if cap is None:
        return {}
    return {
        "capacity": cap.to_dict(),
        "summary": {
            "capacity": cap.capacity,
            "h_connections": cap.h_connections,
            "r0": cap.r0,
            "status": cap.status,
        },
    }


def capacity_metrics(doc: dict) -> dict:
    return {"capacity": (doc.get("summary") or {}).get("capacity")}


def capacity_trials(state: RunState) -> list[dict]:
    cap = state.body.get("capacity")
    out: list[dict] = []
    for st in cap.steps if cap is not None else []:
        if st.trial:
            out.append(trial_doc(st.trial, connections=st.connections, phase=st.phase))
        if st.search:
            out += [
                trial_doc(t, connections=st.connections, phase=st.phase) for t in st.search.trials
            ]
    return out


def teardown_report(state: RunState, partial: bool) -> dict:
    b = state.body
    if "repeats" not in b:
        return {}
    rows = b["repeats"]
    return {
        "connections": b["connections"],
        "load_rate": b["load_rate"],
        "teardown": [
            {k: v for k, v in r.items() if k != "load_trial"}
            | {"load_trial": r["load_trial"].to_doc()}
            for r in rows
        ],
        "summary": summary([r["rate_per_s"] for r in rows]),
    }


def teardown_trials(state: RunState) -> list[dict]:
    return [trial_doc(r["load_trial"], repeat=r["repeat"]) for r in state.body.get("repeats", [])]
