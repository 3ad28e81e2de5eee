"""A methodology report as text, tables (USERS.md §1 layout) and plots.

:func:`tables`, :func:`render` and :func:`plots` are the same for every test: each is
handed the test's :class:`Procedure`, whose own tables, text lines and plots they add.
Helpers several procedures' output shares are here too (:func:`search_lines`).
"""

from __future__ import annotations

import os

from tgen_tui.methodology.kit.drops import drops_table
from tgen_tui.methodology.kit.procedure import Procedure, Table
from tgen_tui.methodology.kit.tables import markdown_table

DUT_KEYS = ("source", "kernel", "cpus", "conntrack_max", "conntrack_buckets", "udp_timeout_s")


def tables(doc: dict, proc: Procedure) -> list[Table]:
    """(title, header, columns, rows) of the procedure's tables, then the drops table."""
    return proc.tables(doc) + drops_table(doc)


def render(doc: dict, proc: Procedure) -> str:
    """The text report: header, tables, the test's own lines, warnings and deviations."""
    lines = [
        f"{doc.get('test')}  profile {doc.get('profile_path')}  seed {doc.get('seed')}"
        + ("  [QUICK]" if doc.get("quick") else "")
        + ("  (PARTIAL: interrupted)" if doc.get("partial") else "")
    ]
    dut = doc.get("dut") or {}
    if dut:
        lines.append(
            "DUT "
            + ", ".join(f"{k} {v}" for k, v in dut.items() if k in DUT_KEYS)
            + (f", lab {dut['lab']}" if dut.get("lab") else "")
        )
    for title, header, cols, rows in tables(doc, proc):
        lines += ["", title, markdown_table(header, cols, rows)]
    lines += proc.lines(doc)
    for w in doc.get("deviations", []):
        lines.append(f"deviation: {w}")
    for w in doc.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def plots(
    doc: dict, proc: Procedure, directory: str | None, fmt: str = "svg"
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

    texts = proc.plots(doc, path)
    return "\n".join(t for t in texts if t), [w for w in written if os.path.exists(w)]


# ---------------------------------------------------------------------------- shared


def fmt_rate(v, unit: str = "") -> str:
    """A rate as a whole number with separators ('-' when missing)."""
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if isinstance(v, int | float) else str(v)


def round3(v):
    return None if v is None else round(v, 3)


def ns_to_us(s: dict) -> dict:
    """A summary of nanoseconds in microseconds (its count ``n`` kept)."""
    return {k: (v / 1000.0 if isinstance(v, int | float) and k != "n" else v) for k, v in s.items()}


def search_lines(doc: dict) -> list[str]:
    """One line per repeated binary search: l, h, status, halving trials, confirmation."""
    lines = []
    for i, s in enumerate(doc.get("searches", [])):
        fs = f"{s['frame_size']} B " if "frame_size" in s else ""
        lines.append(
            f"  {fs}search {i + 1}: l {fmt_rate(s['l_pps'])}  h {fmt_rate(s['h_pps'])}  "
            f"{s['status']}, {s['n_trials']['search']} halving trials"
            + (
                f", confirmation {'passed' if s['confirmed'] else 'FAILED'}"
                if s["confirmed"] is not None
                else ""
            )
            + _sender_limited(s)
        )
    return lines


def _sender_limited(search: dict) -> str:
    """Say so when the trial at h failed because the sender, not the DUT, fell behind."""
    h = search.get("h_pps")
    at_h = [t for t in search.get("trials", []) if t["rate_pps"] == h and t["kind"] != "confirm"]
    if at_h and at_h[-1]["verdict"] == "invalid":
        return "; h was invalid (the tester fell behind): the DUT may do more"
    return ""
