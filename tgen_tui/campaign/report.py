"""A campaign's results side by side: one row per point (its axes), each headline
metric's median, min and max over the repeats; as text, Markdown, CSV, JSON, and a plot
per axis (the metric against that axis, one line per value of the others)."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import OrderedDict
from pathlib import Path
from typing import Any

from tgen_tui.campaign.points import expand
from tgen_tui.campaign.runner import State
from tgen_tui.profiles.campaign import Campaign

UNITS = {"rx_fps": "fps", "tx_fps": "fps", "loss_pct": "%", "p99_us": "µs",
         "throughput_fps": "fps", "cps": "conn/s", "ndr_pps": "fps", "pdr_pps": "fps"}  # fmt: skip


def rows(c: Campaign, state: State) -> tuple[list[str], list[dict]]:
    """(axis names, rows): rows in the campaign's written order; each row has the axes,
    ``n`` (points ok), ``failed``, and per metric ``{median, min, max}``."""
    names = list(c.axes)
    order: OrderedDict[str, dict] = OrderedDict()
    for p in expand(c, shuffle=False):  # the written order
        order.setdefault(p.key, {"axes": p.values, "recs": []})
    for rec in state.done.values():
        if rec.get("key") in order:
            order[rec["key"]]["recs"].append(rec)
    out = []
    for row in order.values():
        ok = [r for r in row["recs"] if r.get("status") == "ok"]
        metrics: dict[str, dict[str, float | None]] = {}
        keys = list(dict.fromkeys(k for r in ok for k in (r.get("metrics") or {})))
        for k in keys:
            vals = [r["metrics"][k] for r in ok if r["metrics"].get(k) is not None]
            metrics[k] = (
                {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
                if vals
                else {"median": None, "min": None, "max": None}
            )
        out.append({**row["axes"], "n": len(ok), "failed": len(row["recs"]) - len(ok),
                    "metrics": metrics})  # fmt: skip
    return names, out


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def _metric_names(table: list[dict]) -> list[str]:
    return list(dict.fromkeys(k for r in table for k in r["metrics"]))


def text_table(names: list[str], table: list[dict], markdown: bool = False) -> str:
    metrics = _metric_names(table)
    head = [*names, "n"] + [
        f"{m} ({UNITS.get(m, '')}) median [min, max]".replace(" ()", "") for m in metrics
    ]
    body = []
    for r in table:
        cells = [str(r[n]) for n in names] + [
            f"{r['n']}" + (f" ({r['failed']} failed)" if r["failed"] else "")
        ]
        for m in metrics:
            s = r["metrics"].get(m) or {}
            cells.append(f"{_fmt(s.get('median'))} [{_fmt(s.get('min'))}, {_fmt(s.get('max'))}]")
        body.append(cells)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c) + " |" for c in body]
        return "\n".join(lines)
    widths = [
        max(len(h), *(len(c[i]) for c in body)) if body else len(h) for i, h in enumerate(head)
    ]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head)] + [fmt.format(*c) for c in body])


def csv_text(names: list[str], table: list[dict]) -> str:
    metrics = _metric_names(table)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [*names, "n", "failed"] + [f"{m}_{s}" for m in metrics for s in ("median", "min", "max")]
    )
    for r in table:
        w.writerow([r[n] for n in names] + [r["n"], r["failed"]]
                   + [(r["metrics"].get(m) or {}).get(s) for m in metrics for s in ("median", "min", "max")])  # fmt: skip
    return buf.getvalue()


def plots(
    c: Campaign, names: list[str], table: list[dict], folder: Path, fmt: str = "svg"
) -> list[Path]:
    """Per axis with numbers, the first metric against it (one series per value of the
    other axes); the files written."""
    from tgen_tui.results.plot import chart

    metrics = _metric_names(table)
    if not metrics or not names:
        return []
    m = metrics[0]
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for axis in names:
        if len(c.axes[axis]) < 2 or not all(isinstance(r[axis], int | float) for r in table):
            continue
        series: dict[str, tuple[list, list]] = {}
        for r in table:
            med = (r["metrics"].get(m) or {}).get("median")
            if med is None:
                continue
            label = " ".join(f"{n}={r[n]}" for n in names if n != axis)
            xs, ys = series.setdefault(label, ([], []))
            xs.append(r[axis])
            ys.append(med)
        path = folder / f"{c.name}-{m}-by-{axis.replace('.', '_')}.{fmt}"
        chart(f"{c.name}: {m} by {axis}", axis, f"{m} ({UNITS.get(m, '')})",
              [(k, v[0], v[1]) for k, v in series.items()], path=str(path))  # fmt: skip
        out.append(path)
    return out


def report_doc(c: Campaign, names: list[str], table: list[dict], state: State) -> dict[str, Any]:
    return {
        "campaign": c.name,
        "procedure": c.procedure,
        "build": c.build,
        "dut": c.dut,
        "axes": {n: c.axes[n] for n in names},
        "repeats": c.repeats,
        "points": {
            "total": c.n_points(),
            "done": len(state.done),
            "failed": sum(1 for r in state.done.values() if r.get("status") != "ok"),
        },  # fmt: skip
        "rows": table,
    }


def write_all(c: Campaign, state: State, *, md: str | None, csv_path: str | None,
              json_path: str | None, plots_dir: str | None) -> tuple[str, list[Path]]:  # fmt: skip
    """The text table; the other forms written where asked."""
    names, table = rows(c, state)
    if md:
        Path(md).write_text(f"# {c.name}\n\n" + text_table(names, table, markdown=True) + "\n")
    if csv_path:
        Path(csv_path).write_text(csv_text(names, table))
    if json_path:
        Path(json_path).write_text(json.dumps(report_doc(c, names, table, state), indent=2))
    files = plots(c, names, table, Path(plots_dir)) if plots_dir else []
    return text_table(names, table), files


__all__ = ["csv_text", "report_doc", "rows", "text_table", "write_all"]
