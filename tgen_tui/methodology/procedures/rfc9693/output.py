"""The RFC 9693 procedures' tables, text lines and plots, from their reports."""

from __future__ import annotations

from tgen_tui.methodology.kit.output import search_lines
from tgen_tui.methodology.kit.procedure import PathFn, Table
from tgen_tui.methodology.kit.tables import summary_rows
from tgen_tui.results.models import CapacityReport, CpsReport, TeardownReport
from tgen_tui.results.plot import chart


def cps_tables(report: CpsReport) -> list[Table]:
    rows = summary_rows("max. connection establishment rate", "conn/s", [report.summary])
    return [("RFC 9693 connection establishment rate", "connections", [report.connections], rows)]


def cps_lines(report: CpsReport) -> list[str]:
    """The searches, then each search's phase 2 (run at l, or why not)."""
    lines = search_lines(report.searches)
    for i, s in enumerate(report.searches):
        for t in s.trials:
            if t.kind != "confirm":
                continue
            p2 = t.extra.phase2
            if p2 is not None:
                lines.append(
                    f"  search {i + 1} phase 2 at {p2.rate_pps:,.0f} replies/s "
                    f"({p2.order}) to {p2.learned_tuples or 0:,} learned tuples: "
                    f"sent {p2.tx_frames:,}, back through the NAT "
                    f"{p2.rx_frames:,}, lost {p2.lost:,}: {p2.verdict}"
                )
            elif t.extra.learned:
                lines.append(f"  search {i + 1} phase 2 not run: {t.reason or 'phase 1 failed'}")
    return lines


def capacity_tables(report: CapacityReport) -> list[Table]:
    s = report.summary
    rows = [
        ("capacity (connections)", [s.capacity if s else None]),
        ("lowest failing size", [s.h_connections if s else None]),
        ("R0 (conn/s)", [s.r0 if s else None]),
    ]
    return [("RFC 9693 conntrack table capacity", "figure", ["value"], rows)]


def capacity_lines(report: CapacityReport) -> list[str]:
    """One line per step: phase, table size, rate tested, pass or fail (and why)."""
    if not report.capacity:
        return []
    return [
        f"  {st.phase:<7} C {st.connections:>10,}  rate {st.rate:>12,.0f}  "
        f"{'pass' if st.passed else 'fail'}"
        + (f"  ({st.trial.reason})" if st.trial and st.trial.reason else "")
        for st in report.capacity.steps
    ]


def capacity_plots(report: CapacityReport, path: PathFn) -> list[str]:
    if not report.capacity:
        return []
    steps = report.capacity.steps
    ok = [s for s in steps if s.passed]
    bad = [s for s in steps if not s.passed]
    return [
        chart(
            "Connection rate against table size",
            "connections",
            "conn/s (rate tested)",
            [
                ("pass", [s.connections for s in ok], [s.rate for s in ok]),
                ("fail", [s.connections for s in bad], [s.rate for s in bad]),
            ],
            kind="scatter",
            path=path("rate_vs_table_size"),
        )
    ]


def teardown_tables(report: TeardownReport) -> list[Table]:
    rows = summary_rows("tear-down rate", "conn/s", [report.summary])
    return [("RFC 9693 connection tear-down rate", "connections", [report.connections], rows)]
