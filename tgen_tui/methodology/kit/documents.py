"""The report of a methodology run: what every report records, and a procedure's own part
(its ``report``, ``metrics`` and ``trials``: the :class:`Procedure` passed in).

:func:`build_report` gives the typed report (:mod:`tgen_tui.results.models`); it works
on an interrupted run's state. Helpers that several procedures' reports share are here
too (:func:`trial_record`, :func:`search_trials`, :func:`median_of_summary`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from pydantic import ValidationError

from tgen_tui import __version__
from tgen_tui.methodology.kit.drops import drops_summary, unexplained_total
from tgen_tui.methodology.kit.procedure import Procedure
from tgen_tui.methodology.kit.search import RepeatedSearch
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.results import models
from tgen_tui.results.models import Doc, Report, ScaleupReport, SearchOutcome, Trial, TrialRecord

# ---------------------------------------------------------------------------- the whole


def build_report(
    state: RunState, proc: Procedure[Any], *, partial: bool, signal_name: str | None = None
) -> Report | ScaleupReport:
    """The report through its test's model: the common fields (the parameters, the DUT
    settings, the seed, ...), the procedure's own part, its metrics and its trial count."""
    fields = (common_fields(state, proc, partial, signal_name) if proc.common else {}) | (
        proc.report(state, partial)
    )
    model = models.model_for(state.test)
    assert issubclass(model, Report | ScaleupReport), state.test
    try:
        report: Report | ScaleupReport = model.model_validate(fields)
    except ValidationError as e:  # a finished run is never lost to its model: say so, keep it
        fields.setdefault("warnings", []).append(f"the report does not fit its model: {e}")
        report = model.model_construct(**fields)
    report.metrics = {k: v for k, v in proc.metrics(report).items() if v is not None}
    if proc.common and isinstance(report, Report):
        report.trials_flat_count = len(proc.trials(state))
    return report


def common_fields(
    state: RunState, proc: Procedure[Any], partial: bool, signal_name: str | None
) -> dict[str, Any]:
    """What every report records: test, tester, times, profile, seed, parameters, DUT."""
    from tgen_tui.calibrate.floor import result_fields

    p = state.params
    params = dataclasses.asdict(p)
    params.pop("transport", None)  # a factory, not a parameter
    hooks = params.pop("hooks", None) and p.hooks  # the DUT hooks' runs, counted
    params["loss_tolerance"] = p.loss_tolerance.text()
    end = state.finished or time.time()
    doc: dict[str, Any] = {
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
        "rate_unit": proc.rate_unit,
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
    trials = [t for t in proc.trials(state) if isinstance(t, Trial)]
    if any(t.extra.drops is not None for t in trials):
        doc["drops"] = drops_summary(trials)  # NFVbench-style: per interface and counter
        doc["loss_unexplained"] = unexplained_total(trials)
    return doc


# ---------------------------------------------------------------------------- trials


def trial_record(t: Trial, **where: Any) -> TrialRecord:
    """A trial as the store keeps it: without its per-stream counts, with ``where`` it
    belongs (search, frame_size, ...)."""
    return TrialRecord.model_validate(t.to_doc(exclude={"extra": {"streams"}}) | where)


def search_trials(record: RepeatedSearch, headline: str, **where: Any) -> list[Doc]:
    """The trials of repeated searches, each with its search index (``search``), and each
    search's outcome as one more entry with a ``repeat`` index and its figures under
    ``metrics`` (l as ``headline``, h, the number of trials), so that ``tgen results
    compare``/``check`` see the spread of the repeated searches, not of the rates a
    search happened to try."""
    out: list[Doc] = []
    for i, srch in enumerate(record.searches):
        out += [trial_record(t, search=i, **where) for t in srch.trials]
        if srch.status in ("ok", "upper bound not reached"):
            m = {headline: srch.l_pps, "trials": len(srch.trials)}
            if srch.h_pps is not None:
                m[headline.replace("_fps", "") + "_h"] = srch.h_pps
            out.append(
                SearchOutcome.model_validate(
                    {"repeat": i, "kind": "search_result", "status": srch.status}
                    | where
                    | {"metrics": m}
                )
            )
    return out


def median_of_summary(name: str):
    """``metrics``: the median of the report's summary, as ``name``."""

    def metrics(report: Any) -> dict[str, float | None]:
        s = getattr(report, "summary", None)
        return {name: s.median if s is not None else None}

    return metrics
