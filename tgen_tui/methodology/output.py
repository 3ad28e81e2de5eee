"""Turning a methodology report document into text, tables (USERS.md §1 layout) and plots.

:func:`tables`, :func:`render` and :func:`plots` are the same for every test; each
procedure's own tables, text lines and plots are here, and
:mod:`tgen_tui.methodology.registry` says which belong to which test.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from tgen_tui.methodology.drops import drops_table
from tgen_tui.methodology.report import markdown_table, summary_rows
from tgen_tui.results.plot import chart

Table = tuple  # (title, header, columns, rows)
PathFn = Callable[[str], "str | None"]  # plot name -> file path (None: terminal only)


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if isinstance(v, int | float) else str(v)


def _round3(v):
    return None if v is None else round(v, 3)


def _scale(s: dict) -> dict:
    return {k: (v / 1000.0 if isinstance(v, int | float) and k != "n" else v) for k, v in s.items()}


# ---------------------------------------------------------------------------- the same for all


def tables(doc: dict) -> list[Table]:
    """(title, header, columns, rows) for the doc's test."""
    from tgen_tui.methodology.registry import procedure

    return procedure(doc.get("test", "")).tables(doc) + drops_table(doc)


DUT_KEYS = ("source", "kernel", "cpus", "conntrack_max", "conntrack_buckets", "udp_timeout_s")


def render(doc: dict) -> str:
    """The text report: header, tables, the test's own lines, warnings and deviations."""
    from tgen_tui.methodology.registry import procedure

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
    for title, header, cols, rows in tables(doc):
        lines += ["", title, markdown_table(header, cols, rows)]
    lines += procedure(doc.get("test", "")).lines(doc)
    for w in doc.get("deviations", []):
        lines.append(f"deviation: {w}")
    for w in doc.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def plots(doc: dict, directory: str | None, fmt: str = "svg") -> tuple[str, list[str]]:
    """Draw the test's plots in the terminal and into ``directory``: (text, file paths)."""
    from tgen_tui.methodology.registry import procedure

    if directory:
        os.makedirs(directory, exist_ok=True)
    written: list[str] = []

    def path(name: str) -> str | None:
        if not directory:
            return None
        written.append(os.path.join(directory, f"{name}.{fmt}"))
        return written[-1]

    texts = procedure(doc.get("test", "")).plots(doc, path)
    return "\n".join(t for t in texts if t), [w for w in written if os.path.exists(w)]


def no_lines(doc: dict) -> list[str]:
    return []


def no_plots(doc: dict, path: PathFn) -> list[str]:
    return []


# ---------------------------------------------------------------------------- RFC 2544


def throughput_tables(doc: dict) -> list[Table]:
    per = doc.get("by_frame_size", [])
    cols = [fs["frame_size"] for fs in per]
    rows = summary_rows("throughput", "frames/s per direction", [fs["summary"] for fs in per])
    rows.append(("h (lowest failing), median", [fs["summary"]["h"].get("median") for fs in per]))
    return [("RFC 2544 throughput", "frame size (B)", cols, rows)]


def search_lines(doc: dict) -> list[str]:
    """One line per repeated search: l, h, status, halving trials, confirmation."""
    lines = []
    for i, s in enumerate(doc.get("searches", [])):
        fs = f"{s['frame_size']} B " if "frame_size" in s else ""
        lines.append(
            f"  {fs}search {i + 1}: l {_fmt(s['l_pps'])}  h {_fmt(s['h_pps'])}  "
            f"{s['status']}, {s['n_trials']['search']} halving trials"
            + (
                f", confirmation {'passed' if s['confirmed'] else 'FAILED'}"
                if s["confirmed"] is not None
                else ""
            )
            + _sender_limited(s)
        )
    return lines


def throughput_plots(doc: dict, path: PathFn) -> list[str]:
    per = doc.get("by_frame_size", [])
    x = [fs["frame_size"] for fs in per]
    y = [fs["summary"].get("median") or 0 for fs in per]
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


def loss_tables(doc: dict) -> list[Table]:
    out = []
    for fs in doc.get("frame_loss", []):
        pts = fs["points"]
        out.append(
            (
                f"RFC 2544 frame loss rate, {fs['frame_size']} B (max {fs['max_rate']:,.0f} fps)",
                "offered load (%)",
                [p["load_pct"] for p in pts],
                [
                    ("offered rate (fps)", [p["rate_pps"] for p in pts]),
                    ("frame loss (%)", [round(p["flr_pct"], 4) for p in pts]),
                    ("valid", ["yes" if p["trial"]["valid"] else "no" for p in pts]),
                ],
            )
        )
    return out


def loss_plots(doc: dict, path: PathFn) -> list[str]:
    series = [
        (
            f"{fs['frame_size']} B",
            [p["load_pct"] for p in fs["points"]],
            [p["flr_pct"] for p in fs["points"]],
        )
        for fs in doc.get("frame_loss", [])
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


def latency_tables(doc: dict) -> list[Table]:
    per = doc.get("by_frame_size", [])
    cols = [fs["frame_size"] for fs in per]
    rows = summary_rows("TL", "us", [_scale(fs["summary"]["tl_ns"]) for fs in per])
    rows += summary_rows("WCL", "us", [_scale(fs["summary"]["wcl_ns"]) for fs in per])[:3]
    rows.append(("rate (fps per direction)", [fs["rate_pps"] for fs in per]))
    return [("RFC 8219 latency", "frame size (B)", cols, rows)]


def pdv_tables(doc: dict) -> list[Table]:
    per = doc.get("by_frame_size", [])
    cols = [fs["frame_size"] for fs in per]
    rows = summary_rows("PDV", "us", [_scale(fs["summary"]["pdv_ns"]) for fs in per])
    rows.append(("rate (fps per direction)", [fs["rate_pps"] for fs in per]))
    return [("RFC 8219 pdv", "frame size (B)", cols, rows)]


def latency_source_lines(doc: dict) -> list[str]:
    if not doc.get("latency_source"):
        return []
    fl = doc.get("latency_floor_ns")
    return [
        f"latency source: {doc['latency_source']}"
        + (
            " (the kernel's transmit and receive timestamps)"
            if doc["latency_source"] == "kernel"
            else ""
        )
        + (
            f"; tester floor {fl / 1000:.1f} us back to back (tgen calibrate)"
            if fl is not None
            else "; tester floor not measured (tgen calibrate)"
        )
    ]


def histograms(figures: tuple[tuple[str, str], ...]):
    """Latency plots: a histogram over the trials of each (label, figure) per frame size."""

    def draw(doc: dict, path: PathFn) -> list[str]:
        texts = []
        for fs in doc.get("by_frame_size", []):
            figs = [t["figures"] for t in fs["trials"]]
            series = [
                (label, [], [f[key] / 1000 for f in figs if f[key] is not None])
                for label, key in figures
            ]
            texts.append(
                chart(
                    f"Latency histogram over the trials, {fs['frame_size']} B",
                    "latency (us)",
                    "trials",
                    series,
                    kind="hist",
                    path=path(f"latency_histogram_{fs['frame_size']}"),
                )
            )
        return texts

    return draw


# ---------------------------------------------------------------------------- RFC 9693


def cps_tables(doc: dict) -> list[Table]:
    rows = summary_rows("max. connection establishment rate", "conn/s", [doc.get("summary", {})])
    return [
        ("RFC 9693 connection establishment rate", "connections", [doc.get("connections")], rows)
    ]


def cps_lines(doc: dict) -> list[str]:
    lines = search_lines(doc)
    for i, s in enumerate(doc.get("searches", [])):
        for t in s["trials"]:
            p2 = t.get("extra", {}).get("phase2")
            if p2 and t["kind"] == "confirm":
                lines.append(
                    f"  search {i + 1} phase 2 at {p2['rate_pps']:,.0f} replies/s "
                    f"({p2['order']}) to {p2.get('learned_tuples', 0):,} learned tuples: "
                    f"sent {p2['tx_frames']:,}, back through the NAT "
                    f"{p2['rx_frames']:,}, lost {p2['lost']:,}: {p2['verdict']}"
                )
            lrn = t.get("extra", {}).get("learned")
            if lrn and not p2 and t["kind"] == "confirm":
                lines.append(
                    f"  search {i + 1} phase 2 not run: {t.get('reason') or 'phase 1 failed'}"
                )
    return lines


def capacity_tables(doc: dict) -> list[Table]:
    s = doc.get("summary", {})
    rows = [
        ("capacity (connections)", [s.get("capacity")]),
        ("lowest failing size", [s.get("h_connections")]),
        ("R0 (conn/s)", [s.get("r0")]),
    ]
    return [("RFC 9693 conntrack table capacity", "figure", ["value"], rows)]


def capacity_lines(doc: dict) -> list[str]:
    if not doc.get("capacity"):
        return []
    return [
        f"  {st['phase']:<7} C {st['connections']:>10,}  rate {st['rate']:>12,.0f}  "
        f"{'pass' if st['passed'] else 'fail'}"
        + (f"  ({st['trial']['reason']})" if st.get("trial") and st["trial"]["reason"] else "")
        for st in doc["capacity"]["steps"]
    ]


def capacity_plots(doc: dict, path: PathFn) -> list[str]:
    if not doc.get("capacity"):
        return []
    steps = doc["capacity"]["steps"]
    ok = [s for s in steps if s["passed"]]
    bad = [s for s in steps if not s["passed"]]
    return [
        chart(
            "Connection rate against table size",
            "connections",
            "conn/s (rate tested)",
            [
                ("pass", [s["connections"] for s in ok], [s["rate"] for s in ok]),
                ("fail", [s["connections"] for s in bad], [s["rate"] for s in bad]),
            ],
            kind="scatter",
            path=path("rate_vs_table_size"),
        )
    ]


def teardown_tables(doc: dict) -> list[Table]:
    rows = summary_rows("tear-down rate", "conn/s", [doc.get("summary", {})])
    return [("RFC 9693 connection tear-down rate", "connections", [doc.get("connections")], rows)]


# ---------------------------------------------------------------------------- scale-up


def scaleup_tables(doc: dict) -> list[Table]:
    rows_ = doc.get("rows", [])
    from tgen_tui.methodology.registry import scaled

    unit = doc.get("unit", "")
    label = scaled(doc.get("test", "")).label
    return [
        (
            f"Scale-up: {doc.get('scaled')}",
            "tester cores",
            [r["cores"] for r in rows_],
            [
                (f"{label}, median ({unit})", [r["median"] for r in rows_]),
                (f"{label}, min ({unit})", [r["min"] for r in rows_]),
                (f"{label}, max ({unit})", [r["max"] for r in rows_]),
                ("relative scale-up", [_round3(r["relative_scaleup"]) for r in rows_]),
            ],
        )
    ]


def scaleup_plots(doc: dict, path: PathFn) -> list[str]:
    rows = doc.get("rows", [])
    cores = [r["cores"] for r in rows]
    return [
        chart(
            "Rate against cores (median)",
            "cores",
            doc.get("unit", ""),
            [("median", cores, [r["median"] or 0 for r in rows])],
            kind="bar",
            path=path("scaleup_rate"),
        ),
        chart(
            "Relative scale-up",
            "cores",
            "rate_k / (k x rate_1)",
            [("relative", cores, [r["relative_scaleup"] or 0 for r in rows])],
            kind="bar",
            path=path("scaleup_relative"),
        ),
    ]


def _sender_limited(search: dict) -> str:
    """Say so when the trial at h failed because the sender, not the DUT, fell behind."""
    h = search.get("h_pps")
    at_h = [t for t in search.get("trials", []) if t["rate_pps"] == h and t["kind"] != "confirm"]
    if at_h and at_h[-1]["verdict"] == "invalid":
        return "; h was invalid (the tester fell behind): the DUT may do more"
    return ""
