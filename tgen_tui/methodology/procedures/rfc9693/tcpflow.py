"""TCP connections for RFC 9693's procedures (``--proto tcp``): handshakes and teardowns
in batches, through a conntrack that tracks TCP strictly (``nf_conntrack_tcp_loose=0``).

Each packet type is one stream of N frames (one per connection), sent in its own batch;
the segments' flags, sequence and acknowledgment numbers, and why, are in
:mod:`tgen_tui.session.tcpsegments`. A trial passes when every segment arrived and the
DUT's conntrack held N ESTABLISHED entries after the handshakes.
"""

from __future__ import annotations

import dataclasses

from tgen_tui.diagnostics import BadInput
from tgen_tui.results.models import TcpPhase, TcpRecord, Trial
from tgen_tui.session.tcpsegments import (
    ETH_IP_TCP,
    HANDSHAKE,
    MIN_SIZE,
    PACKETS,
    RESPONDER_PHASES,
    TEARDOWN,
    segment,
    tcp_states,
)


def _l4(d: dict) -> dict:
    return d.get("udp") or d.get("tcp") or {}


def phase_profile(prof, phase: str, spec, size: int):
    """A copy of ``prof`` whose only stream is ``phase``'s: the Initiator's (its first
    stream, as TCP) or the Responder's reply (placeholders: the learned table fills it)."""
    from tgen_tui.methodology.procedures.rfc9693.phase2 import lowest
    from tgen_tui.profiles.revalidate import revalidate

    flags, seq, ack = segment(phase, size - 4 - ETH_IP_TCP)

    def change(d: dict) -> None:
        init = d["streams"][0]
        if not init.get("ipv4") or not (init.get("udp") or init.get("tcp")) or init.get("vlan"):
            raise BadInput("--proto tcp needs an untagged IPv4 UDP or TCP Initiator stream")
        l4 = _l4(init)
        if phase in RESPONDER_PHASES:
            ip = init["ipv4"]
            s = {
                "name": f"tcp-{phase}",
                "port": spec.port,
                "rx_port": init["port"],
                "eth": {"src": spec.src_mac, "dst": spec.dst_mac},
                "ipv4": {"src": lowest(ip["dst"]), "dst": lowest(ip["src"])},
                "tcp": {"src_port": 7, "dst_port": 49184},
            }
        else:
            s = {k: v for k, v in init.items() if k not in ("udp", "tcp", "learn")}
            s["name"] = f"tcp-{phase}"
            s["tcp"] = {"src_port": l4.get("src_port"), "dst_port": l4.get("dst_port")}
            s["tcp"] = {k: v for k, v in s["tcp"].items() if v is not None}
        s["tcp"] |= {"flags": flags, "seq": seq, "ack": ack, "window": 65535}
        s["size"] = size
        s["rate"] = {"pps": 1000}
        d["streams"] = [s]

    return revalidate(prof, change)


@dataclasses.dataclass
class TcpRunners:
    """One TrialRunner per phase, and where the Responder's learned table goes."""

    runners: dict
    table: str
    responder: str
    teardown: str
    size: int


def tcp_setup(state, prof, runner, spec, teardown: str) -> TcpRunners:
    """The runners of every phase (``spec``: the Responder, .phase2)."""
    from tgen_tui.methodology.kit.trial import TrialRunner
    from tgen_tui.packets.compile import compile_profile, with_learned_table
    from tgen_tui.session.learned import new_table_path

    p = state.params
    size = max(MIN_SIZE, _size(prof))
    table = new_table_path()
    runners = {}
    for ph in HANDSHAKE + TEARDOWN[teardown]:
        compiled = compile_profile(phase_profile(prof, ph, spec, size))
        if ph in RESPONDER_PHASES:
            streams = [with_learned_table(s, table, "inc") for s in compiled.streams]
            compiled = dataclasses.replace(compiled, streams=streams)
        runners[ph] = TrialRunner(
            compiled,
            direction="reverse" if ph in RESPONDER_PHASES else "forward",
            timeout_s=p.timeout_s,
            settle_s=0.0,
            dut=runner.dut,
            # the DUT hooks run around the SYN batch, which every TCP trial starts with
            hooks=p.hooks if ph == "syn" else None,
            **p.trial_options(),
        )
    return TcpRunners(runners, table, spec.port, teardown, size)


def _size(prof) -> int:
    sz = prof.streams[0].size
    v = getattr(sz, "fixed", None)
    if v is None:
        raise BadInput("--proto tcp needs a fixed frame size for the Initiator stream")
    return int(v)


async def tcp_trial(state, tr: TcpRunners, n: int, rate: float, kind: str) -> Trial:
    """N TCP connections at ``rate`` connections/s: the handshakes (each phase a batch of
    N segments at that rate), then the conntrack check, then the teardown. Passes when
    every segment arrived and the DUT held N ESTABLISHED entries."""
    from tgen_tui.session.learned import learn_options, remove_table

    lrn = learn_options(tr.responder, tr.table, [0], n)
    phases: dict[str, TcpPhase] = {}
    first: Trial | None = None
    try:
        for ph in HANDSHAKE + TEARDOWN[tr.teardown]:
            t = await _batch(tr, ph, n, rate, kind, lrn)
            first = first or t
            phases[ph] = TcpPhase(tx=t.tx_frames, rx=t.rx_frames, passed=t.passed)
            if not t.passed and (t is first or first.passed):  # the first failure
                _fail(first, f"TCP {ph}: {t.reason}")
            if not await _goes_on(tr, ph, t, first, n, phases[ph]):
                break
        else:  # every phase ran and delivered every segment
            if TEARDOWN[tr.teardown] and first is not None:
                first.extra.tcp_states_after_teardown = await _states(tr.runners["syn"])
    finally:
        remove_table(tr.table)
    assert first is not None
    first.extra.tcp = TcpRecord(
        phases=phases,
        teardown=tr.teardown,
        packets_per_connection=PACKETS[tr.teardown],
        frame_size=tr.size,
    )
    first.extra.connections = n
    return first


async def _batch(tr: TcpRunners, ph: str, n: int, rate: float, kind: str, lrn) -> Trial:
    """One phase's batch of n segments; the SYN batch after a DUT reset. A batch the
    sender could not keep the rate for is sent again (a retransmit, as far as the DUT is
    concerned)."""
    r = tr.runners[ph]
    if ph == "syn":
        return await r.with_retries(lambda: r.run(rate, kind, count=n, reset_dut=True, learn=lrn))
    return await r.with_retries(lambda: r.run(rate, f"tcp-{ph}", count=n))


async def _goes_on(tr: TcpRunners, ph: str, t: Trial, first: Trial, n: int, rec: TcpPhase) -> bool:
    """Whether the next phase runs. A batch sent too slowly fails the trial, but when every
    segment arrived the connections go on (the DUT's states are still worth reading); a
    loss ends it, and so do fewer learned tuples than n after the SYNs, or fewer than n
    ESTABLISHED entries after the ACKs (recorded in ``first``)."""
    from tgen_tui.session.learned import learned_count

    if t.tx_frames != n or t.rx_frames != n:
        return False
    if ph == "syn":
        rec.learned = got = learned_count(tr.table)
        if got < n:
            _fail(first, f"TCP syn: the Responder learned {got:,} of {n:,} tuples")
            return False
    if ph == "ack":
        est = await _states(tr.runners[ph])
        first.extra.tcp_established = est.get("ESTABLISHED", 0)
        first.extra.tcp_states_after_handshake = est
        if est.get("ESTABLISHED", 0) != n:
            _fail(first, f"TCP: {est.get('ESTABLISHED', 0):,} ESTABLISHED entries of {n:,}")
            return False
    return True


def _fail(t: Trial, reason: str) -> None:
    t.passed, t.reason = False, reason


async def _states(runner) -> dict[str, int]:
    """The DUT's conntrack entries by TCP state."""
    import trio

    channel = runner.dut.channel if runner.dut else None
    if channel is None:
        raise BadInput("--proto tcp reads the DUT's conntrack: give dut.netns")
    return await trio.to_thread.run_sync(tcp_states, channel)


def responder_spec(runner, prof):
    """The Responder (the port the Initiator's frames arrive at) and its MACs: from a
    stream the profile sends from that port, else from its veth into the DUT namespace."""
    from tgen_tui.methodology.procedures.rfc9693.phase2 import ResponderSpec, veth_responder

    ports = list(runner.compiled.ports)
    if len(ports) < 2:
        raise BadInput("--proto tcp needs a second (Responder) port in the profile")
    first = ports[0]
    init = next((q for ps in runner.groups.values() for q in ps), None)
    responder = init.rx_port if init and init.rx_port and init.rx_port != first else ports[1]
    own = next((s for s in prof.streams if s.port == responder), None)
    if own is not None and own.eth is not None and own.eth.src and own.eth.dst:
        return ResponderSpec(responder, own.eth.src, own.eth.dst)
    port = runner.compiled.ports[responder]
    dut_ns = runner.dut.netns if runner.dut else None
    spec = veth_responder(responder, port.interface, port.netns, dut_ns) if dut_ns else None
    if spec is None:
        raise BadInput(
            f"--proto tcp needs the Responder's MACs: add a stream sent from port {responder} "
            "(its eth src and dst are used), or run against the lab DUT"
        )
    return spec


__all__ = [
    "TcpRunners",
    "phase_profile",
    "responder_spec",
    "tcp_setup",
    "tcp_trial",
]
