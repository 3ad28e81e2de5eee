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

from functools import partial

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.kit.search import SearchResult, binary_search
from tgen_tui.methodology.kit.setup import load, make_runner, max_rate_for, preflight
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.trial import TrialRunner
from tgen_tui.methodology.procedures.rfc9693.stateful import stateful_trial
from tgen_tui.methodology.procedures.sweep.sessions import with_sessions


async def run_sweep(state: RunState) -> None:
    """Each session count in turn: narrow the profile, then :func:`_point`."""
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
            preflight(state, prof, compiled, p.duration_s, stateful=True)
        row: dict = {"sessions_requested": want, "sessions": s}
        rows.append(row)
        await _point(state, runner, s, mr, row)


async def _point(state: RunState, runner: TrialRunner, s: int, mr: float, row: dict) -> None:
    """One point of the sweep, recorded in ``row`` as it goes: the connection-rate search,
    the fill, the throughput search over the full table, the conntrack count after it."""
    p = state.params
    assert runner.dut is not None
    state.note(f"sweep: {s:,} sessions: connection rate search")
    cps = SearchResult(max_rate=mr, error=p.error)
    await binary_search(
        partial(stateful_trial, state, runner, s),
        mr,
        p.error,
        confirm=False,
        result=cps,
        on_trial=state.on_trial(bounds=False, phase="cps", sessions=s),
    )
    row["cps"] = cps.l_pps
    row["cps_search"] = cps
    fill_rate = cps.l_pps or min(t.rate_pps for t in cps.trials)
    fill = await stateful_trial(state, runner, s, fill_rate, "fill")
    state.trial_done(fill, phase="fill", sessions=s)
    rise = fill.extra.conntrack_rise
    row["filled"] = rise
    row["fill_passed"] = fill.passed
    if rise is None or rise < s:
        state.warnings.append(f"{s:,} sessions: the fill opened {rise} of {s:,} entries")
    state.note(f"sweep: {s:,} sessions: throughput search over the full table")
    tput = SearchResult(max_rate=mr, error=p.error)
    await binary_search(
        runner.throughput_trial,
        mr,
        p.error,
        result=tput,
        on_trial=state.on_trial(bounds=False, phase="throughput", sessions=s),
    )
    row["throughput"] = tput.l_pps
    row["throughput_search"] = tput
    row["conntrack_after"] = runner.dut.count()
    state.note(
        f"sweep: {s:,} sessions: {row['cps']:,.0f} conn/s, {row['throughput']:,.0f} fps "
        f"(conntrack {row['conntrack_after']})"
    )
