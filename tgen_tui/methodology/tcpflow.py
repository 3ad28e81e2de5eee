"""TCP connections for RFC 9693's procedures (``--proto tcp``): handshakes and teardowns
in batches, through a conntrack that tracks TCP strictly (``nf_conntrack_tcp_loose=0``).

Every connection of a trial goes through the same packets in lockstep, so each packet
type is one stream of N frames (one per connection), sent in its own batch:

=========  =========  =====  ===================  =====================
phase      sender     flags  seq                  ack
=========  =========  =====  ===================  =====================
syn        Initiator  S      I                    0
synack     Responder  SA     R                    I + 1 + L
ack        Initiator  A      I + 1 + L            R + 1 + L
fin        Initiator  FA     I + 1 + 2L           R + 1 + L
ack_r      Responder  A      R + 1 + L            I + 2 + 3L
fin_r      Responder  FA     R + 1 + 2L           I + 2 + 3L
last       Initiator  A      I + 2 + 3L           R + 2 + 3L
rst        Initiator  RA     I + 1 + 2L           R + 1 + L
=========  =========  =====  ===================  =====================

I and R are fixed initial sequence numbers (the same for every connection: conntrack
keeps one window per connection), and L is the payload every segment carries (the test
signature), so each segment acknowledges all the other side has sent and stays in the
window. The Responder learns the NAT's tuples from the SYNs (:mod:`tgen_tui.worker.learn`)
and its segments go to the learned tuples in arrival order, one per connection. A
connection is 3 packets to set up and 4 to close with FIN (7, as CSIT counts a TCP CPS
connection), or 1 with RST.

After the handshakes the DUT's conntrack must hold N ESTABLISHED TCP entries
(``conntrack -L -p tcp --state ESTABLISHED``); after a FIN teardown they are in
TIME_WAIT (or CLOSE), after RST in CLOSE.
"""

from __future__ import annotations

import dataclasses
import re

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.search import TrialResult

ISN_I = 0x10000000
ISN_R = 0x20000000
ETH_IP_TCP = 14 + 20 + 20
MIN_SIZE = ETH_IP_TCP + 12 + 4  # headers, the signature, the FCS
HANDSHAKE = ("syn", "synack", "ack")
TEARDOWN = {"fin": ("fin", "ack_r", "fin_r", "last"), "rst": ("rst",), "none": ()}
PACKETS = {"fin": 7, "rst": 4, "none": 3}
_RESPONDER = {"synack", "ack_r", "fin_r"}


def segment(phase: str, payload: int, data: int = 0) -> tuple[str, int, int]:
    """(flags, seq, ack) of ``phase`` when every segment carries ``payload`` bytes and
    each side sent ``data`` data segments (``data_i``, ``data_r``: ``tgen run``'s streams,
    each frame a retransmission of that one segment) between handshake and teardown."""
    i, r, n, d = ISN_I, ISN_R, payload, data * payload
    table = {
        "syn": ("S", i, 0),
        "synack": ("SA", r, i + 1 + n),
        "ack": ("A", i + 1 + n, r + 1 + n),
        "data_i": ("PA", i + 1 + 2 * n, r + 1 + n),
        "data_r": ("PA", r + 1 + n, i + 1 + 2 * n),
        "fin": ("FA", i + 1 + 2 * n + d, r + 1 + n + d),
        "ack_r": ("A", r + 1 + n + d, i + 2 + 3 * n + d),
        "fin_r": ("FA", r + 1 + 2 * n + d, i + 2 + 3 * n + d),
        "last": ("A", i + 2 + 3 * n + d, r + 2 + 3 * n + d),
        # conntrack closes on an RST whose seq is what the other side last acknowledged
        # (the Responder's data acknowledges the ACK, not the Initiator's data)
        "rst": ("RA", i + 1 + 2 * n, r + 1 + n + d),
    }
    f, s, a = table[phase]
    return f, s & 0xFFFFFFFF, a & 0xFFFFFFFF


def _l4(d: dict) -> dict:
    return d.get("udp") or d.get("tcp") or {}


def phase_profile(prof, phase: str, spec, size: int):
    """A copy of ``prof`` whose only stream is ``phase``'s: the Initiator's (its first
    stream, as TCP) or the Responder's reply (placeholders: the learned table fills it)."""
    from tgen_tui.methodology.phase2 import _lowest
    from tgen_tui.methodology.run import _revalidate

    flags, seq, ack = segment(phase, size - 4 - ETH_IP_TCP)

    def change(d: dict) -> None:
        init = d["streams"][0]
        if not init.get("ipv4") or not (init.get("udp") or init.get("tcp")) or init.get("vlan"):
            raise BadInput("--proto tcp needs an untagged IPv4 UDP or TCP Initiator stream")
        l4 = _l4(init)
        if phase in _RESPONDER:
            ip = init["ipv4"]
            s = {
                "name": f"tcp-{phase}",
                "port": spec.port,
                "rx_port": init["port"],
                "eth": {"src": spec.src_mac, "dst": spec.dst_mac},
                "ipv4": {"src": _lowest(ip["dst"]), "dst": _lowest(ip["src"])},
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

    return _revalidate(prof, change)


@dataclasses.dataclass
class TcpRunners:
    """One TrialRunner per phase, and where the Responder's learned table goes."""

    runners: dict
    table: str
    responder: str
    teardown: str
    size: int


def tcp_setup(state, prof, runner, spec, teardown: str) -> TcpRunners:
    """The runners of every phase (``spec``: the Responder, methodology.phase2)."""
    from tgen_tui.methodology.phase2 import new_table_path
    from tgen_tui.methodology.trial import TrialRunner
    from tgen_tui.packets.compile import compile_profile, with_learned_table

    p = state.params
    size = max(MIN_SIZE, _size(prof))
    table = new_table_path()
    runners = {}
    for ph in HANDSHAKE + TEARDOWN[teardown]:
        compiled = compile_profile(phase_profile(prof, ph, spec, size))
        if ph in _RESPONDER:
            streams = [with_learned_table(s, table, "inc") for s in compiled.streams]
            compiled = dataclasses.replace(compiled, streams=streams)
        runners[ph] = TrialRunner(
            compiled,
            direction="reverse" if ph in _RESPONDER else "forward",
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


_SHOWN = re.compile(r"(\d+) flow entries have been shown")


def tcp_states(channel) -> dict[str, int]:
    """TCP conntrack entries per state in the DUT (``conntrack -L -p tcp``)."""
    out = channel.run("conntrack -L -p tcp", timeout=60)
    if not out.ok:
        raise BadInput(f"conntrack -L on the DUT failed: {(out.stderr or out.stdout).strip()}")
    counts: dict[str, int] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[0] == "tcp":
            counts[parts[3]] = counts.get(parts[3], 0) + 1
    return counts


async def tcp_trial(state, tr: TcpRunners, n: int, rate: float, kind: str) -> TrialResult:
    """N TCP connections at ``rate`` connections/s: the handshakes (each phase a batch of
    N segments at that rate), then the conntrack check, then the teardown. Passes when
    every segment arrived and the DUT held N ESTABLISHED entries."""
    import trio

    from tgen_tui.methodology.phase2 import learn_options, learned_count, remove_table

    lrn = learn_options(tr.responder, tr.table, [0], n)
    phases: dict[str, dict] = {}
    first: TrialResult | None = None
    try:
        for ph in HANDSHAKE + TEARDOWN[tr.teardown]:
            r = tr.runners[ph]
            # a batch the sender could not keep the rate for is sent again (a retransmit,
            # as far as the DUT is concerned); the SYN batch after a DUT reset
            if ph == "syn":
                t = await r.with_retries(
                    lambda r=r: r.run(rate, kind, count=n, reset_dut=True, learn=lrn)
                )
                first = t
            else:
                t = await r.with_retries(lambda r=r, ph=ph: r.run(rate, f"tcp-{ph}", count=n))
            phases[ph] = {"tx": t.tx_frames, "rx": t.rx_frames, "passed": t.passed}
            if not t.passed and (t is first or first.passed):  # the first failure
                first.passed = False
                first.reason = f"TCP {ph}: {t.reason}"
            # a batch sent too slowly fails the trial, but when every segment arrived the
            # connections go on (the DUT's states are still worth reading); a loss ends it
            if t.tx_frames != n or t.rx_frames != n:
                break
            if ph == "syn":
                got = learned_count(tr.table)
                phases[ph]["learned"] = got
                if got < n:
                    first.passed = False
                    first.reason = f"TCP syn: the Responder learned {got:,} of {n:,} tuples"
                    break
            if ph == "ack":
                channel = r.dut.channel if r.dut else None
                if channel is None:
                    raise BadInput("--proto tcp reads the DUT's conntrack: give dut.netns")
                est = await trio.to_thread.run_sync(tcp_states, channel)
                first.extra["tcp_established"] = est.get("ESTABLISHED", 0)
                first.extra["tcp_states_after_handshake"] = est
                if est.get("ESTABLISHED", 0) != n:
                    first.passed = False
                    first.reason = (
                        f"TCP: {est.get('ESTABLISHED', 0):,} ESTABLISHED entries of {n:,}"
                    )
                    break
        else:  # every phase ran and delivered every segment
            if TEARDOWN[tr.teardown]:
                channel = tr.runners["syn"].dut.channel
                st = await trio.to_thread.run_sync(tcp_states, channel)
                first.extra["tcp_states_after_teardown"] = st
    finally:
        remove_table(tr.table)
    assert first is not None
    first.extra["tcp"] = {
        "phases": phases,
        "teardown": tr.teardown,
        "packets_per_connection": PACKETS[tr.teardown],
        "frame_size": tr.size,
    }
    first.extra["connections"] = n
    return first


def responder_spec(runner, prof):
    """The Responder (the port the Initiator's frames arrive at) and its MACs: from a
    stream the profile sends from that port, else from its veth into the DUT namespace."""
    from tgen_tui.methodology.phase2 import ResponderSpec, veth_responder

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
    "ISN_I",
    "ISN_R",
    "TcpRunners",
    "phase_profile",
    "responder_spec",
    "segment",
    "tcp_setup",
    "tcp_trial",
]
