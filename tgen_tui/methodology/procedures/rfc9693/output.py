"""The RFC 9693 procedures' tables, text lines and plots."""

from __future__ import annotations

from tgen_tui.methodology.kit.output import search_lines
from tgen_tui.methodology.kit.procedure import PathFn, Table
from tgen_tui.methodology.kit.tables import summary_rows
from tgen_tui.results.plot import chart


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
