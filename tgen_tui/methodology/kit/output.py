"""A methodology report as text, tables (USERS.md §1 layout) and plots, read from its
model (:mod:`tgen_tui.results.models`).

:func:`tables`, :func:`render` and :func:`plots` are the same for every test: each is
handed the test's :class:`Procedure`, whose own tables, text lines and plots they add.
Helpers several procedures' output shares are here too (:func:`search_lines`).
"""

from __future__ import annotations

import os
from typing import Any

from tgen_tui.methodology.kit.drops import drops_table
from tgen_tui.methodology.kit.procedure import Procedure, Table
from tgen_tui.methodology.kit.spacing import spacing_text
from tgen_tui.methodology.kit.tables import markdown_table
from tgen_tui.results.models import Report, ScaleupReport, Search

DUT_KEYS = ("source", "kernel", "cpus", "conntrack_max", "conntrack_buckets", "udp_timeout_s")

MethodologyReport = Report | ScaleupReport


def tables(report: MethodologyReport, proc: Procedure[Any]) -> list[Table]:
    """(title, header, columns, rows) of the procedure's tables, then the drops table."""
    return proc.tables(report) + drops_table(report)


def render(report: MethodologyReport, proc: Procedure[Any]) -> str:
    """The text report: header, tables, the test's own lines, warnings and deviations."""
    lines = [
        f"{report.test}  profile {report.profile_path}  seed {report.seed}"
        + ("  [QUICK]" if report.quick else "")
        + ("  (PARTIAL: interrupted)" if report.partial else "")
    ]
    dut = report.dut or {}
    if dut:
        lines.append(
            "DUT "
            + ", ".join(f"{k} {v}" for k, v in dut.items() if k in DUT_KEYS)
            + (f", lab {dut['lab']}" if dut.get("lab") else "")
        )
    for title, header, cols, rows in tables(report, proc):
        lines += ["", title, markdown_table(header, cols, rows)]
    lines += proc.lines(report)
    lines += [f"deviation: {w}" for w in report.deviations]
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def plots(
    report: MethodologyReport, proc: Procedure[Any], directory: str | None, fmt: str = "svg"
) -> tuple[str, list[str]]:
    """Draw the test's plots in the terminal and into ``directory``: (text, file paths)."""
    if directory:
        os.makedirs(directory, exist_ok=True)
    written: list[str] = []

    def path(name: str) -> str | None:
        if not directory:
            return None
        written.append(os.path.join(directory, f"{name}.{fmt}"))
        return written[-1]

    texts = proc.plots(report, path)
    return "\n".join(t for t in texts if t), [w for w in written if os.path.exists(w)]


# ---------------------------------------------------------------------------- shared


def fmt_rate(v: object, unit: str = "") -> str:
    """A rate as a whole number with separators ('-' when missing)."""
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if isinstance(v, int | float) else str(v)


def round3(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def search_lines(searches: list[Search]) -> list[str]:
    """One line per repeated binary search: l, h, status, halving trials, confirmation."""
    lines = []
    for i, s in enumerate(searches):
        fs = f"{s.frame_size} B " if s.frame_size is not None else ""
        lines.append(
            f"  {fs}search {i + 1}: l {fmt_rate(s.l_pps)}  h {fmt_rate(s.h_pps)}  "
            f"{s.status}, {s.n_trials['search']} halving trials"
            + (
                f", confirmation {'passed' if s.confirmed else 'FAILED'}"
                if s.confirmed is not None
                else ""
            )
            + _sender_limited(s)
        )
        at_l = [t for t in s.trials if t.rate_pps == s.l_pps and t.passed]
        text = spacing_text(at_l)
        if text:
            lines.append(f"    spacing at l: {text}")
    return lines


def _sender_limited(search: Search) -> str:
    """Say so when the trial at h failed because the sender, not the DUT, fell behind."""
    at_h = [t for t in search.trials if t.rate_pps == search.h_pps and t.kind != "confirm"]
    if at_h and at_h[-1].verdict == "invalid":
        return "; h was invalid (the tester fell behind): the DUT may do more"
    return ""
