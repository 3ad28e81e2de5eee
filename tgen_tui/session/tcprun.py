"""TCP connections around an ordinary ``tgen run``: a stream with
``tcp: {handshake: true, teardown: fin|rst|none}`` and its ``learn: true`` TCP reply stream.

Before the run, the handshakes go out in batches, one frame per connection (N = the
stream's distinct flows), each batch at the stream's rate (:mod:`tgen_tui.session.
tcpsegments`): SYN, then SYN-ACK from the reply stream's port to the tuples it learned from
the SYNs, then ACK; the DUT's conntrack is read (N ESTABLISHED expected). During the run
both streams carry data (PSH-ACK) whose sequence and acknowledgment numbers stay inside
the connection's window (each frame of a flow retransmits that flow's one data segment,
which a conntrack with ``tcp_loose=0`` accepts); the reply stream still learns live. After
the run the teardown goes out the same way (FIN/ACK both ways, or RST) and the conntrack
states are read again. The result gets a ``tcp`` section with every batch's counts and
the states.
"""

from __future__ import annotations

import dataclasses
import time

from tgen_tui.diagnostics import BadInput
from tgen_tui.profiles.models import Profile
from tgen_tui.session.tcpsegments import (
    ETH_IP_TCP,
    HANDSHAKE,
    RESPONDER_PHASES,
    TEARDOWN,
    segment,
    tcp_states,
)


@dataclasses.dataclass
class TcpPlan:
    prof: Profile  # the original profile
    init: str  # the stream with tcp.handshake
    reply: str  # its learn: true TCP reply stream
    teardown: str
    flows: int
    rate: float
    payload: int
    table: str = ""
    report: dict = dataclasses.field(default_factory=dict)
    data_profile: Profile | None = None  # the profile the run sends (session.prologue)


def tcp_plan(prof) -> TcpPlan | None:
    """The plan for the profile's handshake stream, or None when it has none."""
    hs = [s for s in prof.streams if s.enabled and s.tcp is not None and s.tcp.handshake]
    if not hs:
        return None
    if len(hs) > 1:
        raise BadInput("tcp.handshake: one stream per profile can open connections")
    s = hs[0]
    reply = [
        r
        for r in prof.streams
        if r.enabled and r.learn and r.tcp is not None and r.port == s.rx_port
    ]
    if not reply or s.rx_port is None:
        raise BadInput(
            f"stream {s.name}: tcp.handshake needs a reply stream: a TCP stream with "
            f"learn: true sent from its rx_port ({s.rx_port})"
        )
    size = getattr(s.size, "fixed", None)
    if size is None or s.vlan or s.ipv4 is None:
        raise BadInput(f"stream {s.name}: tcp.handshake needs untagged IPv4 and a fixed size")
    rate = getattr(s.rate, "pps", None) or 1000.0
    return TcpPlan(
        prof,
        s.name,
        reply[0].name,
        s.tcp.teardown,
        s.distinct_flows(),
        float(rate),
        int(size) - 4 - ETH_IP_TCP,
    )


def _with_segment(prof, names: dict[str, str], payload: int, data: int):
    """``prof`` with only the named streams, each one's TCP flags, seq and ack set to
    its phase's ({stream: phase})."""
    from tgen_tui.profiles.revalidate import revalidate

    def change(d: dict) -> None:
        out = []
        for s in d["streams"]:
            if s["name"] not in names:
                continue
            ph = names[s["name"]]
            f, seq, ack = segment(ph, payload, data)
            s["tcp"] |= {"flags": f, "seq": seq, "ack": ack, "window": 65535}
            out.append(s)
        d["streams"] = out

    return revalidate(prof, change)


def data_profile(plan: TcpPlan):
    """The profile the run itself sends: every stream, the two TCP streams carrying data."""
    from tgen_tui.profiles.revalidate import revalidate

    keep = _with_segment(plan.prof, {plan.init: "data_i", plan.reply: "data_r"}, plan.payload, 1)
    by = {s.name: s for s in keep.streams}

    def change(d: dict) -> None:
        for s in d["streams"]:
            if s["name"] in by:
                s["tcp"] = by[s["name"]].tcp.model_dump(mode="json", exclude_none=True)

    return revalidate(plan.prof, change)


def _phase_profile(plan: TcpPlan, phase: str, data: int):
    from tgen_tui.profiles.revalidate import revalidate

    name = plan.reply if phase in RESPONDER_PHASES else plan.init
    p = _with_segment(plan.prof, {name: phase}, plan.payload, data)

    def change(d: dict) -> None:
        for s in d["streams"]:
            s.pop("learn", None)
            s["name"] = f"tcp-{phase}"
            s.pop("schedule", None)

    return revalidate(p, change)


async def _batch(plan: TcpPlan, phase: str, data: int, opts, learn=None) -> dict:
    """Send ``phase``'s N segments at the stream's rate; their counts."""
    import trio

    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.packets.compile import compile_profile, with_learned_table
    from tgen_tui.session.batch import scaled_programs

    compiled = compile_profile(_phase_profile(plan, phase, data))
    n = plan.flows
    progs = compiled.streams
    if phase in RESPONDER_PHASES:
        progs = [with_learned_table(s, plan.table, "inc") for s in progs]
    progs = scaled_programs({"x": progs}, plan.rate, n / plan.rate, count=n)
    compiled = dataclasses.replace(compiled, streams=progs)
    o = EngineOptions(
        cores=opts.cores,
        interval=0.1,
        drain_ms=300,
        dut_netns=opts.dut_netns,
        dut_ssh=opts.dut_ssh,
        learn=learn,
    )
    async with open_engine(compiled, o) as eng:
        await eng.start()
        end = time.monotonic() + 3 * n / plan.rate + 5
        while not eng.ports_done_sending() and time.monotonic() < end:
            await trio.sleep(0.02)
        await eng.stop()
        final = await eng.final_snapshot()
    s = final.stream(progs[0].name)
    return {"tx": s.tx_frames, "rx": s.rx_frames}


def _learn_port(plan: TcpPlan) -> str:
    return next(s.port for s in plan.prof.streams if s.name == plan.reply)


async def handshake(plan: TcpPlan, opts, channel) -> None:
    """SYN, SYN-ACK, ACK batches; then the DUT's TCP states (``plan.report``)."""
    import trio

    from tgen_tui.session.learned import learn_options, learned_count, new_table_path

    plan.table = new_table_path()
    n = plan.flows
    rep = plan.report
    rep |= {"connections": n, "teardown": plan.teardown, "handshake": {}}
    # the SYN batch's profile has one stream (index 0); the reply stream's port learns it
    learn = learn_options(_learn_port(plan), plan.table, [0], n)
    for ph in HANDSHAKE:
        got = await _batch(plan, ph, 0, opts, learn=learn if ph == "syn" else None)
        rep["handshake"][ph] = got
        if ph == "syn":
            got["learned"] = learned_count(plan.table)
        if got["tx"] != n or got["rx"] != n or got.get("learned", n) < n:
            rep["error"] = f"{ph}: {got['rx']:,} of {n:,} arrived"
            return
    rep["states_after_handshake"] = await trio.to_thread.run_sync(tcp_states, channel)
    rep["established"] = rep["states_after_handshake"].get("ESTABLISHED", 0)


async def teardown(plan: TcpPlan, opts, channel) -> None:
    """The teardown batches after the run (one data segment each way), then the states."""
    import trio

    from tgen_tui.session.learned import remove_table

    try:
        if "error" in plan.report or not TEARDOWN[plan.teardown]:
            return
        plan.report["teardown_batches"] = {}
        for ph in TEARDOWN[plan.teardown]:
            got = await _batch(plan, ph, 1, opts)
            plan.report["teardown_batches"][ph] = got
        st = await trio.to_thread.run_sync(tcp_states, channel)
        plan.report["states_after_teardown"] = st
    finally:
        remove_table(plan.table)


def summary(rep: dict) -> list[str]:
    if not rep:
        return []
    n = rep.get("connections", 0)
    out = [
        f"TCP: {n:,} connections, {rep.get('established', 0):,} ESTABLISHED after the "
        f"handshakes"
        + (
            f", after the {rep['teardown']} teardown: {rep['states_after_teardown']}"
            if rep.get("states_after_teardown")
            else ""
        )
    ]
    if rep.get("error"):
        out.append(f"TCP handshake failed at {rep['error']}")
    return out


__all__ = ["TcpPlan", "data_profile", "handshake", "summary", "tcp_plan", "teardown"]
