"""The report of a methodology run: what every report records, plus each procedure's own
part (its ``report``, ``metrics`` and ``trials`` in :mod:`tgen_tui.methodology.registry`).

:func:`build_report` gives the typed report (:mod:`tgen_tui.results.models`), and
:func:`build_document` its JSON document; both work on an interrupted run's state.
"""

from __future__ import annotations

import dataclasses
import os
import time

from pydantic import ValidationError

from tgen_tui import __version__
from tgen_tui.methodology.drops import drops_summary, unexplained_total
from tgen_tui.methodology.run import RunState
from tgen_tui.methodology.search import RepeatedSearch, TrialResult
from tgen_tui.methodology.stats import summary
from tgen_tui.results import models
from tgen_tui.results.models import Doc

# ---------------------------------------------------------------------------- the whole


def build_report(state: RunState, *, partial: bool, signal_name: str | None = None) -> Doc:
    """The report through its test's model: the common fields (the parameters, the DUT
    settings, the seed, ...), the procedure's own part, its metrics and its trial count."""
    from tgen_tui.methodology.registry import procedure

    proc = procedure(state.test)
    own = proc.report(state, partial)
    doc = (common_fields(state, partial, signal_name) if proc.common else {}) | own
    doc["metrics"] = {k: v for k, v in proc.metrics(own).items() if v is not None}
    if proc.common:
        doc["trials_flat_count"] = len(proc.trials(state))
    try:
        return models.model_for(state.test).model_validate(doc)
    except ValidationError as e:  # a finished run is never lost to its model: say so, keep it
        doc.setdefault("warnings", []).append(f"the report does not fit its model: {e}")
        return models.LooseRecord.model_validate(doc)


def build_document(state: RunState, *, partial: bool, signal_name: str | None = None) -> dict:
    """The JSON report (see :func:`build_report`)."""
    return build_report(state, partial=partial, signal_name=signal_name).to_doc()


def flat_trials(state: RunState) -> list[dict]:
    """Every trial of the run, flat, for the results store (the procedure's ``trials``)."""
    from tgen_tui.methodology.registry import procedure

    return procedure(state.test).trials(state)


def common_fields(state: RunState, partial: bool, signal_name: str | None) -> dict:
    """What every report records: test, tester, times, profile, seed, parameters, DUT."""
    from tgen_tui.calibrate.floor import result_fields
    from tgen_tui.methodology.registry import procedure

    p = state.params
    params = dataclasses.asdict(p)
    params.pop("transport", None)  # a factory, not a parameter
    hooks = params.pop("hooks", None) and p.hooks  # the DUT hooks' runs, counted
    params["loss_tolerance"] = p.loss_tolerance.text()
    end = state.finished or time.time()
    doc: dict = {
        "test": state.test,
        "tester": f"tgen-tui {__version__}",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(state.started)),
        "duration_s": round(end - state.started, 3),
        "partial": partial,
        "quick": p.quick,
        "profile": state.profile_doc.get("name"),
        "profile_path": p.profile,
        "profile_hash": state.profile_doc.get("hash"),
        "seed": state.profile_doc.get("seed"),
        "direction": p.direction,
        "rate_unit": procedure(state.test).rate_unit,
        "parameters": params,
        "profile_detail": state.profile_doc,
        "dut": state.dut_settings,
        "environment": {"tester": os.uname().nodename, "cpus": os.cpu_count()},
        **result_fields(state.latency_sources),
        "warnings": state.warnings,
        "deviations": state.deviations,
    }
    if hooks is not None and getattr(hooks, "specs", None):
        doc["dut_hooks"] = {"runs": hooks.counts(), "records": hooks.to_doc()}
    if signal_name:
        doc["signal"] = signal_name
    trials = procedure(state.test).trials(state)
    if any((t.get("extra") or {}).get("drops") is not None for t in trials):
        doc["drops"] = drops_summary(trials)  # NFVbench-style: per interface and counter
        doc["loss_unexplained"] = unexplained_total(trials)
    return doc


# ---------------------------------------------------------------------------- trials


def _trial(t: TrialResult, **kw) -> dict:
    d = t.to_dict()
    d.get("extra", {}).pop("streams", None)
    return d | kw


def search_trials(record: RepeatedSearch, headline: str, **kw) -> list[dict]:
    """The trials of repeated searches, each with its search index (``search``), and each
    search's outcome as one more entry with a ``repeat`` index and its figures under
    ``metrics`` (l as ``headline``, h, the number of trials), so that ``tgen results
    compare``/``check`` see the spread of the repeated searches, not of the rates a
    search happened to try."""
    out: list[dict] = []
    for i, srch in enumerate(record.searches):
        out += [_trial(t, search=i, **kw) for t in srch.trials]
        if srch.status in ("ok", "upper bound not reached"):
            m = {headline: srch.l_pps, "trials": len(srch.trials)}
            if srch.h_pps is not None:
                m[headline.replace("_fps", "") + "_h"] = srch.h_pps
            out.append(
                {"repeat": i, "kind": "search_result", "status": srch.status} | kw | {"metrics": m}
            )
    return out


# ---------------------------------------------------------------------------- RFC 2544


def throughput_report(state: RunState, partial: bool) -> dict:
    per, allsearch = [], []
    for fs in state.body.get("frame_sizes", []):
        rec: RepeatedSearch = fs["record"]
        per.append(
            {
                "frame_size": fs["frame_size"],
                "max_rate": fs["max_rate"],
                "streams": fs["streams"],
                "summary": rec.summary(),
            }
            | rec.to_dict()
        )
        allsearch += [{"frame_size": fs["frame_size"]} | s.to_dict() for s in rec.searches]
    if not per:
        return {}
    return {
        "searches": allsearch,
        "summary": {"frame_size": per[0]["frame_size"]} | per[0]["summary"],
        "by_frame_size": per,
    }


def throughput_metrics(doc: dict) -> dict:
    per = doc.get("by_frame_size") or []
    return {"throughput_fps": per[0]["summary"].get("median")} if per else {}


def throughput_trials(state: RunState) -> list[dict]:
    out: list[dict] = []
    for fs in state.body.get("frame_sizes", []):
        out += search_trials(fs["record"], "throughput_fps", frame_size=fs["frame_size"])
    return out


def loss_report(state: RunState, partial: bool) -> dict:
    fss = state.body.get("frame_sizes", [])
    if not fss:
        return {}
    return {
        "frame_loss": [
            {
                "frame_size": fs["frame_size"],
                "max_rate": fs["max_rate"],
                "points": [pt.to_dict() for pt in fs["points"]],
            }
            for fs in fss
        ]
    }


def loss_trials(state: RunState) -> list[dict]:
    return [
        _trial(pt.trial, frame_size=fs["frame_size"], load_pct=pt.load_pct)
        for fs in state.body.get("frame_sizes", [])
        for pt in fs["points"]
    ]


def latency_report(state: RunState, partial: bool, figures: tuple[str, ...]) -> dict:
    """Latency (``figures`` tl_ns, wcl_ns) or PDV (pdv_ns): trials and their summary."""
    per = []
    for fs in state.body.get("frame_sizes", []):
        figs = [tr["figures"] for tr in fs["trials"]]
        per.append(
            {
                "frame_size": fs["frame_size"],
                "rate_pps": fs["rate_pps"],
                "delay_s": fs["delay_s"],
                "trials": [
                    {
                        "repeat": tr["repeat"],
                        "figures": tr["figures"],
                        "trial": tr["trial"].to_dict(),
                    }
                    for tr in fs["trials"]
                ],
                "summary": {k: summary([f[k] for f in figs]) for k in figures},
            }
        )
    if not per:
        return {}
    out = {
        "by_frame_size": per,
        "summary": {"frame_size": per[0]["frame_size"]} | per[0]["summary"],
    }
    if state.body.get("throughput_searches"):
        out["throughput_searches"] = [
            {"frame_size": x["frame_size"]} | x["search"].to_dict()
            for x in state.body["throughput_searches"]
        ]
    return out


def latency_metrics(doc: dict) -> dict:
    s = (doc.get("by_frame_size") or [{}])[0].get("summary", {})
    return {k: v.get("median") for k, v in s.items()}


def latency_trials(state: RunState) -> list[dict]:
    return [
        _trial(tr["trial"], repeat=tr["repeat"], frame_size=fs["frame_size"])
        for fs in state.body.get("frame_sizes", [])
        for tr in fs["trials"]
    ]


# ---------------------------------------------------------------------------- RFC 9693


def cps_report(state: RunState, partial: bool) -> dict:
    b = state.body
    if "record" not in b:
        return {}
    return {"connections": b["connections"], "unique_space": b["unique_space"]} | b[
        "record"
    ].to_dict()


def median_of_summary(name: str):
    """``metrics``: the median of the report's summary, as ``name``."""

    def metrics(doc: dict) -> dict:
        return {name: (doc.get("summary") or {}).get("median")}

    return metrics


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
            out.append(_trial(st.trial, connections=st.connections, phase=st.phase))
        if st.search:
            out += [_trial(t, connections=st.connections, phase=st.phase) for t in st.search.trials]
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
            | {"load_trial": r["load_trial"].to_dict()}
            for r in rows
        ],
        "summary": summary([r["rate_per_s"] for r in rows]),
    }


def teardown_trials(state: RunState) -> list[dict]:
    return [_trial(r["load_trial"], repeat=r["repeat"]) for r in state.body.get("repeats", [])]
