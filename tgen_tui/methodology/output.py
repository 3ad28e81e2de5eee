"""Turning a methodology report document into text, tables (USERS.md §1 layout) and plots."""

from __future__ import annotations

import os

from tgen_tui.methodology.plots import plot
from tgen_tui.methodology.report import markdown_table, summary_rows


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if isinstance(v, int | float) else str(v)


def _us(ns) -> float | None:
    return None if ns is None else ns / 1000.0


def tables(doc: dict) -> list[tuple]:
    """(title, header, columns, rows) for the doc's test."""
    test = doc.get("test", "")
    out: list[tuple] = []
    if test == "rfc2544-throughput":
        per = doc.get("by_frame_size", [])
        cols = [fs["frame_size"] for fs in per]
        rows = summary_rows("throughput", "frames/s per direction", [fs["summary"] for fs in per])
        rows.append(
            ("h (lowest failing), median", [fs["summary"]["h"].get("median") for fs in per])
        )
        out.append(("RFC 2544 throughput", "frame size (B)", cols, rows))
    elif test == "rfc2544-loss":
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
    elif test in ("rfc2544-latency", "rfc2544-pdv"):
        per = doc.get("by_frame_size", [])
        cols = [fs["frame_size"] for fs in per]
        if test.endswith("latency"):
            rows = summary_rows("TL", "us", [_scale(fs["summary"]["tl_ns"]) for fs in per])
            rows += summary_rows("WCL", "us", [_scale(fs["summary"]["wcl_ns"]) for fs in per])[:3]
        else:
            rows = summary_rows("PDV", "us", [_scale(fs["summary"]["pdv_ns"]) for fs in per])
        rows.append(("rate (fps per direction)", [fs["rate_pps"] for fs in per]))
        out.append((f"RFC 8219 {test.split('-')[1]}", "frame size (B)", cols, rows))
    elif test == "rfc9693-cps":
        s = doc.get("summary", {})
        rows = summary_rows("max. connection establishment rate", "conn/s", [s])
        out.append(
            (
                "RFC 9693 connection establishment rate",
                "connections",
                [doc.get("connections")],
                rows,
            )
        )
    elif test == "rfc9693-capacity":
        s = doc.get("summary", {})
        out.append(
            (
                "RFC 9693 conntrack table capacity",
                "figure",
                ["value"],
                [
                    ("capacity (connections)", [s.get("capacity")]),
                    ("lowest failing size", [s.get("h_connections")]),
                    ("R0 (conn/s)", [s.get("r0")]),
                ],
            )
        )
    elif test == "rfc9693-teardown":
        s = doc.get("summary", {})
        rows = summary_rows("tear-down rate", "conn/s", [s])
        out.append(
            ("RFC 9693 connection tear-down rate", "connections", [doc.get("connections")], rows)
        )
    elif test.startswith("scaleup"):
        rows_ = doc.get("rows", [])
        unit = doc.get("unit", "")
        label = "max. connection establishment rate" if "cps" in test else "throughput"
        out.append(
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
        )
    return out


def _round3(v):
    return None if v is None else round(v, 3)


def _scale(s: dict) -> dict:
    return {k: (v / 1000.0 if isinstance(v, int | float) and k != "n" else v) for k, v in s.items()}


def render(doc: dict) -> str:
    """The text report: header, tables, warnings and deviations."""
    lines = [
        f"{doc.get('test')}  profile {doc.get('profile_path')}  seed {doc.get('seed')}"
        + ("  [QUICK]" if doc.get("quick") else "")
        + ("  (PARTIAL: interrupted)" if doc.get("partial") else "")
    ]
    dut = doc.get("dut") or {}
    if dut:
        lines.append(
            "DUT "
            + ", ".join(
                f"{k} {v}"
                for k, v in dut.items()
                if k
                in (
                    "source",
                    "kernel",
                    "cpus",
                    "conntrack_max",
                    "conntrack_buckets",
                    "udp_timeout_s",
                )
            )
            + (f", lab {dut['lab']}" if dut.get("lab") else "")
        )
    for title, header, cols, rows in tables(doc):
        lines += ["", title, markdown_table(header, cols, rows)]
    test = doc.get("test", "")
    if test in ("rfc2544-throughput", "rfc9693-cps"):
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
    if test == "rfc9693-capacity" and doc.get("capacity"):
        for st in doc["capacity"]["steps"]:
            lines.append(
                f"  {st['phase']:<7} C {st['connections']:>10,}  rate {st['rate']:>12,.0f}  "
                f"{'pass' if st['passed'] else 'fail'}"
                + (
                    f"  ({st['trial']['reason']})"
                    if st.get("trial") and st["trial"]["reason"]
                    else ""
                )
            )
    if test == "rfc9693-cps":
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
    if test in ("rfc2544-latency", "rfc2544-pdv") and doc.get("latency_source"):
        fl = doc.get("latency_floor_ns")
        lines.append(
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
        )
    for w in doc.get("deviations", []):
        lines.append(f"deviation: {w}")
    for w in doc.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def plots(doc: dict, directory: str | None, fmt: str = "svg") -> tuple[str, list[str]]:
    """Draw the test's plots in the terminal and into ``directory``: (text, file paths)."""
    if directory:
        os.makedirs(directory, exist_ok=True)
    written: list[str] = []

    def path(name: str) -> str | None:
        if not directory:
            return None
        written.append(os.path.join(directory, f"{name}.{fmt}"))
        return written[-1]

    test = doc.get("test", "")
    texts = []
    if test == "rfc2544-throughput":
        per = doc.get("by_frame_size", [])
        x = [fs["frame_size"] for fs in per]
        y = [fs["summary"].get("median") or 0 for fs in per]
        texts.append(
            plot(
                "Throughput against frame size (median)",
                "frame size (B)",
                "frames/s",
                [("median", x, y)],
                kind="bar" if len(x) < 3 else "line",
                path=path("throughput_vs_frame_size"),
            )
        )
    elif test == "rfc2544-loss":
        series = [
            (
                f"{fs['frame_size']} B",
                [p["load_pct"] for p in fs["points"]],
                [p["flr_pct"] for p in fs["points"]],
            )
            for fs in doc.get("frame_loss", [])
        ]
        texts.append(
            plot(
                "Frame loss against offered load",
                "offered load (% of max)",
                "frame loss (%)",
                series,
                path=path("loss_vs_load"),
            )
        )
    elif test in ("rfc2544-latency", "rfc2544-pdv"):
        key = "pdv_ns" if test.endswith("pdv") else None
        for fs in doc.get("by_frame_size", []):
            figs = [t["figures"] for t in fs["trials"]]
            if key:
                series = [
                    ("PDV", [], [f["pdv_ns"] / 1000 for f in figs if f["pdv_ns"] is not None])
                ]
            else:
                series = [
                    ("TL", [], [f["tl_ns"] / 1000 for f in figs if f["tl_ns"] is not None]),
                    ("WCL", [], [f["wcl_ns"] / 1000 for f in figs if f["wcl_ns"] is not None]),
                ]
            texts.append(
                plot(
                    f"Latency histogram over the trials, {fs['frame_size']} B",
                    "latency (us)",
                    "trials",
                    series,
                    kind="hist",
                    path=path(f"latency_histogram_{fs['frame_size']}"),
                )
            )
    elif test == "rfc9693-capacity" and doc.get("capacity"):
        steps = [s for s in doc["capacity"]["steps"]]
        ok = [s for s in steps if s["passed"]]
        bad = [s for s in steps if not s["passed"]]
        texts.append(
            plot(
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
        )
    elif test.startswith("scaleup"):
        rows = doc.get("rows", [])
        texts.append(
            plot(
                "Rate against cores (median)",
                "cores",
                doc.get("unit", ""),
                [("median", [r["cores"] for r in rows], [r["median"] or 0 for r in rows])],
                kind="bar",
                path=path("scaleup_rate"),
            )
        )
        texts.append(
            plot(
                "Relative scale-up",
                "cores",
                "rate_k / (k x rate_1)",
                [
                    (
                        "relative",
                        [r["cores"] for r in rows],
                        [r["relative_scaleup"] or 0 for r in rows],
                    )
                ],
                kind="bar",
                path=path("scaleup_relative"),
            )
        )
    return "\n".join(t for t in texts if t), [w for w in written if os.path.exists(w)]


def _sender_limited(search: dict) -> str:
    """Say so when the trial at h failed because the sender, not the DUT, fell behind."""
    h = search.get("h_pps")
    at_h = [t for t in search.get("trials", []) if t["rate_pps"] == h and t["kind"] != "confirm"]
    if at_h and at_h[-1]["verdict"] == "invalid":
        return "; h was invalid (the tester fell behind): the DUT may do more"
    return ""
