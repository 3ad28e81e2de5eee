"""RFC 9693's trial: phase 1 of N unique tuples with the DUT's state reset first, and
phase 2 (the Responder replies to the tuples it learned); the setup the stateful
procedures share (the Initiator's unique port space, the Responder's runner)."""

from __future__ import annotations

import time

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.kit.setup import frame_sizes_of, load, make_runner, preflight
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.trial import TrialRunner
from tgen_tui.methodology.procedures.rfc9693.tcpflow import tcp_trial
from tgen_tui.results.models import LearnedTuples, Phase2Trial, Trial


def unique_space(runner: TrialRunner) -> int:
    progs = [q for ps in runner.groups.values() for q in ps]
    return min((q.unique_space for q in progs), default=1)


def stateful_setup(state: RunState):
    p = state.params
    prof = load(p)
    size = frame_sizes_of(p, prof)[0]
    runner, compiled = make_runner(p, prof, None)
    if runner.dut is None:
        raise BadInput(
            "RFC 9693 tests reset the DUT before each trial: give dut.netns in the profile, "
            "--dut-netns, or --dut-reset 'COMMAND'"
        )
    space = unique_space(runner)
    if space <= 1:
        raise BadInput(
            f"{p.profile}: the Initiator stream needs `mode: unique` port fields "
            "(see profiles/nat44-stateful.yaml)"
        )
    n = p.n or space
    if n > space:
        raise BadInput(
            f"-N {n:,} is more than the profile's unique port combinations ({space:,}): "
            "widen the port ranges"
        )
    if p.m is not None and p.m > n:
        raise BadInput(
            f"-M {p.m:,} is more than -N {n:,}: the Responder's table could never fill "
            "(RFC 9693 fails such a trial)"
        )
    preflight(state, prof, compiled, p.duration_s, stateful=True)
    if p.proto == "tcp":  # connections are TCP handshakes (.tcpflow)
        from tgen_tui.methodology.procedures.rfc9693.tcpflow import responder_spec, tcp_setup

        spec = responder_spec(runner, prof)
        td = "none" if state.test.endswith("teardown") else p.tcp_teardown  # flush times them
        state.body["tcp"] = tcp_setup(state, prof, runner, spec, td)
        state.body["phase2_runner"] = None
        return prof, runner, compiled, size, n, space
    state.body["phase2_runner"] = _phase2_runner(state, prof, runner, n, space)
    return prof, runner, compiled, size, n, space


def _phase2_runner(state: RunState, prof, runner: TrialRunner, n: int, space: int):
    """The Responder's runner (:mod:`.phase2`), or None with the
    reason recorded: it needs a second port and the Responder's MACs (from a stream the
    profile sends from that port, else the lab's). Sets
    ``state.body["learn"]``: the port that learns in phase 1, its table file and M."""
    from tgen_tui.methodology.procedures.rfc9693.phase2 import (
        ResponderSpec,
        responder_profile,
        responder_program,
        veth_responder,
    )
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.session.learned import learn_options, new_table_path

    p = state.params
    if p.phase2 == "off":
        return None
    if len(runner.compiled.ports) < 2:
        state.warnings.append("phase 2 not run: the profile has no second (Responder) port")
        return None
    first = _first_port(runner)
    other = [q for q in runner.compiled.ports if q != first]
    initiators = [q for ps in runner.groups.values() for q in ps]
    responder = next((q.rx_port for q in initiators if q.rx_port in other), other[0])
    # the Responder's MACs: a stream the profile sends from that port, else read from its
    # veth into the DUT namespace (the lab's)
    own = next((s for s in prof.streams if s.port == responder), None)
    spec: ResponderSpec | None
    if own is not None and own.eth is not None:
        spec = ResponderSpec(responder, own.eth.src, own.eth.dst)
    else:
        port = runner.compiled.ports[responder]
        dut_ns = runner.dut.netns if runner.dut else None
        spec = veth_responder(responder, port.interface, port.netns, dut_ns) if dut_ns else None
    if spec is None:
        state.warnings.append(
            f"phase 2 not run: it needs the Responder's MACs: add a stream sent from port "
            f"{responder} (its eth src and dst are used), or run against the lab DUT"
        )
        return None
    path = new_table_path()
    m = p.m or n
    state.body["learn"] = {
        "path": path,
        "port": responder,
        "initiator_port": first,
        "max": m,
        "options": learn_options(responder, path, [q.index for q in initiators], m),
    }
    reply = responder_profile(prof, spec)
    compiled = responder_program(compile_profile(reply), path, p.responder_order)
    return TrialRunner(
        compiled,
        direction="reverse",
        timeout_s=p.timeout_s,
        settle_s=0.0,
        dut=runner.dut,
        **p.trial_options(),
    )


def _first_port(runner: TrialRunner) -> str:
    return next(iter(runner.compiled.ports))


async def stateful_trial(
    state: RunState, runner: TrialRunner, n: int, rate: float, kind: str, *, phase2=None
) -> Trial:
    """Phase 1 at ``rate`` with ``n`` unique tuples, the DUT reset first. Passes when all
    n arrived, the sender kept the rate, and the DUT's conntrack count rose by n. With
    phase 2 (``--phase2 every``, or the final trial), the Responder's port learns the
    translated tuples in phase 1 (at most M; fewer fail the trial), and D ms after phase 1
    began it sends α·rate replies to the learned tuples, all of which must come back
    through the NAT."""
    from tgen_tui.session.learned import remove_table

    p = state.params
    if state.body.get("tcp") is not None:  # --proto tcp
        return await tcp_trial(state, state.body["tcp"], n, rate, kind)
    if phase2 is None:
        phase2 = p.phase2 == "every"
    r2 = state.body.get("phase2_runner")
    lrn = state.body.get("learn") if (phase2 and r2 is not None) else None
    try:
        t = await _phase1(state, runner, n, rate, kind, lrn)
        if lrn is None or not t.passed:
            return t
        learned = _learned(t, lrn)
        if learned is not None and r2 is not None:
            await _phase2(state, r2, t, n, rate, lrn, learned)
        return t
    finally:
        if lrn is not None:
            remove_table(lrn["path"])


async def _phase1(
    state: RunState, runner: TrialRunner, n: int, rate: float, kind: str, lrn: dict | None
) -> Trial:
    """Phase 1 (the Responder's port learning when ``lrn``): n frames, n new entries."""
    t = await runner.with_retries(
        lambda: runner.run(
            rate, kind, count=n, reset_dut=True, learn=lrn["options"] if lrn else None
        )
    )
    t.extra.connections = n
    rise = t.extra.conntrack.rise if t.extra.conntrack is not None else None
    t.extra.conntrack_rise = rise
    if t.passed and rise is not None and rise < n:
        t.passed = False
        t.reason = f"failed to fill the state table: conntrack rose by {rise:,} of {n:,}"
    t.extra.phase1_s = round(n / rate + state.params.t_ms / 1000, 3)
    return t


def _learned(t: Trial, lrn: dict) -> int | None:
    """The tuples the Responder learned in phase 1 (recorded); None when fewer than M (the
    trial fails: the state table did not fill)."""
    from tgen_tui.session.learned import learned_count

    m = lrn["max"]
    # the worker's own report (the table may be on another host, --cluster), else the file
    rep = (t.extra.learned_report or {}).get(lrn["port"]) or {}
    learned = int(rep["tuples"]) if "tuples" in rep else learned_count(lrn["path"])
    t.extra.learned = LearnedTuples(tuples=learned, max=m, port=lrn["port"])
    if learned < m:
        t.passed = False
        t.reason = (
            f"failed to fill the state table: the Responder learned {learned:,} of "
            f"{m:,} tuples (-M)"
        )
        return None
    return learned


async def _phase2(
    state: RunState, r2: TrialRunner, t: Trial, n: int, rate: float, lrn: dict, learned: int
) -> None:
    """Phase 2, D ms after phase 1 began: α·rate replies to the learned tuples, all of
    which must come back through the NAT; recorded in ``t.extra.phase2``."""
    import trio

    p = state.params
    # D: phase 2 starts at least 1000·N/R + T ms (and -D ms) after phase 1 began
    d_min = 1000 * n / rate + p.t_ms
    d_want = max(d_min, p.d_ms or 0.0)
    began = t.extra.wall_start or time.time()
    wait = began + d_want / 1000 - time.time()
    if wait > 0:
        await trio.sleep(wait)
    started = time.time()
    rate2 = max(1.0, p.alpha * rate)
    t2 = await r2.with_retries(lambda: r2.run(rate2, "phase2", count=n))
    back = (t2.extra.ports or {}).get(lrn["initiator_port"])
    t.extra.phase2 = Phase2Trial.model_validate(
        t2.to_doc(exclude={"extra": {"streams"}})
        | {
            "order": p.responder_order,
            "learned_tuples": learned,
            "table_max": lrn["max"],
            "replies_back_through_nat": t2.rx_frames,
            "through_nat": bool(t2.passed and t2.rx_frames > 0),
            "initiator_port_rx": back.rx_frames if back is not None else None,
            "d_ms": round((started - began) * 1000),  # D: after phase 1 began
            "d_ms_min": round(d_min),  # 1000·N/R + T ≤ D
        }
        | (
            {"d_ms_note": f"-D {p.d_ms:g} ms is below 1000·N/R + T: waited {d_min:.0f} ms"}
            if p.d_ms is not None and p.d_ms < d_min
            else {}
        )
    )
    if not t2.passed:
        t.passed = False
        t.reason = f"phase 2: {t2.reason}"
