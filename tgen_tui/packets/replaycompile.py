"""Compile a ``pcap:`` stream into a StreamProgram, and describe what it will send.

The capture is read and rewritten here once (as the worker will do again), so that a
corrupt file, a selection without frames, a rewrite rule that maps nothing or a frame
over the port's MTU is a one-line error before anything runs (:class:`ReplayError`,
naming the stream's field), and so that the program carries the figures the engine
needs: the frame count, the sizes, and the rate (the stream's ``rate:``, or the
recorded mean rate times ``speed``).

:func:`flow_keys` gives every frame its flow: (family, protocol, source, destination,
source port, destination port), the ICMP echo id as the source port, and the
non-first fragments of an IPv4 datagram joined to their first fragment's flow by
(source, destination, protocol, IP id), as a DUT's conntrack sees them after
reassembly. :func:`describe` is the summary ``tgen validate`` prints.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tgen_tui.packets.l3 import eth_auto_replay
from tgen_tui.packets.pcapread import PcapError
from tgen_tui.packets.program import (
    FCS_LEN,
    ReplayProgram,
    Schedule,
    SizeProgram,
    StreamProgram,
)
from tgen_tui.packets.replay import Replay, be
from tgen_tui.packets.replaybuild import NothingSelected, load_replay, recorded_offsets
from tgen_tui.profiles import models as m

PROTO_NAMES = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmp6"}


class ReplayError(ValueError):
    """A pcap: stream that cannot be sent: ``field`` (under the stream) and the message."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def replay_spec(s: m.Stream, port: m.Port) -> ReplayProgram:
    """The plain-data source and rewrite of pcap: stream ``s`` (its file path as given)."""
    pc, rw = s.pcap, s.rewrite
    assert pc is not None
    vlan, vid, pcp = "keep", 0, -1
    if rw is not None and isinstance(rw.vlan, str):
        vlan = rw.vlan
    elif rw is not None:
        vlan, vid, pcp = "set", rw.vlan.id, -1 if rw.vlan.pcp is None else rw.vlan.pcp
    return ReplayProgram(
        file=pc.file,
        first=pc.frames.first,
        last=pc.frames.last or 0,
        filter=pc.filter or "",
        loops=pc.loops or 0,
        unique=pc.unique,
        timing=pc.timing,
        speed=pc.speed,
        max_gap_s=float(pc.max_gap or 0.0),
        signature=pc.signature == "auto",
        mtu=pc.mtu,
        ipv4=tuple(rw.ipv4) if rw else (),
        ipv6=tuple(rw.ipv6) if rw else (),
        ports=tuple(sorted(rw.ports.items())) if rw else (),
        vlan=vlan,
        vlan_id=vid,
        vlan_pcp=pcp,
        macs=s.eth is not None or eth_auto_replay(s, port),
    )


def _read(rp: ReplayProgram, index: int) -> Replay:
    try:
        return load_replay(rp, index)
    except NothingSelected as e:
        raise ReplayError("pcap.filter" if rp.filter else "pcap.frames", str(e)) from None
    except PcapError as e:
        raise ReplayError("pcap.file", str(e)) from None
    except ValueError as e:  # libpcap refused the filter
        raise ReplayError("pcap.filter", f"{rp.filter!r}: {e}") from None


def check_replay(r: Replay, rp: ReplayProgram) -> None:
    """Rules that map nothing and frames over the MTU: ReplayError naming the field."""
    for fam in ("ipv4", "ipv6"):
        rules = getattr(rp, fam)
        for (a, b), n in zip(rules, r.hits.get(fam, [0] * len(rules)), strict=True):
            if n == 0:
                raise ReplayError(
                    f"rewrite.{fam}",
                    f"{a} -> {b} maps nothing: no {fam} source or destination of the "
                    f"{len(r):,} selected frames of {rp.file} is in {a}",
                )
    lay = r.layout
    ip = np.where(lay.l3 > 0, lay.l3end - lay.l3off, r.lens - lay.l3off)
    over = np.flatnonzero(ip > rp.mtu)
    if len(over):
        i = int(over[0])
        raise ReplayError(
            "pcap.mtu",
            f"frame {int(r.frame_numbers[i])} of {rp.file} is {int(ip[i])} B of IP, over the "
            f"port's MTU of {rp.mtu} B ({len(over):,} frames are): raise mtu or filter them out",
        )


def _sizes(lens: np.ndarray) -> SizeProgram:
    """Sizes as the engine reads them (min, max, mean): a pattern of at most 4096 sizes
    at the quantiles of the frames' lengths (the mean within a byte or so)."""
    srt = np.sort(lens)
    if len(srt) > 4096:
        srt = srt[np.linspace(0, len(srt) - 1, 4096).round().astype(np.int64)]
    pat = tuple(int(x) for x in srt)
    return SizeProgram("imix", int(lens.min()), int(lens.max()), 1, 0, pat)


def compile_replay(
    s: m.Stream, index: int, port: m.Port, seed: int, rate_scale: float = 1.0
) -> StreamProgram:
    """The program of pcap: stream ``s`` (global ``index``); ReplayError when it cannot be."""
    rp = replay_spec(s, port)
    r = _read(rp, index)
    check_replay(r, rp)
    n = len(r)
    mean = float(r.lens.mean()) + FCS_LEN
    if rp.timing == "recorded":
        _, period = recorded_offsets(r.ts_ns, rp.max_gap_s)
        pps = n / period * rp.speed * rate_scale
    else:
        period = 0.0
        pps = m.rate_to_pps(s.rate, mean, port.speed) * rate_scale
    rp = dataclasses.replace(rp, frames=n, period_s=period)
    sc = s.schedule
    sched = Schedule(
        pps=pps,
        count=n * rp.loops if rp.loops else None,
        start_s=sc.start,
        stop_s=sc.stop,
    )
    lay = r.layout
    first = bytearray(r.t[0, : int(r.lens.max())].tobytes())
    if s.eth is not None:
        first[:12] = bytes.fromhex(s.eth.dst.replace(":", "")) + bytes.fromhex(
            s.eth.src.replace(":", "")
        )
    l3 = 4 if port.gateway is not None else 6 if port.gateway6 is not None else int(lay.l3[0])
    return StreamProgram(
        index=index,
        name=s.name,
        port=s.port,
        template=bytes(first),
        l3=l3 if l3 in (4, 6) else 4,
        l3_offset=int(lay.l3off[0]),
        l4=PROTO_NAMES.get(int(lay.proto[0]), "none") if lay.l4off[0] >= 0 else "none",
        l4_offset=int(max(lay.l4off[0], lay.l3off[0])),
        l4_csum_offset=int(lay.csum[0]),
        ip_csum_base=0,
        l4_csum_base=0,
        l4_pseudo=bool(lay.pseudo[0]),
        sizes=_sizes(r.lens),
        schedule=sched,
        seed=s.seed if s.seed is not None else seed,
        rx_port=s.rx_port,
        eth_auto=s.eth is None and eth_auto_replay(s, port),
        replay=rp,
    )


# ---------------------------------------------------------------------- flows, summary
def flow_keys(r: Replay) -> np.ndarray:
    """(N, 6) uint64: family, protocol, source, destination, ports (see the docstring);
    IPv6 addresses are folded to 64 bits (for counting, not for display)."""
    t, lay = r.t, r.layout
    n = len(r)
    rows = np.arange(n)
    out = np.zeros((n, 6), dtype=np.uint64)
    out[:, 0] = lay.l3
    out[:, 1] = np.maximum(lay.proto, 0)
    for fam, so, do, w in ((4, 12, 16, 4), (6, 8, 24, 16)):
        sel = rows[lay.l3 == fam]
        for col, o in ((2, so), (3, do)):
            v = np.zeros(len(sel), dtype=np.uint64)
            for j in range(0, w, 8):
                with np.errstate(over="ignore"):
                    v = v * np.uint64(0x9E3779B97F4A7C15) + be(
                        t, sel, lay.l3off[sel] + o + j, min(8, w)
                    )
            out[sel, col] = v
    l4 = rows[lay.l4off >= 0]
    ports = np.isin(lay.proto[l4], (6, 17))
    p = l4[ports]
    out[p, 4] = be(t, p, lay.l4off[p], 2)
    out[p, 5] = be(t, p, lay.l4off[p] + 2, 2)
    ic = l4[~ports]
    out[ic, 4] = be(t, ic, lay.l4off[ic] + 4, 2)  # echo id
    _join_fragments(r, out)
    return out


def _join_fragments(r: Replay, out: np.ndarray) -> None:
    """IPv4 non-first fragments take the ports of their first fragment."""
    lay = r.layout
    rows = np.flatnonzero((lay.l3 == 4) & lay.frag)
    if not len(rows):
        return
    ipid = be(r.t, rows, lay.l3off[rows] + 4, 2)
    key = out[rows, 2] * np.uint64(1 << 16) ^ (out[rows, 3] << np.uint64(20)) ^ ipid
    key ^= out[rows, 1] << np.uint64(56)
    first = lay.l4off[rows] >= 0
    fk, fr = key[first], rows[first]
    order = np.argsort(fk)
    fk, fr = fk[order], fr[order]
    later = ~first
    pos = np.clip(np.searchsorted(fk, key[later]), 0, max(len(fk) - 1, 0))
    if len(fk):
        hit = fk[pos] == key[later]
        tgt = rows[later][hit]
        out[tgt, 4:] = out[fr[pos[hit]], 4:]


def describe(r: Replay, prog: StreamProgram) -> list[str]:
    """The summary lines of a replayed stream: frames, flows, protocols, sizes, duration
    and average rate of the selection, signature coverage, and the rewrite's counts."""
    rp = prog.replay
    assert rp is not None
    lay = r.layout
    keys = flow_keys(r)
    flows = len(np.unique(keys, axis=0))
    protos: dict[str, int] = {}
    for pnum, cnt in zip(*np.unique(lay.proto, return_counts=True), strict=True):
        name = PROTO_NAMES.get(int(pnum), "other" if pnum < 0 else f"ip proto {int(pnum)}")
        protos[name] = protos.get(name, 0) + int(cnt)
    frag = int(lay.frag.sum())
    dur = float(r.ts_ns[-1]) / 1e9 if len(r) > 1 else 0.0
    avg = (len(r) - 1) / dur if dur > 0 else 0.0
    loops = "until stopped" if not rp.loops else f"{rp.loops} loop{'s' * (rp.loops > 1)}"
    uniq = f", unique: {flows:,} new flows per loop" if rp.unique else ""
    return [
        f"frames {len(r):,} (file frames {int(r.frame_numbers[0])}-{int(r.frame_numbers[-1])}), "
        f"flows {flows:,}, {loops}{uniq}",
        "protocols "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(protos.items()))
        + (f" ({frag:,} fragments)" if frag else ""),
        f"sizes {int(r.lens.min()) + FCS_LEN}-{int(r.lens.max()) + FCS_LEN} B "
        f"(mean {float(r.lens.mean()) + FCS_LEN:.0f}), recorded {dur:.6f} s at "
        f"{avg:,.1f} fps on average",
        f"signature in {int(r.sig.sum()):,} of {len(r):,} frames"
        + ("" if rp.signature else " (signature: off)")
        + "; the rest are counted by flow",
        f"timing {rp.timing}"
        + (f" x {rp.speed:g}" if rp.timing == "recorded" else "")
        + (f", gaps capped at {rp.max_gap_s * 1e3:g} ms" if rp.max_gap_s else "")
        + f": {prog.schedule.pps:,.1f} fps",
    ]


def sample_lines(r: Replay, prog: StreamProgram) -> list[str]:
    """The first selected frame before and after the rewrite, decoded by scapy (engine
    side: the validator's view, never a worker's)."""
    import scapy.layers.dns
    import scapy.layers.inet
    import scapy.layers.inet6  # noqa: F401  (the layers Ether decodes into)
    from scapy.layers.l2 import Ether

    from tgen_tui.packets.replaybuild import ReplayBuilder

    after = ReplayBuilder(prog, max_batch=1).frames(0, 1, 0)[0]
    n = int(r.frame_numbers[0])
    return [
        f"frame {n} as captured: {Ether(r.before[0]).summary()}",
        f"frame {n} as sent:     {Ether(after).summary()}",
    ]


def stream_report(s: m.Stream, index: int, port: m.Port, seed: int) -> list[str]:
    """``describe`` and ``sample_lines`` of pcap: stream ``s`` (ReplayError if it cannot be)."""
    prog = compile_replay(s, index, port, seed)
    assert prog.replay is not None
    r = _read(prog.replay, index)
    return describe(r, prog) + sample_lines(r, prog)


__all__ = [
    "ReplayError",
    "check_replay",
    "compile_replay",
    "describe",
    "flow_keys",
    "replay_spec",
    "sample_lines",
    "stream_report",
]
