"""Report tables laid out like USERS.md §1: one column per frame size (or core count),
one row per figure, as Markdown and CSV, plus the plain-text summary lines."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from tgen_tui.results.models import Summary

Row = tuple[str, Sequence[object]]


def fmt_num(v: object, digits: int = 0) -> str:
    """Thousands separators, '-' for missing values; floats below 10 keep 3 decimals."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if abs(v) < 10 and v != int(v):
            return f"{v:.3f}"
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def markdown_table(header: str, columns: Sequence[object], rows: Sequence[Row]) -> str:
    lines = [
        "| " + " | ".join([header, *(fmt_num(c) for c in columns)]) + " |",
        "|" + "---|" * (len(columns) + 1),
    ]
    for label, vals in rows:
        lines.append("| " + " | ".join([label, *(fmt_num(v) for v in vals)]) + " |")
    return "\n".join(lines)


def csv_table(header: str, columns: Sequence[object], rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([header, *columns])
    for label, vals in rows:
        w.writerow([label, *("" if v is None else v for v in vals)])
    return buf.getvalue()


def summary_rows(
    label: str, unit: str, summaries: Sequence[Summary | None], per: float = 1.0
) -> list[Row]:
    """median / min / max (and p1 / p99 when present) rows for one figure, each value
    divided by ``per`` (1000: ns shown in us); a missing summary gives '-' everywhere."""

    def col(name: str) -> list[object]:
        out: list[object] = []
        for s in summaries:
            v = getattr(s, name) if s is not None else None
            out.append(v / per if isinstance(v, int | float) and per != 1.0 else v)
        return out

    rows: list[Row] = [
        (f"{label}, median ({unit})", col("median")),
        (f"{label}, min ({unit})", col("min")),
        (f"{label}, max ({unit})", col("max")),
    ]
    if any(s is not None and s.p1 is not None for s in summaries):
        rows.append((f"{label}, p1 ({unit})", col("p1")))
        rows.append((f"{label}, p99 ({unit})", col("p99")))
    rows.append(("runs", [s.n if s is not None else None for s in summaries]))
    return rows


def write_tables(md_path: str | None, csv_path: str | None, tables: list[tuple]) -> None:
    """``tables``: (title, header, columns, rows) tuples; Markdown gets titles as headings."""
    if md_path:
        parts = []
        for title, header, cols, rows in tables:
            parts.append(f"### {title}\n\n{markdown_table(header, cols, rows)}\n")
        with open(md_path, "w") as f:
            f.write("\n".join(parts))
    if csv_path:
        with open(csv_path, "w") as f:
            for i, (title, header, cols, rows) in enumerate(tables):
                if i:
                    f.write("\n")
                f.write(f"# {title}\n")
                f.write(csv_table(header, cols, rows))
