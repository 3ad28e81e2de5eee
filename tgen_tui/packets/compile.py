"""Compile a validated Profile into plain-data StreamPrograms (engine side; uses scapy once).

scapy builds each stream's template frame a single time, at its largest size. The
compiler then zeroes everything that varies per frame (varying fields, lengths,
checksums, signature) and precomputes the template's checksum word sums, so the
worker's numpy builder only has to add the varying words (DESIGN rule 3).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field, replace

from scapy.layers.inet import ICMP as SICMP
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

from tgen_tui.packets.appcompile import app_port, app_program
from tgen_tui.packets.batch import word_sum
from tgen_tui.packets.flowprogram import (
    FIRST_PORT,
    TCP_MESSAGE,
    UDP_MESSAGE,
    FlowProgram,
    udp_pps,
)
from tgen_tui.packets.l3 import eth_auto, responder_ranges
from tgen_tui.packets.prng import mix_key
from tgen_tui.packets.program import (
    CSUM_BOTH,
    CSUM_IP,
    CSUM_L4,
    FCS_LEN,
    FIXED,
    TABLE,
    TABLE_ORDERS,
    UNIQUE,
    FieldOp,
    Schedule,
    SizeProgram,
    StreamProgram,
)
from tgen_tui.profiles import models as m
from tgen_tui.profiles.units import line_rate_fps

ZERO_MAC = "00:00:00:00:00:00"


@dataclass(frozen=True)
class PortSpec:
    """A tester port as the engine needs it."""

    name: str
    interface: str
    netns: str | None
    speed_bps: float
    tx_path: str = "auto"  # auto | sendmmsg | tx_ring | af_xdp (the engine resolves auto)
    host: str | None = None  # tester host (a Ray node with resource tgen:<host>) under --cluster
    # L3 identity (issue 19): address/prefix strings, whether the port answers ARP/ND/echo,
    # and the (lo, hi) address ranges it answers for (packets/l3.py)
    ipv4: str | None = None
    gateway: str | None = None
    ipv6: str | None = None
    gateway6: str | None = None
    respond: bool = True
    respond_v4: tuple[tuple[int, int], ...] = ()
    respond_v6: tuple[tuple[int, int], ...] = ()
    lanes: int = 1  # sender workers sharing the port (tgen_tui.engine.lanes)
    pacing: str = "auto"  # auto | qdisc | timer | burst (the engine resolves auto)


@dataclass(frozen=True)
class CompiledProfile:
    """Everything the engine needs to run a profile, as plain data."""

    name: str
    seed: int
    profile_hash: str
    duration_s: float | None
    ports: dict[str, PortSpec]
    streams: list[StreamProgram]  # enabled streams only, in profile order
    all_stream_names: list[str] = field(default_factory=list)  # index → name for every stream
    dut_netns: str | None = None
    dut_ssh: str | None = None
    dut_events: dict[str, str] = field(default_factory=dict)  # dut.events: name -> command
    flows: list[FlowProgram] = field(default_factory=list)  # transport: kernel socket flows


def profile_hash(profile: m.Profile) -> str:
    """sha256 of the canonical JSON of the validated profile (recorded with every result).

    Fields left at their defaults are not part of it, so a new optional field in a later
    tgen (a port's ``host``, ``tx_path``) does not change the hash of an unchanged profile."""
    canon = json.dumps(
        profile.model_dump(mode="json", exclude_defaults=True),
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canon.encode()).hexdigest()


def _fid(name: str) -> int:
    return zlib.crc32(name.encode())


def _size_program(s: m.Stream, key: int) -> SizeProgram:
    sz = s.size
    if isinstance(sz, m.FixedSize):
        return SizeProgram("fixed", sz.fixed - FCS_LEN, sz.fixed - FCS_LEN)
    if isinstance(sz, m.RangeSize):
        return SizeProgram(sz.mode, sz.min - FCS_LEN, sz.max - FCS_LEN, sz.step, key)
    if isinstance(sz, m.LawSize):  # one seeded cycle of drawn sizes, sent as a pattern
        from tgen_tui.profiles.sizelaw import size_cycle

        cyc = size_cycle(sz.dist, sz.mean, sz.law_param, sz.min, sz.max, key)
        return SizeProgram("imix", sz.min - FCS_LEN, sz.max - FCS_LEN, 1, key,
                           tuple(x - FCS_LEN for x in cyc))  # fmt: skip
    # IMIX: an exact, seeded interleaving of the weighted sizes
    import numpy as np

    pattern = [size - FCS_LEN for size, w in sz.entries for _ in range(w)]
    rng = np.random.default_rng(key)
    rng.shuffle(pattern)
    lo, hi = min(pattern), max(pattern)
    return SizeProgram("imix", lo, hi, 1, key, tuple(int(x) for x in pattern))


def _schedule(s: m.Stream, pps: float, key: int, line_scale: float = 1.0) -> Schedule:
    """The stream's schedule at ``pps``; ``line_scale`` scales the mean rate of bursts at
    line rate by their pause (their frames stay at the line rate)."""
    mode = s.mode
    count = None
    burst, gap = 0, 0.0
    if isinstance(mode, m.Burst):
        count = mode.count
    elif isinstance(mode, m.MultiBurst):
        burst, gap = mode.frames, mode.pause_s(pps)
        if mode.at == "line" and line_scale != 1.0:  # the period scales, the burst does not
            gap = (mode.frames / pps + gap) / line_scale - mode.frames / pps
        gap = max(0.0, gap)
        count = None if mode.bursts is None else mode.frames * mode.bursts
    idt = s.idt
    params: tuple[float, ...] = ()
    if isinstance(idt, m.ParetoIdt):
        params = (idt.shape,)
    elif isinstance(idt, m.NormalIdt):
        params = (idt.sd,)
    elif isinstance(idt, m.UniformIdt):
        params = (idt.spread,)
    elif isinstance(idt, m.GammaIdt | m.WeibullIdt):
        params = (idt.shape,)
    elif isinstance(idt, m.LognormalIdt):
        params = (idt.sigma,)
    elif isinstance(idt, m.CauchyIdt):
        params = (idt.scale,)
    sc = s.schedule
    return Schedule(
        pps=pps,
        count=count,
        start_s=sc.start,
        stop_s=sc.stop,
        on_s=sc.on,
        off_s=sc.off,
        burst=burst,
        burst_gap_s=gap,
        idt=idt.dist,
        idt_params=params,
        key=key,
    )


def _eth_and_tags(s: m.Stream, auto: bool):
    """Ethernet and the stream's VLAN tags (QinQ: 0x88a8 outside by default)."""
    e = s.eth or m.Ethernet()
    eth = Ether(src=e.src, dst=e.dst) if not auto else Ether(src=ZERO_MAC, dst=ZERO_MAC)
    pkt = eth
    l3type = 0x0800 if s.ipv4 is not None else 0x86DD
    tags = list(s.vlan)
    for i, t in enumerate(tags):
        tpid = t.tpid if t.tpid is not None else (0x88A8 if len(tags) == 2 and i == 0 else 0x8100)
        if i == 0:
            eth.type = tpid
        else:
            pkt.lastlayer().type = tpid
        pkt = pkt / Dot1Q(prio=t.pcp, dei=t.dei, vlan=t.id)
    if tags:
        pkt.lastlayer().type = l3type
    else:
        eth.type = l3type
    return pkt


def _fixed_or_zero(r) -> str | int:
    return r.min if r.mode == FIXED else 0


def _l3_layer(s: m.Stream):
    """IPv4 or IPv6 with the fixed fields set (a varying one is written per frame)."""
    if s.ipv4 is not None:
        v4 = s.ipv4
        return IP(
            src=str(v4.src.min) if v4.src.mode == FIXED else "0.0.0.0",
            dst=str(v4.dst.min) if v4.dst.mode == FIXED else "0.0.0.0",
            ttl=v4.ttl,
            tos=(v4.dscp << 2) | v4.ecn,
            flags="DF" if v4.dont_fragment else 0,
            id=0,
        )
    v6 = s.ipv6
    assert v6 is not None

    # a varying v6 address keeps its upper 64 bits in the template; the low 64 are written per frame
    def v6t(r) -> str:
        import ipaddress

        return str(r.min) if r.mode == FIXED else str(ipaddress.IPv6Address(int(r.min) >> 64 << 64))

    return IPv6(
        src=v6t(v6.src), dst=v6t(v6.dst), hlim=v6.hop_limit, tc=v6.traffic_class, fl=v6.flow_label
    )


def _l4_layer(s: m.Stream, pkt):
    """``pkt`` with the stream's UDP, TCP or ICMP header (or as it is)."""
    if s.udp is not None:
        return pkt / UDP(sport=_fixed_or_zero(s.udp.src_port), dport=_fixed_or_zero(s.udp.dst_port))
    if s.tcp is not None:
        return pkt / TCP(
            sport=_fixed_or_zero(s.tcp.src_port),
            dport=_fixed_or_zero(s.tcp.dst_port),
            flags=s.tcp.flags,
            seq=s.tcp.seq,
            ack=s.tcp.ack,
            window=s.tcp.window,
        )
    if s.icmp is None:
        return pkt
    if s.ipv4 is not None:
        return pkt / SICMP(
            type=s.icmp.type if s.icmp.type is not None else 8,
            code=s.icmp.code,
            id=_fixed_or_zero(s.icmp.id),
            seq=0,
        )
    pkt = pkt / ICMPv6EchoRequest(id=_fixed_or_zero(s.icmp.id), seq=0)
    if s.icmp.type is not None:
        pkt.lastlayer().type = s.icmp.type
    pkt.lastlayer().code = s.icmp.code
    return pkt


def _template(s: m.Stream, max_len: int, auto: bool = False) -> tuple[bytes, int, int]:
    """scapy-built template (fixed fields set, varying fields 0) and (l3_offset, l4_offset).

    ``auto``: both MACs zero; the worker writes the port's and the resolved gateway's."""
    pkt = _l4_layer(s, _eth_and_tags(s, auto) / _l3_layer(s))
    hdr = bytes(pkt)
    l3_off = 14 + 4 * len(s.vlan)
    l4_off = l3_off + (20 if s.ipv4 is not None else 40)
    pkt = pkt / Raw(b"\0" * (max_len - len(hdr)))
    return bytes(bytearray(bytes(pkt))[:max_len]), l3_off, l4_off


def _rtp_fields(s: m.Stream, t: bytearray, l4_off: int, fields: _Fields) -> None:
    """The RTP header at the start of the UDP payload: fixed bytes in the template, the
    sequence number and timestamp as inc fields (in the UDP checksum, not flow fields)."""
    if s.rtp is None:
        return
    r = s.rtp
    at = l4_off + 8
    t[at] = 0x80  # version 2, no padding, no extension, no CSRC
    t[at + 1] = (0x80 if r.marker else 0) | r.payload_type
    t[at + 2 : at + 8] = bytes(6)  # sequence number and timestamp: per frame
    t[at + 8 : at + 12] = r.ssrc.to_bytes(4, "big")
    key = mix_key(fields.base_key, _fid("rtp"))
    fields.ops.append(FieldOp("rtp.seq", at + 2, 2, "inc", 0, 0xFFFF, 1, key, CSUM_L4))
    if r.clock_step:
        step = r.clock_step
        fields.ops.append(FieldOp("rtp.ts", at + 4, 4, "inc", 0, 0xFFFFFFFF, step, key, CSUM_L4))


class _Fields:
    """The field program of one stream as it is collected: varying fields only."""

    def __init__(self, base_key: int) -> None:
        self.base_key = base_key
        self.ops: list[FieldOp] = []
        self.unique: list[int] = []

    def add(self, name: str, r, offset: int, width: int, csum: int, value_of=int) -> None:
        if r.mode == FIXED:
            return
        key = mix_key(self.base_key, _fid(name))
        lo, hi = value_of(r.min), value_of(r.max)
        self.ops.append(FieldOp(name, offset, width, r.mode, lo, hi, r.step, key, csum))
        if r.mode == UNIQUE:
            self.unique.append(len(self.ops) - 1)

    def without_l4_csum_of_ip(self) -> None:
        """ICMPv4's checksum has no pseudo-header: address fields leave it alone."""
        self.ops = [
            replace(f, csum=f.csum & ~CSUM_L4) if f.name.startswith("ip.") else f for f in self.ops
        ]


def _address_fields(s: m.Stream, t: bytearray, l3_off: int, fields: _Fields) -> tuple[int, int]:
    """Address fields; zero the per-frame words. (IPv4 header sum base, pseudo-header sum)."""
    if s.ipv4 is not None:
        fields.add("ip.src", s.ipv4.src, l3_off + 12, 4, CSUM_BOTH)
        fields.add("ip.dst", s.ipv4.dst, l3_off + 16, 4, CSUM_BOTH)
        t[l3_off + 2 : l3_off + 4] = b"\0\0"  # total length: per frame
        t[l3_off + 10 : l3_off + 12] = b"\0\0"  # header checksum: per frame
        ip_base = word_sum(bytes(t[l3_off : l3_off + 20]))
        return ip_base, word_sum(bytes(t[l3_off + 12 : l3_off + 20])) + t[l3_off + 9]
    assert s.ipv6 is not None
    low64 = lambda a: int(a) & ((1 << 64) - 1)  # noqa: E731
    fields.add("ip.src", s.ipv6.src, l3_off + 16, 8, CSUM_L4, low64)
    fields.add("ip.dst", s.ipv6.dst, l3_off + 32, 8, CSUM_L4, low64)
    t[l3_off + 4 : l3_off + 6] = b"\0\0"  # payload length: per frame
    return 0, word_sum(bytes(t[l3_off + 8 : l3_off + 40])) + t[l3_off + 6]


def _l4_port_fields(s: m.Stream, t: bytearray, l4_off: int, fields: _Fields) -> tuple[int, bool]:
    """Port / ICMP id fields; zero the per-frame words. (L4 checksum offset, pseudo-header?)."""
    if s.udp is not None or s.tcp is not None:
        l4 = s.udp or s.tcp
        assert l4 is not None
        fields.add("l4.src_port", l4.src_port, l4_off, 2, CSUM_L4)
        fields.add("l4.dst_port", l4.dst_port, l4_off + 2, 2, CSUM_L4)
        if s.udp is not None:
            t[l4_off + 4 : l4_off + 8] = b"\0\0\0\0"
            return l4_off + 6, True
        t[l4_off + 16 : l4_off + 18] = b"\0\0"
        return l4_off + 16, True
    if s.icmp is not None:
        fields.add("icmp.id", s.icmp.id, l4_off + 4, 2, CSUM_L4)
        t[l4_off + 2 : l4_off + 4] = b"\0\0"
        return l4_off + 2, s.ipv6 is not None  # ICMPv6 has a pseudo-header, ICMPv4 does not
    return -1, True


def compile_stream(
    s: m.Stream, index: int, port: m.Port, seed: int, rate_scale: float = 1.0
) -> StreamProgram:
    """Compile one stream (global ``index`` goes into the signature)."""
    if s.pcap is not None:
        from tgen_tui.packets.replaycompile import compile_replay

        return compile_replay(s, index, port, seed, rate_scale)
    sseed = s.seed if s.seed is not None else seed
    base_key = mix_key(sseed, index)
    sizes = _size_program(s, mix_key(base_key, _fid("size")))
    auto = eth_auto(s, port)
    template, l3_off, l4_off = _template(s, sizes.max, auto)
    t = bytearray(template)
    fields = _Fields(base_key)
    ip_base, pseudo_fixed = _address_fields(s, t, l3_off, fields)
    l4_csum_off, pseudo = _l4_port_fields(s, t, l4_off, fields)
    _rtp_fields(s, t, l4_off, fields)
    l4_base = word_sum(bytes(t[l4_off:])) + (pseudo_fixed if pseudo else 0)
    if not pseudo:
        fields.without_l4_csum_of_ip()
    mean = m.size_bounds(s.size)[2]
    if isinstance(s.size, m.LawSize):  # the stream's own drawn cycle: its exact mean
        mean = sizes.mean + FCS_LEN
    shape: tuple[tuple[float, float, float], ...] = ()
    if s.shape is not None:  # pps is the shape's peak; the segments are multiples of it
        segs = s.shape.segments_pps(mean, port.speed)
        peak = max(max(a, b) for _, a, b in segs)
        shape = tuple((d, a / peak, b / peak) for d, a, b in segs)
        pps = peak * rate_scale
    elif isinstance(s.mode, m.MultiBurst) and s.mode.at == "line":
        pps = line_rate_fps(port.speed, mean)  # inside the burst; rate_scale moves the pause
    else:
        pps = m.rate_to_pps(s.rate, mean, port.speed) * rate_scale
    line = isinstance(s.mode, m.MultiBurst) and s.mode.at == "line"
    sched = _schedule(s, pps, mix_key(base_key, _fid("idt")), rate_scale if line else 1.0)
    if shape:
        sched = replace(sched, shape=shape, shape_repeat=s.shape.repeat)  # type: ignore[union-attr]
    return StreamProgram(
        index=index,
        name=s.name,
        port=s.port,
        template=bytes(t),
        l3=4 if s.ipv4 is not None else 6,
        l3_offset=l3_off,
        l4=s.l4_kind,
        l4_offset=l4_off,
        l4_csum_offset=l4_csum_off,
        ip_csum_base=ip_base,
        l4_csum_base=l4_base,
        l4_pseudo=pseudo,
        sizes=sizes,
        schedule=sched,
        fields=tuple(fields.ops),
        unique=tuple(fields.unique),
        unique_key=mix_key(base_key, _fid("unique")),
        seed=sseed,
        rx_port=s.rx_port,
        vlan_ids=tuple(v.id for v in s.vlan),
        eth_auto=auto,
        blocks=s.blocks,
    )


def compile_profile(profile: m.Profile, rate_scale: float = 1.0) -> CompiledProfile:
    """Compile every enabled stream; apply port totals (``ports.X.rate``) by scaling."""
    ports = {
        name: PortSpec(
            name,
            p.interface,
            p.netns,
            p.speed,
            p.tx_path,
            p.host,
            *_l3_fields(p),
            *responder_ranges(profile, name),
            lanes=p.lanes,
            pacing=p.pacing,
        )
        for name, p in profile.ports.items()
    }
    streams = [
        _learning(s, _compiled(s, i, profile, rate_scale))
        for i, s in enumerate(profile.streams)
        if s.enabled
    ]
    for name, p in profile.ports.items():
        if p.rate is None:
            continue
        mine = [x for x in streams if x.port == name]
        if not mine:
            continue
        mean = sum(x.sizes.mean for x in mine) / len(mine) + FCS_LEN
        total = m.rate_to_pps(p.rate, mean, p.speed) * rate_scale
        have = sum(x.schedule.pps for x in mine)
        for i, x in enumerate(streams):
            if x.port == name:
                sc = x.schedule
                streams[i] = _replace_pps(x, sc.pps * total / have)
    return CompiledProfile(
        name=profile.name,
        seed=profile.seed,
        profile_hash=profile_hash(profile),
        duration_s=profile.duration,
        ports=ports,
        streams=streams,
        all_stream_names=[s.name for s in profile.streams],
        dut_netns=profile.dut.netns if profile.dut else None,
        dut_ssh=profile.dut.ssh if profile.dut else None,
        dut_events=dict(profile.dut.events) if profile.dut else {},
        flows=compile_flows(profile, rate_scale),
    )


def _compiled(s: m.Stream, i: int, profile: m.Profile, rate_scale: float) -> StreamProgram:
    """Stream ``i`` compiled; a pcap: stream that cannot be is BadInput naming its field."""
    from tgen_tui.packets.replaycompile import ReplayError

    try:
        return compile_stream(s, i, profile.ports[s.port], profile.seed, rate_scale)
    except ReplayError as e:
        from tgen_tui.diagnostics import BadInput

        raise BadInput(f"streams[{i}].{e.field}: {e.message}") from None


def _l3_fields(p: m.Port) -> tuple:
    """PortSpec's ipv4, gateway, ipv6, gateway6, respond of profile port ``p``."""
    s = lambda v: None if v is None else str(v)  # noqa: E731
    return s(p.ipv4), s(p.gateway), s(p.ipv6), s(p.gateway6), p.respond


def _replace_pps(p: StreamProgram, pps: float) -> StreamProgram:
    return replace(p, schedule=replace(p.schedule, pps=pps))


#: The RFC 9693 Responder's reply to a learned tuple (src ip, dst ip, src port, dst port as
#: received): from the learned destination address and port, to the learned source
#: address (the NAT's public address) and port.
REPLY_COLUMNS = {"ip.src": 1, "ip.dst": 0, "l4.src_port": 3, "l4.dst_port": 2}


def with_learned_table(
    p: StreamProgram, path: str, order: str, columns: dict[str, int] | None = None
) -> StreamProgram:
    """``p`` with its IPv4 addresses and L4 ports taken from a learned-tuple table.

    ``columns`` maps field names (``ip.src``, ``ip.dst``, ``l4.src_port``,
    ``l4.dst_port``) to columns of the table (default: :data:`REPLY_COLUMNS`); ``order``
    picks the row of frame i (``TABLE_ORDERS``). A field that was fixed leaves the
    template (its bytes zeroed, its words taken out of the checksum bases), so the
    builder's incremental checksums stay exact. The table is read by the worker when it
    builds the stream (a missing or empty table is a one-line error there).
    """
    if p.l3 != 4 or p.l4 not in ("udp", "tcp"):
        raise ValueError("a learned-tuple reply needs an IPv4 UDP or TCP stream")
    if order not in TABLE_ORDERS:
        raise ValueError(f"table order must be one of {', '.join(TABLE_ORDERS)}, got {order!r}")
    columns = REPLY_COLUMNS if columns is None else columns
    layout = {
        "ip.src": (p.l3_offset + 12, 4, CSUM_BOTH),
        "ip.dst": (p.l3_offset + 16, 4, CSUM_BOTH),
        "l4.src_port": (p.l4_offset, 2, CSUM_L4),
        "l4.dst_port": (p.l4_offset + 2, 2, CSUM_L4),
    }
    unknown = set(columns) - set(layout)
    if unknown:
        raise ValueError(f"table fields must be among {', '.join(layout)}: {sorted(unknown)}")
    t = bytearray(p.template)
    ip_base, l4_base = p.ip_csum_base, p.l4_csum_base
    varying = {f.name for f in p.fields}
    key = mix_key(p.seed, p.index, _fid("table"))
    new: list[FieldOp] = []
    for name, col in columns.items():
        off, width, csum = layout[name]
        if name not in varying:  # fixed: in the template and the checksum bases
            w = word_sum(bytes(t[off : off + width]))
            if csum & CSUM_IP:
                ip_base -= w
            if p.l4_pseudo or name.startswith("l4."):
                l4_base -= w
            t[off : off + width] = bytes(width)
        hi = (1 << (8 * width)) - 1
        new.append(FieldOp(name, off, width, TABLE, 0, hi, 1, key, csum, column=int(col)))
    kept = [f for f in p.fields if f.name not in columns]
    fields = tuple(kept + new)
    unique = tuple(i for i, f in enumerate(fields) if f.mode == UNIQUE)
    return replace(
        p,
        template=bytes(t),
        ip_csum_base=ip_base,
        l4_csum_base=l4_base,
        fields=fields,
        unique=unique,
        table=str(path),
        table_order=order,
        table_key=key,
    )


def _learning(s: m.Stream, p: StreamProgram) -> StreamProgram:
    """A ``learn: true`` stream replies to the tuples its port learns while it runs
    (``LIVE_TABLE``, rows in order of arrival)."""
    if not s.learn:
        return p
    from tgen_tui.packets.program import LIVE_TABLE

    return with_learned_table(p, LIVE_TABLE, "inc")


def compile_flows(profile: m.Profile, rate_scale: float = 1.0) -> list[FlowProgram]:
    """The enabled ``transport:`` entries' flows, in profile order; UDP rates times
    ``rate_scale`` (as ``tgen run --rate-scale`` scales frame streams)."""
    out: list[FlowProgram] = []
    fid = 0
    for t in profile.transport:
        if not t.enabled:
            continue
        src, dst = profile.hosts[t.port], profile.hosts[t.rx_port]
        udp = t.protocol == "udp"
        message = t.message or (UDP_MESSAGE if udp else TCP_MESSAGE)
        rate = float(t.rate) * rate_scale if udp and t.rate is not None else None
        for k in range(t.parallel):
            sched = Schedule(
                pps=udp_pps(rate, message),
                start_s=float(t.schedule.start),
                stop_s=None if t.schedule.stop is None else float(t.schedule.stop),
                on_s=float(t.schedule.on),
                off_s=float(t.schedule.off),
            )
            out.append(
                FlowProgram(
                    id=fid,
                    name=t.name if t.parallel == 1 else f"{t.name}.{k + 1}",
                    stream=t.name,
                    port=t.port,
                    rx_port=t.rx_port,
                    protocol=t.protocol,
                    cc=None if udp else t.cc,
                    dst_port=_dst_port(t, k, fid),
                    message=message,
                    rate_bps=rate,
                    src_netns=src.netns,
                    dst_netns=dst.netns,
                    src_ip=src.ipv4,
                    dst_ip=dst.ipv4,
                    schedule=sched,
                    app=app_program(t, src.ipv4, rate_scale, share=(k, t.parallel)),
                )
            )
            fid += 1
    return out


def _dst_port(t: m.TransportStream, k: int, fid: int) -> int:
    """Flow k's receiving port: dst_port + k, else 5201 + its number; an app flow's
    parallel flows share one (its kind's: http 80, dns 53)."""
    if t.app is not None:
        return app_port(t, FIRST_PORT + fid - k)
    return t.dst_port + k if t.dst_port else FIRST_PORT + fid


__all__ = [
    "CompiledProfile",
    "PortSpec",
    "compile_flows",
    "compile_profile",
    "compile_stream",
    "profile_hash",
    "with_learned_table",
]
