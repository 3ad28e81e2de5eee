"""Trend plots over builds: a plain-text terminal plot, an SVG written by hand, and a PNG.

The terminal plot and the SVG need nothing beyond the standard library. PNG uses
matplotlib (a core dependency) and says so if it is missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path

from tgen_tui.results import metrics as M

SPARK = "▁▂▃▄▅▆▇█"


@dataclass
class Point:
    """One build on the x axis: its median, its range, how many samples."""

    label: str
    median: float
    low: float
    high: float
    n: int


def sparkline(values: list[float | None], min_span: float = 0.05) -> str:
    """'▁▃▇█' for a list of values (a space where a value is missing).

    The scale spans at least ``min_span`` of the largest value, so that jitter of a few
    per mille between builds does not look like a trend.
    """
    vals = [v for v in values if v is not None]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    lo = min(lo, hi - min_span * abs(hi))
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif hi == lo:
            out.append(SPARK[3])
        else:
            out.append(SPARK[round((v - lo) / (hi - lo) * (len(SPARK) - 1))])
    return "".join(out)


def axis(points: list[Point], unit: str, n: int = 5) -> tuple[float, float, list[float], Callable]:
    """(lo, hi, ticks, tick formatter): the data range widened to round tick values."""
    lo, hi = _range(points) if points else (0.0, 1.0)
    ticks, step = M.nice_ticks(lo, hi, n)
    lo2 = math.floor(lo / step + 1e-9) * step
    hi2 = math.ceil(hi / step - 1e-9) * step
    if hi2 <= lo2:
        hi2 = lo2 + step
    ticks, _ = M.nice_ticks(lo2, hi2, n)
    ticks = [t for t in ticks if lo2 - 1e-9 * step <= t <= hi2 + 1e-9 * step] or [lo2, hi2]
    return lo2, hi2, ticks, M.tick_formatter(unit, max(abs(lo2), abs(hi2)), step)


def _range(points: list[Point]) -> tuple[float, float]:
    lo = min(p.low for p in points)
    hi = max(p.high for p in points)
    if hi == lo:
        pad = abs(hi) * 0.05 or 1.0
    else:
        pad = (hi - lo) * 0.08
    # never pad a non-negative metric (rates, loss, latency) below zero
    return (max(0.0, lo - pad) if lo >= 0 else lo - pad), hi + pad


def text_plot(
    points: list[Point],
    *,
    title: str,
    unit: str,
    height: int = 12,
    width: int = 100,
) -> str:
    """A terminal plot: y axis with units, one column per build, ● median and │ range.

    Each build gets an equal share of ``width`` (2 to 10 characters); labels that do not
    fit are left out at regular steps.
    """
    if not points:
        return f"{title}\n(no data)"
    lo, hi, ticks, tick = axis(points, unit, n=max(3, height // 2))
    w0 = max(len(tick(t)) for t in ticks) + 2
    col = max(2, min(10, (width - w0) // len(points)))
    rows = [[" "] * (col * len(points)) for _ in range(height)]

    def row_of(v: float) -> int:
        return min(height - 1, max(0, round((hi - v) / (hi - lo) * (height - 1))))

    for i, p in enumerate(points):
        x = i * col + col // 2
        r_hi, r_lo, r_med = row_of(p.high), row_of(p.low), row_of(p.median)
        for r in range(r_hi, r_lo + 1):
            rows[r][x] = "│"
        rows[r_med][x] = "●"
        if i > 0:  # a dotted line from the previous median
            prev = points[i - 1]
            x0, r0 = (i - 1) * col + col // 2, row_of(prev.median)
            for xx in range(x0 + 1, x):
                rr = round(r0 + (r_med - r0) * (xx - x0) / (x - x0))
                if rows[rr][xx] == " ":
                    rows[rr][xx] = "·"
    labels = [""] * height
    for t in ticks:
        labels[row_of(t)] = tick(t)
    w = max(len(s) for s in labels)
    out = [title]
    for r in range(height):
        mark = "┤" if labels[r] else "│"
        out.append(f"{labels[r]:>{w}} {mark}{''.join(rows[r])}".rstrip())
    out.append(" " * w + " └" + "─" * (col * len(points)))
    lab_w = max(len(p.label) for p in points) + 1
    every = max(1, math.ceil(lab_w / col))  # label every k-th build when they do not fit
    xl = [" "] * (col * len(points) + lab_w)
    xn = list(xl)
    for i, p in enumerate(points):
        if i % every:
            continue
        for text, line in ((p.label, xl), (f"n={p.n}", xn)):
            start = max(0, i * col + col // 2 - len(text) // 2)
            line[start : start + len(text)] = list(text)
    out.append(" " * (w + 2) + "".join(xl).rstrip())
    out.append(" " * (w + 2) + "".join(xn).rstrip())
    return "\n".join(out)


def svg_plot(
    points: list[Point],
    *,
    title: str,
    ylabel: str,
    unit: str,
    width: int = 720,
    height: int = 400,
) -> str:
    """An SVG line chart: medians joined, min–max bars, labelled axes."""
    left, right, top, bottom = 90, 20, 40, 60
    pw, ph = width - left - right, height - top - bottom
    lo, hi, ticks, tick = axis(points, unit)
    n = max(1, len(points))

    def x(i: int) -> float:
        return left + pw * (i + 0.5) / n

    def y(v: float) -> float:
        return top + ph * (hi - v) / (hi - lo)

    e = []
    e.append(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">'
    )
    e.append(f'<rect width="{width}" height="{height}" fill="white"/>')
    e.append(
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>'
    )
    for v in ticks:
        yy = y(v)
        e.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#ddd"/>')
        e.append(
            f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{escape(tick(v))}</text>'
        )
    e.append(
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>'
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>'
    )
    e.append(
        f'<text x="16" y="{top + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + ph / 2})">{escape(ylabel)}</text>'
    )
    e.append(f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle">build</text>')
    if points:
        path = " ".join(f"{x(i):.1f},{y(p.median):.1f}" for i, p in enumerate(points))
        e.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    for i, p in enumerate(points):
        e.append(
            f'<line x1="{x(i):.1f}" y1="{y(p.high):.1f}" x2="{x(i):.1f}" y2="{y(p.low):.1f}" '
            f'stroke="#1f77b4" stroke-width="1"/>'
        )
        e.append(f'<circle cx="{x(i):.1f}" cy="{y(p.median):.1f}" r="4" fill="#1f77b4"/>')
        e.append(
            f'<text x="{x(i):.1f}" y="{top + ph + 18}" text-anchor="middle">{escape(p.label)}</text>'
        )
        e.append(
            f'<text x="{x(i):.1f}" y="{top + ph + 32}" text-anchor="middle" fill="#666">'
            f"n={p.n}</text>"
        )
    e.append("</svg>")
    return "\n".join(e) + "\n"


class PlotUnavailable(Exception):
    """The image format needs a library that is not installed."""


def png_plot(points: list[Point], *, title: str, ylabel: str, unit: str, path: Path) -> None:
    """A PNG through matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, FuncFormatter
    except ImportError:
        raise PlotUnavailable(
            "writing PNG needs matplotlib (pip install matplotlib); "
            "an .svg --output needs nothing"
        ) from None
    fig, ax = plt.subplots(figsize=(7.2, 4.0), dpi=100)
    xs = list(range(len(points)))
    meds = [p.median for p in points]
    ax.plot(xs, meds, marker="o", color="#1f77b4")
    ax.vlines(xs, [p.low for p in points], [p.high for p in points], color="#1f77b4")
    ax.set_xticks(xs, [f"{p.label}\nn={p.n}" for p in points])
    lo, hi, ticks, tick = axis(points, unit)
    ax.set_ylim(lo, hi)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick(v)))
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("build")
    ax.grid(axis="y", color="#ddd")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def write_image(points: list[Point], *, title: str, ylabel: str, unit: str, path: Path) -> None:
    """Write ``path`` as SVG or PNG, chosen by its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".svg":
        path.write_text(svg_plot(points, title=title, ylabel=ylabel, unit=unit))
    elif suffix == ".png":
        png_plot(points, title=title, ylabel=ylabel, unit=unit, path=path)
    else:
        raise ValueError(f"--output {path}: give a .svg or .png file name")
