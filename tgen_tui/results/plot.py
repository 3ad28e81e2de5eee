"""Every plot of tgen: one stack. Files (SVG, PNG) are drawn by matplotlib (Agg backend),
terminal plots by plotext; the console's sparklines and the trend's text plot are text.

  chart        a plot of series (line, bar, scatter, histogram): the methodology reports
  text_plot    the trend of one metric over builds, in the terminal (median and range)
  write_image  the same trend as an SVG or PNG file
  sparkline    '▁▃▇█' for the console
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


class PlotUnavailable(Exception):
    """The image format needs a library that is not installed."""


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(
            "writing plot files needs matplotlib, a dependency of tgen-tui: reinstall it (pip install tgen-tui)"
        ) from None
    return plt


def write_image(points: list[Point], *, title: str, ylabel: str, unit: str, path: Path) -> None:
    """The trend as a file: SVG or PNG, chosen by the suffix of ``path``."""
    suffix = path.suffix.lower()
    if suffix not in (".svg", ".png"):
        raise ValueError(f"--output {path}: give a .svg or .png file name")
    plt = _pyplot()
    from matplotlib.ticker import FixedLocator, FuncFormatter

    fig, ax = plt.subplots(figsize=(7.2, 4.0), dpi=100)
    xs = list(range(len(points)))
    ax.plot(xs, [p.median for p in points], marker="o", color="#1f77b4")
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
    fig.savefig(path, format=suffix[1:])
    plt.close(fig)


# ---------------------------------------------------------------- series (methodology)

Series = tuple[str, Sequence[float], Sequence[float]]  # label, x, y


def _terminal(title: str, xlabel: str, ylabel: str, series: Sequence[Series], kind: str) -> str:
    import plotext as plt

    plt.clear_figure()
    plt.plotsize(72, 18)
    plt.theme("clear")
    for label, x, y in series:
        if kind == "bar":
            plt.bar([str(v) for v in x], list(y), label=label)
        elif kind == "hist":
            plt.hist(list(y), bins=20, label=label)
        elif kind == "scatter":
            plt.scatter(list(x), list(y), label=label)
        else:
            plt.plot(list(x), list(y), label=label, marker="dot")
    plt.title(title)
    plt.xlabel(xlabel)
    plt.ylabel(ylabel)
    return plt.uncolorize(plt.build())


def _file(
    path: str, title: str, xlabel: str, ylabel: str, series: Sequence[Series], kind: str, logx: bool
) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, x, y in series:
        if kind == "bar":
            ax.bar([str(v) for v in x], list(y), label=label)
        elif kind == "hist":
            ax.hist(list(y), bins=20, alpha=0.6, label=label)
        elif kind == "scatter":
            ax.scatter(list(x), list(y), label=label)
        else:
            ax.plot(list(x), list(y), marker="o", label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if len(series) > 1 or any(s[0] for s in series):
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chart(
    title: str,
    xlabel: str,
    ylabel: str,
    series: Sequence[Series],
    *,
    kind: str = "line",
    path: str | None = None,
    logx: bool = False,
) -> str:
    """Draw ``series`` in the terminal (returned as text) and, with ``path``, to a file
    (the suffix chooses SVG or PNG). ``kind``: line, bar, scatter or hist."""
    series = [s for s in series if len(s[2])]
    if not series:
        return ""
    if path:
        _file(path, title, xlabel, ylabel, series, kind, logx)
    return _terminal(title, xlabel, ylabel, series, kind)
