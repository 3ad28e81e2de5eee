"""The sweep's table and its plot of both rates against the sessions."""

from __future__ import annotations

from tgen_tui.methodology.kit.procedure import PathFn, Table
from tgen_tui.results.models import SweepReport
from tgen_tui.results.plot import chart


def sweep_tables(report: SweepReport) -> list[Table]:
    rows = report.rows
    return [
        (
            "Session-scale sweep",
            "sessions",
            [r.sessions for r in rows],
            [
                ("connection rate, l (conn/s)", [r.cps for r in rows]),
                ("throughput, l (fps)", [r.throughput for r in rows]),
                ("entries opened by the fill", [r.filled for r in rows]),
                ("conntrack after the throughput search", [r.conntrack_after for r in rows]),
            ],
        )
    ]


def sweep_plots(report: SweepReport, path: PathFn) -> list[str]:
    rows = report.rows
    x = [r.sessions for r in rows]
    return [
        chart(
            "Connection rate and throughput against sessions",
            "sessions",
            "per second",
            [
                ("conn/s", x, [r.cps or 0 for r in rows]),
                ("fps", x, [r.throughput or 0 for r in rows]),
            ],
            kind="line",
            path=path("sweep_sessions"),
        )
    ]
