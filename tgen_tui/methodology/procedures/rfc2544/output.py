"""The RFC 2544 / RFC 8219 procedures' tables, text lines and plots, from their reports."""

from __future__ import annotations

from tgen_tui.methodology.kit.output import search_lines
from tgen_tui.methodology.kit.procedure import PathFn, Table
from tgen_tui.methodology.kit.spacing import share_pct
from tgen_tui.methodology.kit.tables import summary_rows
from tgen_tui.results.models import LatencyReport, LossReport, Report, ThroughputReport
from tgen_tui.results.plot import chart

US = 1000.0  # ns per us


def spaced_row(per) -> tuple[str, list]:
    """The share of gaps within 10 % of the asked gap over each frame size's trials."""
    return ("spaced ±10 % (%)", [share_pct(t.trial for t in fs.trials) for fs in per])


def throughput_tables(report: ThroughputReport) -> list[Table]:
    per = report.by_frame_size
    cols = [fs.frame_size for fs in per]
    rows = summary_rows("throughput", "frames/s per direction", [fs.summary for fs in per])
    h = [fs.summary.h.median if fs.summary.h is not None else None for fs in per]
    rows.append(("h (lowest failing), median", h))
    return [("RFC 2544 throughput", "frame size (B)", cols, rows)]


def throughput_plots(report: ThroughputReport, path: PathFn) -> list[str]:
    per = report.by_frame_size
    x = [fs.frame_size for fs in per]
    y = [fs.summary.median or 0 for fs in per]
    return [
        chart(
            "Throughput against frame size (median)",
            "frame size (B)",
            "frames/s",
            [("median", x, y)],
            kind="bar" if len(x) < 3 else "line",
            path=path("throughput_vs_frame_size"),
        )
    ]


def loss_tables(report: LossReport) -> list[Table]:
    out = []
    for fs in report.frame_loss:
        pts = fs.points
        out.append(
            (
                f"RFC 2544 frame loss rate, {fs.frame_size} B (max {fs.max_rate:,.0f} fps)",
                "offered load (%)",
                [p.load_pct for p in pts],
                [
                    ("offered rate (fps)", [p.rate_pps for p in pts]),
                    ("frame loss (%)", [round(p.flr_pct, 4) for p in pts]),
                    ("valid", ["yes" if p.trial.valid else "no" for p in pts]),
                    ("spaced ±10 % (%)", [share_pct([p.trial]) for p in pts]),
                ],
            )
        )
    return out


def loss_plots(report: LossReport, path: PathFn) -> list[str]:
    series = [
        (f"{fs.frame_size} B", [p.load_pct for p in fs.points], [p.flr_pct for p in fs.points])
        for fs in report.frame_loss
    ]
    return [
        chart(
            "Frame loss against offered load",
            "offered load (% of max)",
            "frame loss (%)",
            series,
            path=path("loss_vs_load"),
        )
    ]


def latency_tables(report: LatencyReport) -> list[Table]:
    per = report.by_frame_size
    cols = [fs.frame_size for fs in per]
    rows = summary_rows("TL", "us", [fs.summary.get("tl_ns") for fs in per], per=US)
    rows += summary_rows("WCL", "us", [fs.summary.get("wcl_ns") for fs in per], per=US)[:3]
    rows.append(("rate (fps per direction)", [fs.rate_pps for fs in per]))
    rows.append(spaced_row(per))
    return [("RFC 8219 latency", "frame size (B)", cols, rows)]


def pdv_tables(report: LatencyReport) -> list[Table]:
    per = report.by_frame_size
    cols = [fs.frame_size for fs in per]
    rows = summary_rows("PDV", "us", [fs.summary.get("pdv_ns") for fs in per], per=US)
    rows.append(("rate (fps per direction)", [fs.rate_pps for fs in per]))
    rows.append(spaced_row(per))
    return [("RFC 8219 pdv", "frame size (B)", cols, rows)]


def latency_source_lines(report: Report) -> list[str]:
    """Where the latencies come from (kernel stamps or the signature) and the floor."""
    src = report.latency_source
    if not src:
        return []
    fl = report.latency_floor_ns
    return [
        f"latency source: {src}"
        + (" (the kernel's transmit and receive timestamps)" if src == "kernel" else "")
        + (
            f"; tester floor {fl / 1000:.1f} us back to back (tgen calibrate)"
            if fl is not None
            else "; tester floor not measured (tgen calibrate)"
        )
    ]


def histograms(figures: tuple[tuple[str, str], ...]):
    """Latency plots: a histogram over the trials of each (label, figure) per frame size."""

    def draw(report: LatencyReport, path: PathFn) -> list[str]:
        texts = []
        for fs in report.by_frame_size:
            figs = [t.figures for t in fs.trials]
            series: list[tuple[str, list[float], list[float]]] = [
                (label, [], [v / US for f in figs if (v := getattr(f, key)) is not None])
                for label, key in figures
            ]
            texts.append(
                chart(
                    f"Latency histogram over the trials, {fs.frame_size} B",
                    "latency (us)",
                    "trials",
                    series,
                    kind="hist",
                    path=path(f"latency_histogram_{fs.frame_size}"),
                )
            )
        return texts

    return draw


def throughput_lines(report: ThroughputReport) -> list[str]:
    """One line per repeated search (every frame size's)."""
    return search_lines(report.searches)
