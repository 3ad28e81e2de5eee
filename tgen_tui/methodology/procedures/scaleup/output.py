"""The scale-up's table (rate and relative scale-up per core count) and plots."""

from __future__ import annotations

from tgen_tui.methodology.kit.output import round3
from tgen_tui.methodology.kit.procedure import PathFn, Table
from tgen_tui.methodology.procedures.scaleup.run import Lookup
from tgen_tui.results.models import ScaleupReport
from tgen_tui.results.plot import chart


def scaleup_tables(report: ScaleupReport, *, scaled: Lookup) -> list[Table]:
    rows = report.rows
    unit = report.unit
    label = scaled(report.test).label
    return [
        (
            f"Scale-up: {report.scaled}",
            "tester cores",
            [r.cores for r in rows],
            [
                (f"{label}, median ({unit})", [r.median for r in rows]),
                (f"{label}, min ({unit})", [r.min for r in rows]),
                (f"{label}, max ({unit})", [r.max for r in rows]),
                ("relative scale-up", [round3(r.relative_scaleup) for r in rows]),
            ],
        )
    ]


def scaleup_plots(report: ScaleupReport, path: PathFn) -> list[str]:
    rows = report.rows
    cores = [r.cores for r in rows]
    return [
        chart(
            "Rate against cores (median)",
            "cores",
            report.unit,
            [("median", cores, [r.median or 0 for r in rows])],
            kind="bar",
            path=path("scaleup_rate"),
        ),
        chart(
            "Relative scale-up",
            "cores",
            "rate_k / (k x rate_1)",
            [("relative", cores, [r.relative_scaleup or 0 for r in rows])],
            kind="bar",
            path=path("scaleup_relative"),
        ),
    ]
