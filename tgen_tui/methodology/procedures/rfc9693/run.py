"""RFC 9693 stateful NAT procedures: connection establishment rate (cps), conntrack table
capacity and tear-down rate, over phase-1 trials of N unique tuples with the DUT's state
reset before each, and phase 2 (the Responder replies to the tuples it learned).
"""

from __future__ import annotations

from functools import partial

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.kit.search import RepeatedSearch, SearchResult, binary_search
from tgen_tui.methodology.kit.setup import max_rate_for, search_trials_estimate
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.rfc9693.capacity import CapacityResult, capacity_search
from tgen_tui.methodology.procedures.rfc9693.stateful import stateful_setup, stateful_trial
from tgen_tui.results.models import Trial


async def run_cps(state: RunState) -> None:
    p = state.params
    prof, runner, compiled, size, n, space = stateful_setup(state)
    mr = max_rate_for(p, compiled, size)
    rec = RepeatedSearch("cps", "conn/s")
    state.body |= {"connections": n, "unique_space": space, "max_rate": mr, "record": rec}
    if state.progress:
        state.progress.expected = p.repeats * search_trials_estimate(mr, p.error)

    async def trial(rate: float, kind: str) -> Trial:
        return await stateful_trial(state, runner, n, rate, kind)

    for i in range(p.repeats):
        s = SearchResult(max_rate=mr, error=p.error)
        rec.searches.append(s)
        await binary_search(
            trial,
            mr,
            p.error,
            confirm=False,  # a phase-1 trial is N frames long; l is re-tested by each repeat
            result=s,
            on_trial=state.on_trial(search=i + 1, N=n),
        )
        if p.phase2 == "final" and s.l_pps > 0 and state.body.get("phase2_runner"):
            t = await stateful_trial(state, runner, n, s.l_pps, "confirm", phase2=True)
            s.trials.append(t)
            s.confirmed = t.passed
            state.trial_done(t, l_pps=s.l_pps, h_pps=s.h_pps, search=i + 1, phase="1+2")
        state.note(
            f"cps search {i + 1}/{p.repeats}: l {s.l_pps:,.0f} h "
            f"{'-' if s.h_pps is None else f'{s.h_pps:,.0f}'} conn/s ({s.status})"
        )


async def run_capacity(state: RunState) -> None:
    p = state.params
    prof, runner, compiled, size, n, space = stateful_setup(state)
    mr = max_rate_for(p, compiled, size)
    res = CapacityResult(c0=p.c0, beta=p.beta, gamma=p.gamma, error=p.e)
    state.body |= {"unique_space": space, "max_rate": mr, "capacity": res}
    if p.c0 > space:
        raise BadInput(
            f"--c0 {p.c0:,} is more than the profile's unique port combinations ({space:,}): "
            "widen the port ranges (profiles/rfc9693-capacity.yaml has 6.4 M) or lower --c0"
        )
    if state.progress:
        state.progress.expected = search_trials_estimate(mr, p.error) + 12

    async def cps_search(c: int) -> SearchResult:
        if c > space:
            raise BadInput(f"the search needs {c:,} connections; the profile has {space:,}")
        s = SearchResult(max_rate=mr, error=p.error)
        await binary_search(
            partial(stateful_trial, state, runner, c),
            mr,
            p.error,
            confirm=False,
            result=s,
            on_trial=state.on_trial(phase="R0", C=c),
        )
        state.note(f"R0 search with C = {c:,}: {s.l_pps:,.0f} conn/s ({s.status})")
        return s

    async def cps_trial(c: int, rate: float) -> Trial:
        if c > space:
            t = Trial(rate_pps=rate, kind="capacity", passed=False)
            t.reason = f"{c:,} connections exceed the profile's {space:,} unique combinations"
            return t
        t = await stateful_trial(state, runner, c, rate, "capacity")
        state.trial_done(t, phase="C", C=c)
        return t

    await capacity_search(
        cps_search, cps_trial, c0=p.c0, beta=p.beta, gamma=p.gamma, error=p.e, result=res
    )
    if res.c0_used and res.c0_used != p.c0:
        state.deviations.append(
            f"no rate passed with C0 = {p.c0:,} connections: C0 halved to {res.c0_used:,}"
        )


async def run_teardown(state: RunState) -> None:
    """Load N connections, time a full flush, subtract an empty table's flush time."""
    import trio

    p = state.params
    prof, runner, compiled, size, n, space = stateful_setup(state)
    rate = float(p.r or min(50_000.0, max_rate_for(p, compiled, size)))
    rows: list[dict] = []
    state.body |= {"connections": n, "load_rate": rate, "repeats": rows}
    if state.progress:
        state.progress.expected = p.repeats
    for i in range(p.repeats):
        t = await stateful_trial(state, runner, n, rate, "load")
        state.trial_done(t, repeat=i + 1, N=n)
        loaded = await trio.to_thread.run_sync(runner.dut.count)
        t_n = await trio.to_thread.run_sync(runner.dut.reset)
        after = await trio.to_thread.run_sync(runner.dut.count)
        t_0 = await trio.to_thread.run_sync(runner.dut.reset)
        dt = t_n - t_0
        row = {
            "repeat": i,
            "loaded_entries": loaded,
            "entries_after_flush": after,
            "flush_s": round(t_n, 6),
            "empty_flush_s": round(t_0, 6),
            "rate_per_s": (loaded / dt) if (loaded and dt > 0) else None,
            "load_trial": t,
        }
        if loaded is not None and loaded < n:
            state.warnings.append(
                f"repeat {i + 1}: only {loaded:,} of {n:,} entries were loaded before the flush"
            )
        rows.append(row)
        state.note(
            f"teardown {i + 1}/{p.repeats}: {loaded:,} entries flushed in {t_n * 1000:.1f} ms "
            f"(empty table {t_0 * 1000:.1f} ms): "
            + (f"{row['rate_per_s']:,.0f}/s" if row["rate_per_s"] else "no rate (flush too fast)")
        )
