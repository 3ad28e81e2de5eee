"""Session-scale sweep (CSIT's NAT44 ladder): throughput and connection rate against the
number of sessions the DUT holds.

``tgen sweep PROFILE sessions=64512..4M --points 3`` runs, for each session count S (the
points spaced geometrically from the first to the last, or listed: ``sessions=1k,4k,16k``):

1. the profile's Initiator stream is narrowed to exactly S unique tuples (its source
   port range shrinks, or widens, to ceil(S / destination ports); the count actually
   used is reported);
2. a connection-rate search (RFC 9693 cps: each trial resets the DUT, opens S
   connections and checks that the conntrack count rose by S);
3. fill and verify: the S sessions are opened once more at the rate found (or the lowest
   tried) and the conntrack count is checked;
4. a throughput search (RFC 2544 binary search) of traffic over those S sessions, with
   the table full (trials do not reset the DUT); the conntrack count is read after it.

The report has one row per point (sessions, connection rate, throughput, conntrack) with
each point's searches; the plot shows both rates against the sessions.
"""

from __future__ import annotations

import math

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.output import PathFn, Table
from tgen_tui.methodology.run import RunState
from tgen_tui.results.plot import chart


def parse_sessions(text: str, points: int, count) -> list[int]:
    """``sessions=A..B`` (``points`` counts spaced geometrically) or ``sessions=A,B,C``;
    ``count`` parses one number (1k, 4M)."""
    key, sep, val = text.partition("=")
    if key.strip() != "sessions" or not sep or not val.strip():
        raise BadInput(f"sweep: {text!r}: give sessions=FIRST..LAST or sessions=A,B,C")
    if ".." in val:
        a, b = (int(count(x.strip(), "sessions")) for x in val.split("..", 1))
        if not 1 <= a < b:
            raise BadInput(f"sweep: {text!r}: need 1 <= FIRST < LAST")
        if points < 2:
            raise BadInput("--points must be at least 2")
        r = (b / a) ** (1 / (points - 1))
        out = [round(a * r**i) for i in range(points)]
        out[-1] = b
    else:
        out = [int(count(x.strip(), "sessions")) for x in val.split(",") if x.strip()]
    if not out or min(out) < 1:
        raise BadInput(f"sweep: {text!r}: session counts must be >= 1")
    return sorted(set(out))


def with_sessions(prof, sessions: int):
    """``prof`` whose first stream has exactly ``sessions`` unique tuples (or as close as
    its destination ports allow); (profile, sessions used)."""
    from tgen_tui.profiles.revalidate import revalidate

    s0 = prof.streams[0]
    l4 = s0.udp or s0.tcp
    if l4 is None or l4.src_port.mode != "unique":
        raise BadInput("sweep needs an Initiator stream with `mode: unique` ports")
    dst = l4.dst_port.span if l4.dst_port.mode == "unique" else 1
    src = max(1, math.ceil(sessions / dst))
    lo = int(l4.src_port.min)
    if lo + src - 1 > 65535:
        raise BadInput(
            f"sweep: {sessions:,} sessions need {src:,} source ports from {lo}: widen the "
            "destination port range or lower the source port minimum"
        )

    def change(d: dict) -> None:
        ports = (d["streams"][0].get("udp") or d["streams"][0].get("tcp"))["src_port"]
        ports["max"] = lo + src - 1

    return revalidate(prof, change), src * dst


async def run_sweep(state: RunState) -> None:
    from tgen_tui.methodology.rfc9693 import stateful_trial
    from tgen_tui.methodology.run import load, make_runner, max_rate_for, preflight
    from tgen_tui.methodology.search import SearchResult, binary_search

    p = state.params
    base = load(p)
    rows: list[dict] = state.body.setdefault("rows", [])
    for want in state.body["sessions"]:
        prof, s = with_sessions(base, want)
        runner, compiled = make_runner(p, prof, None)
        if runner.dut is None:
            raise BadInput("sweep fills the DUT's table: give dut.netns in the profile")
        size = prof.streams[0].size.fixed if hasattr(prof.streams[0].size, "fixed") else 64
        mr = max_rate_for(p, compiled, size)
        if not rows:  # environment, DUT settings, profile, deviations: once
            preflight(state, prof, compiled, p.duration_s)
        row: dict = {"sessions_requested": want, "sessions": s}
        rows.append(row)
        state.note(f"sweep: {s:,} sessions: connection rate search")
        cps = SearchResult(max_rate=mr, error=p.error)
        await binary_search(
            lambda r, k, s=s, runner=runner: stateful_trial(state, runner, s, r, k),
            mr,
            p.error,
            confirm=False,
            result=cps,
            on_trial=lambda s_, t, s=s: state.trial_done(t, phase="cps", sessions=s),
        )
        row["cps"] = cps.l_pps
        row["cps_search"] = cps.to_dict()
        fill_rate = cps.l_pps or min(t.rate_pps for t in cps.trials)
        fill = await stateful_trial(state, runner, s, fill_rate, "fill")
        state.trial_done(fill, phase="fill", sessions=s)
        rise = fill.extra.get("conntrack_rise")
        row["filled"] = rise
        row["fill_passed"] = fill.passed
        if rise is None or rise < s:
            state.warnings.append(f"{s:,} sessions: the fill opened {rise} of {s:,} entries")
        state.note(f"sweep: {s:,} sessions: throughput search over the full table")
        tput = SearchResult(max_rate=mr, error=p.error)
        await binary_search(
            lambda r, k, runner=runner: runner.throughput_trial(r, k),
            mr,
            p.error,
            result=tput,
            on_trial=lambda s_, t, s=s: state.trial_done(t, phase="throughput", sessions=s),
        )
        row["throughput"] = tput.l_pps
        row["throughput_search"] = tput.to_dict()
        row["conntrack_after"] = runner.dut.count()
        state.note(
            f"sweep: {s:,} sessions: {row['cps']:,.0f} conn/s, {row['throughput']:,.0f} fps "
            f"(conntrack {row['conntrack_after']})"
        )


def sweep_report(state: RunState, partial: bool) -> dict:
    rows = state.body.get("rows", [])
    return {
        "sweep": "sessions",
        "sessions": state.body.get("sessions", []),
        "rows": rows,
    }


def sweep_metrics(doc: dict) -> dict:
    out = {}
    for r in doc.get("rows", []):
        out[f"cps_{r['sessions']}"] = r.get("cps")
        out[f"throughput_{r['sessions']}"] = r.get("throughput")
    return out


def sweep_trials(state: RunState) -> list[dict]:
    return []


def sweep_tables(doc: dict) -> list[Table]:
    rows = doc.get("rows", [])
    return [
        (
            "Session-scale sweep",
            "sessions",
            [r["sessions"] for r in rows],
            [
                ("connection rate, l (conn/s)", [r.get("cps") for r in rows]),
                ("throughput, l (fps)", [r.get("throughput") for r in rows]),
                ("entries opened by the fill", [r.get("filled") for r in rows]),
                ("conntrack after the throughput search", [r.get("conntrack_after") for r in rows]),
            ],
        )
    ]


def sweep_plots(doc: dict, path: PathFn) -> list[str]:
    rows = doc.get("rows", [])
    x = [r["sessions"] for r in rows]
    return [
        chart(
            "Connection rate and throughput against sessions",
            "sessions",
            "per second",
            [
                ("conn/s", x, [r.get("cps") or 0 for r in rows]),
                ("fps", x, [r.get("throughput") or 0 for r in rows]),
            ],
            kind="line",
            path=path("sweep_sessions"),
        )
    ]


__all__ = [
    "parse_sessions",
    "run_sweep",
    "sweep_metrics",
    "sweep_plots",
    "sweep_report",
    "sweep_tables",
    "sweep_trials",
    "with_sessions",
]
