"""The procedures of the methodology verbs, keyed by test name.

Each :class:`Procedure` says how its test runs, what its report holds (document (its model comes from results.models.model_for),
metrics, the trials the store keeps), and how it is shown (tables, text lines, plots).
Every other module asks :func:`procedure` instead of testing the test's name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from tgen_tui.methodology import documents as D
from tgen_tui.methodology import output as O
from tgen_tui.methodology import rfc9693, run
from tgen_tui.methodology.mlr import procedure as mlr_procedure
from tgen_tui.methodology.mlr import report as mlr_report
from tgen_tui.methodology.scaleup import run_scaleup, scaleup_metrics, scaleup_report
from tgen_tui.methodology.sweep import (
    run_sweep,
    sweep_metrics,
    sweep_plots,
    sweep_report,
    sweep_tables,
    sweep_trials,
)


@dataclass(frozen=True)
class Procedure:
    name: str  # the registry key: throughput, loss, ...
    test: str  # the verb's name for it, and the store's: rfc2544-throughput, ...
    run: Callable[[run.RunState], Awaitable[None]]
    report: Callable[[run.RunState, bool], dict]  # (state, partial) -> its part of the report
    metrics: Callable[[dict], dict]  # its part -> the headline figures (results store)
    trials: Callable[[run.RunState], list[dict]]  # every trial, flat (results store)
    tables: Callable[[dict], list[tuple]]
    plots: Callable[[dict, O.PathFn], list[str]] = O.no_plots
    lines: Callable[[dict], list[str]] = O.no_lines  # text lines after the tables
    rate_unit: str = "frames/s per direction"
    label: str = ""  # what the rate is, in the scale-up table
    unit: str = ""  # the searched rate's unit, for scale-up (empty: cannot be scaled)
    stateful: bool = False  # RFC 9693: trials of N frames
    common: bool = True  # the report has the common fields (documents.common_fields)


def _none(state: run.RunState) -> list[dict]:
    return []


def _no_metrics(doc: dict) -> dict:
    return {}


_STATEFUL = {"rate_unit": "connections/s", "stateful": True}

PROCEDURES: dict[str, Procedure] = {
    p.name: p
    for p in (
        Procedure(
            "throughput",
            "rfc2544-throughput",
            run.run_throughput,
            D.throughput_report,
            D.throughput_metrics,
            D.throughput_trials,
            O.throughput_tables,
            O.throughput_plots,
            O.search_lines,
            label="throughput",
            unit="fps",
        ),
        Procedure(
            "loss",
            "rfc2544-loss",
            run.run_loss,
            D.loss_report,
            _no_metrics,
            D.loss_trials,
            O.loss_tables,
            O.loss_plots,
        ),
        Procedure(
            "latency",
            "rfc2544-latency",
            run.run_latency,
            partial(D.latency_report, figures=("tl_ns", "wcl_ns")),
            D.latency_metrics,
            D.latency_trials,
            O.latency_tables,
            O.histograms((("TL", "tl_ns"), ("WCL", "wcl_ns"))),
            O.latency_source_lines,
        ),
        Procedure(
            "pdv",
            "rfc2544-pdv",
            run.run_pdv,
            partial(D.latency_report, figures=("pdv_ns",)),
            D.latency_metrics,
            D.latency_trials,
            O.pdv_tables,
            O.histograms((("PDV", "pdv_ns"),)),
            O.latency_source_lines,
        ),
        Procedure(
            "cps",
            "rfc9693-cps",
            rfc9693.run_cps,
            D.cps_report,
            D.median_of_summary("cps"),
            D.cps_trials,
            O.cps_tables,
            lines=O.cps_lines,
            label="max. connection establishment rate",
            unit="conn/s",
            **_STATEFUL,
        ),
        Procedure(
            "capacity",
            "rfc9693-capacity",
            rfc9693.run_capacity,
            D.capacity_report,
            D.capacity_metrics,
            D.capacity_trials,
            O.capacity_tables,
            O.capacity_plots,
            O.capacity_lines,
            **_STATEFUL,
        ),
        Procedure(
            "teardown",
            "rfc9693-teardown",
            rfc9693.run_teardown,
            D.teardown_report,
            D.median_of_summary("teardown_per_s"),
            D.teardown_trials,
            O.teardown_tables,
            **_STATEFUL,
        ),
        Procedure(
            "scaleup",
            "scaleup",
            run_scaleup,
            scaleup_report,
            scaleup_metrics,
            _none,
            O.scaleup_tables,
            O.scaleup_plots,
            common=False,
        ),
        Procedure(
            "sweep",
            "sweep",
            run_sweep,
            sweep_report,
            sweep_metrics,
            sweep_trials,
            sweep_tables,
            sweep_plots,
            **_STATEFUL,
        ),
        Procedure(
            "search",
            "search",
            mlr_procedure.run_search,
            mlr_report.search_report,
            mlr_report.search_metrics,
            mlr_report.search_trials,
            mlr_report.search_tables,
            mlr_report.search_plots,
            mlr_report.search_lines,
            rate_unit="frames/s per interface (each direction)",
        ),
    )
}

BY_TEST = {p.test: p for p in PROCEDURES.values()}


def procedure(test: str) -> Procedure:
    """The procedure of a test: its name (throughput), the verb's (rfc2544-throughput),
    or a scale-up of one (scaleup-rfc9693-cps)."""
    p = BY_TEST.get(test) or PROCEDURES.get(test) or PROCEDURES.get(test.split("-", 1)[0])
    if p is None:
        raise KeyError(f"no procedure {test!r}; known: {', '.join(PROCEDURES)}")
    return p


def scaled(test: str) -> Procedure:
    """The procedure a scale-up test runs (scaleup-rfc9693-cps: cps)."""
    return procedure(test.split("-", 1)[1])


def scalable() -> list[Procedure]:
    """The procedures ``tgen scaleup`` can run (their searched rate has a unit)."""
    return [p for p in PROCEDURES.values() if p.unit]
