"""The procedures of the methodology verbs, keyed by test name, on top of the package.

Each :class:`~tgen_tui.methodology.kit.procedure.Procedure` says how its test runs, what
its report holds (its model comes from results.models.model_for; metrics; the trials the
store keeps), and how it is shown (tables, text lines, plots). Front ends ask
:func:`procedure` instead of testing the test's name, and use the functions here that
hand the kit's generic ones (documents, output) the test's procedure. Nothing below
imports this module: the scale-up is handed :func:`scaled` as its lookup.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tgen_tui.methodology.kit import documents as D
from tgen_tui.methodology.kit import output as O
from tgen_tui.methodology.kit.documents import median_of_summary
from tgen_tui.methodology.kit.output import MethodologyReport
from tgen_tui.methodology.kit.procedure import Procedure, Table, no_metrics, no_trials
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.mlr import output as mlr_output
from tgen_tui.methodology.procedures.mlr import report as mlr_report
from tgen_tui.methodology.procedures.mlr.appsearch import (
    app_search_lines,
    app_search_report,
    run_app_search,
)
from tgen_tui.methodology.procedures.mlr.run import run_search
from tgen_tui.methodology.procedures.rfc2544 import output as o2544
from tgen_tui.methodology.procedures.rfc2544 import report as r2544
from tgen_tui.methodology.procedures.rfc2544 import run as rfc2544
from tgen_tui.methodology.procedures.rfc9693 import output as o9693
from tgen_tui.methodology.procedures.rfc9693 import report as r9693
from tgen_tui.methodology.procedures.rfc9693 import run as rfc9693
from tgen_tui.methodology.procedures.scaleup import output as scaleup_output
from tgen_tui.methodology.procedures.scaleup import report as scaleup_report
from tgen_tui.methodology.procedures.scaleup.run import run_scaleup
from tgen_tui.methodology.procedures.sweep import output as sweep_output
from tgen_tui.methodology.procedures.sweep import report as sweep_report
from tgen_tui.methodology.procedures.sweep.run import run_sweep
from tgen_tui.results.models import Doc

__all__ = [
    "PROCEDURES",
    "Procedure",
    "build_document",
    "build_report",
    "flat_trials",
    "plots",
    "procedure",
    "render",
    "scalable",
    "scaled",
    "tables",
]


def procedure(test: str) -> Procedure[Any]:
    """The procedure of a test: its name (throughput), the verb's (rfc2544-throughput),
    or a scale-up of one (scaleup-rfc9693-cps)."""
    p = BY_TEST.get(test) or PROCEDURES.get(test) or PROCEDURES.get(test.split("-", 1)[0])
    if p is None:
        raise KeyError(f"no procedure {test!r}; known: {', '.join(PROCEDURES)}")
    return p


def scaled(test: str) -> Procedure[Any]:
    """The procedure a scale-up test runs (scaleup-rfc9693-cps: cps)."""
    return procedure(test.split("-", 1)[1])


def scalable() -> list[Procedure[Any]]:
    """The procedures ``tgen scaleup`` can run (their searched rate has a unit)."""
    return [p for p in PROCEDURES.values() if p.unit]


_STATEFUL: dict[str, Any] = {"rate_unit": "connections/s", "stateful": True}

PROCEDURES: dict[str, Procedure[Any]] = {
    p.name: p
    for p in (
        Procedure(
            "throughput",
            "rfc2544-throughput",
            rfc2544.run_throughput,
            r2544.throughput_report,
            r2544.throughput_metrics,
            r2544.throughput_trials,
            o2544.throughput_tables,
            o2544.throughput_plots,
            o2544.throughput_lines,
            label="throughput",
            unit="fps",
        ),
        Procedure(
            "loss",
            "rfc2544-loss",
            rfc2544.run_loss,
            r2544.loss_report,
            no_metrics,
            r2544.loss_trials,
            o2544.loss_tables,
            o2544.loss_plots,
        ),
        Procedure(
            "latency",
            "rfc2544-latency",
            rfc2544.run_latency,
            partial(r2544.latency_report, figures=("tl_ns", "wcl_ns")),
            r2544.latency_metrics,
            r2544.latency_trials,
            o2544.latency_tables,
            o2544.histograms((("TL", "tl_ns"), ("WCL", "wcl_ns"))),
            o2544.latency_source_lines,
        ),
        Procedure(
            "pdv",
            "rfc2544-pdv",
            rfc2544.run_pdv,
            partial(r2544.latency_report, figures=("pdv_ns",)),
            r2544.latency_metrics,
            r2544.latency_trials,
            o2544.pdv_tables,
            o2544.histograms((("PDV", "pdv_ns"),)),
            o2544.latency_source_lines,
        ),
        Procedure(
            "cps",
            "rfc9693-cps",
            rfc9693.run_cps,
            r9693.cps_report,
            median_of_summary("cps"),
            r9693.cps_trials,
            o9693.cps_tables,
            lines=o9693.cps_lines,
            label="max. connection establishment rate",
            unit="conn/s",
            **_STATEFUL,
        ),
        Procedure(
            "capacity",
            "rfc9693-capacity",
            rfc9693.run_capacity,
            r9693.capacity_report,
            r9693.capacity_metrics,
            r9693.capacity_trials,
            o9693.capacity_tables,
            o9693.capacity_plots,
            o9693.capacity_lines,
            **_STATEFUL,
        ),
        Procedure(
            "teardown",
            "rfc9693-teardown",
            rfc9693.run_teardown,
            r9693.teardown_report,
            median_of_summary("teardown_per_s"),
            r9693.teardown_trials,
            o9693.teardown_tables,
            **_STATEFUL,
        ),
        Procedure(
            "scaleup",
            "scaleup",
            partial(run_scaleup, scaled=scaled),
            partial(scaleup_report.scaleup_report, scaled=scaled),
            scaleup_report.scaleup_metrics,
            no_trials,
            partial(scaleup_output.scaleup_tables, scaled=scaled),
            scaleup_output.scaleup_plots,
            common=False,
        ),
        Procedure(
            "sweep",
            "sweep",
            run_sweep,
            sweep_report.sweep_report,
            sweep_report.sweep_metrics,
            sweep_report.sweep_trials,
            sweep_output.sweep_tables,
            sweep_output.sweep_plots,
            **_STATEFUL,
        ),
        Procedure(
            "search",
            "search",
            run_search,
            mlr_report.search_report,
            mlr_report.search_metrics,
            mlr_report.search_trials,
            mlr_output.search_tables,
            mlr_output.search_plots,
            mlr_output.search_lines,
            rate_unit="frames/s per interface (each direction)",
        ),
        Procedure(
            "app-cps",
            "rfc9411-cps",
            run_app_search,
            app_search_report,
            mlr_report.search_metrics,
            mlr_report.search_trials,
            partial(mlr_output.search_tables, unit="conn/s"),
            partial(mlr_output.search_plots, axis="load (new connections/s)"),
            app_search_lines,
            rate_unit="connections/s",
            app=True,
        ),
        Procedure(
            "app-concurrent",
            "rfc9411-concurrent",
            run_app_search,
            app_search_report,
            mlr_report.search_metrics,
            mlr_report.search_trials,
            partial(mlr_output.search_tables, unit="conn"),
            partial(mlr_output.search_plots, axis="load (concurrent connections)"),
            app_search_lines,
            rate_unit="connections (concurrent)",
            app=True,
        ),
    )
}

BY_TEST = {p.test: p for p in PROCEDURES.values()}


# ---------------------------------------------------------------- the kit, for the test


def build_report(
    state: RunState, *, partial: bool, signal_name: str | None = None
) -> MethodologyReport:
    """The typed report of the state's test (kit.documents.build_report)."""
    return D.build_report(state, procedure(state.test), partial=partial, signal_name=signal_name)


def build_document(state: RunState, *, partial: bool, signal_name: str | None = None) -> dict:
    """The JSON report of the state's test (its model's fields that were set)."""
    return build_report(state, partial=partial, signal_name=signal_name).to_doc()


def flat_trials(state: RunState) -> list[Doc]:
    """Every trial of the run, flat, as the results store keeps them (the procedure's
    ``trials``: TrialRecord and SearchOutcome)."""
    return procedure(state.test).trials(state)


def tables(report: MethodologyReport) -> list[Table]:
    """The report's tables (kit.output.tables, with its test's procedure)."""
    return O.tables(report, procedure(report.test))


def render(report: MethodologyReport) -> str:
    """The text report (kit.output.render, with its test's procedure)."""
    return O.render(report, procedure(report.test))


def plots(
    report: MethodologyReport, directory: str | None, fmt: str = "svg"
) -> tuple[str, list[str]]:
    """The report's plots (kit.output.plots, with its test's procedure)."""
    return O.plots(report, procedure(report.test), directory, fmt)
