"""Report tables laid out like USERS.md §1: one column per frame size (or core count),
one row per figure, as Markdown and CSV, plus the plain-text summary lines."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

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


def summary_rows(label: str, unit: str, summaries: Sequence[dict]) -> list[Row]:
    """median / min / max (and p1 / p99 when present) rows for one figure."""
    rows: list[Row] = [
        (f"{label}, median ({unit})", [s.get("median") for s in summaries]),
        (f"{label}, min ({unit})", [s.get("min") for s in summaries]),
        (f"{label}, max ({unit})", [s.get("max") for s in summaries]),
    ]
    if any("p1" in s for s in summaries):
        rows.append((f"{label}, p1 ({unit})", [s.get("p1") for s in summaries]))
        rows.append((f"{label}, p99 ({unit})", [s.get("p99") for s in summaries]))
    rows.append(("runs", [s.get("n") for s in summaries]))
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
