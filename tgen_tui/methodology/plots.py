"""Plots in the terminal (plotext) and as SVG/PNG files (matplotlib, Agg backend).

Each plot function takes plain lists and returns the terminal text; with ``path`` it also
writes the file (the suffix chooses SVG or PNG). Nothing is drawn by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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


def plot(
    title: str,
    xlabel: str,
    ylabel: str,
    series: Sequence[Series],
    *,
    kind: str = "line",
    path: str | None = None,
    logx: bool = False,
) -> str:
    """Draw ``series`` in the terminal (returned as text) and, with ``path``, to a file."""
    series = [s for s in series if len(s[2])]
    if not series:
        return ""
    if path:
        _file(path, title, xlabel, ylabel, series, kind, logx)
    return _terminal(title, xlabel, ylabel, series, kind)
