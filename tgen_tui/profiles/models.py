"""Pydantic models of a stream profile (the YAML files in ``profiles/``).

A profile names ports (interfaces, optionally inside a network namespace, with a line
rate) and streams (headers with varying fields, frame sizes, rate, mode and schedule).
Every model forbids unknown keys, so a typo is an error with a position, not a silently
ignored setting. Cross-field rules (ranges, frame size vs headers + signature, rate vs
line rate, address families) live here too; the loader turns their errors into
``file:line:col: field: message`` lines.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from tgen_tui.profiles.base import NetnsName, Schedule, Seconds, Strict
from tgen_tui.profiles.lawrules import law_param, law_problem
from tgen_tui.profiles.replay import PcapSource, Rewrite, check_pcap_stream
from tgen_tui.profiles.transport import TransportHost, TransportStream, check_transport
from tgen_tui.profiles.units import (
    line_rate_fps,
    parse_bitrate,
    parse_count,
)
from tgen_tui.profiles.wire import FCS_LEN, L1_OVERHEAD, SIG_LEN

BitRate = Annotated[float, BeforeValidator(parse_bitrate), Field(ge=1.0)]
Count = Annotated[float, BeforeValidator(parse_count)]

RangeMode = Literal["fixed", "inc", "dec", "random", "unique"]
_MAC = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")

ETH_HLEN = 14
VLAN_HLEN = 4
MAX_FRAME = 9216
MAX_UNIQUE = 1 << 64
MIN_FRAME = 64


# --------------------------------------------------------------------------- ranges
def check_step(step: int, span: int, mode: str, what: str) -> None:
    """A step larger than the range it steps over is a typo (and would not fit the
    field program's 64-bit arithmetic): ValueError naming ``step``."""
    if step > span and (mode in ("inc", "dec") or step >= 1 << 64):
        raise ValueError(
            f"step: {step} is larger than the range {what} ({span:,} values): give 1 to {span:,}"
        )


def _scalar_to_range(v: Any) -> Any:
    """``7`` or ``"198.18.0.1"`` means a fixed value: {min: v, max: v, mode: fixed}."""
    if isinstance(v, dict):
        return v
    return {"min": v, "max": v, "mode": "fixed"}


def _default_mode(data: Any) -> Any:
    if isinstance(data, dict) and "mode" not in data and "min" in data and "max" in data:
        data = dict(data)
        data["mode"] = "fixed" if data["min"] == data["max"] else "inc"
    return data


class _RangeRules(Strict):
    mode: RangeMode = "inc"
    step: int = Field(1, ge=1, description="Increment for inc/dec modes (wraps at the range end).")

    @model_validator(mode="after")
    def _min_le_max(self):
        lo, hi = self._ints()
        if lo > hi:
            raise ValueError(f"min ({self.min}) must be ≤ max ({self.max})")
        if self.mode == "fixed" and lo != hi:
            raise ValueError(
                "mode fixed needs min == max (or a single value); use inc, dec, random or unique"
            )
        check_step(self.step, self.span, self.mode, f"{self.min}..{self.max}")
        return self

    @property
    def period(self) -> int | None:
        """Frames after which the field's value repeats (inc/dec: span / gcd(step, span));
        None for random and unique (drawn, or a permutation shared by the unique fields)."""
        if self.mode == "fixed" or self.span == 1:
            return 1
        if self.mode in ("inc", "dec"):
            return self.span // math.gcd(self.step % self.span, self.span)
        return None

    def _ints(self) -> tuple[int, int]:
        return int(self.min), int(self.max)

    @property
    def span(self) -> int:
        lo, hi = self._ints()
        return hi - lo + 1


class PortRange(_RangeRules):
    """An L4 port (or ICMP id): a single value or {min, max, mode, step}.

    Modes: ``fixed``, ``inc`` (step, wraps at max), ``dec``, ``random`` (uniform per frame,
    seeded: RFC 4814) and ``unique`` (a seeded random permutation over the product of all
    ``unique`` fields of the stream: no combination repeats until all were sent; RFC 9693
    phase 1).
    """

    min: int = Field(ge=0, le=65535)
    max: int = Field(ge=0, le=65535)

    _s = model_validator(mode="before")(lambda cls, v: _default_mode(_scalar_to_range(v)))


def _reject_v6(v: Any) -> Any:
    if isinstance(v, str) and ":" in v:
        try:
            ipaddress.IPv6Address(v)
        except ValueError:
            return v
        raise ValueError(f"{v} is an IPv6 address in an IPv4 field (use ipv6: for IPv6 streams)")
    return v


def _reject_v4(v: Any) -> Any:
    if isinstance(v, str) and ":" not in v:
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            return v
        raise ValueError(f"{v} is an IPv4 address in an IPv6 field (use ipv4: for IPv4 streams)")
    return v


V4 = Annotated[ipaddress.IPv4Address, BeforeValidator(_reject_v6)]
V6 = Annotated[ipaddress.IPv6Address, BeforeValidator(_reject_v4)]


class Ipv4Range(_RangeRules):
    """An IPv4 address or range {min, max, mode, step} (modes as for ports)."""

    min: V4
    max: V4

    _s = model_validator(mode="before")(lambda cls, v: _default_mode(_scalar_to_range(v)))


class Ipv6Range(_RangeRules):
    """An IPv6 address or range; a range varies only the low 64 bits (min and max share the /64)."""

    min: V6
    max: V6

    _s = model_validator(mode="before")(lambda cls, v: _default_mode(_scalar_to_range(v)))

    @model_validator(mode="after")
    def _same_64(self):
        if int(self.min) >> 64 != int(self.max) >> 64:
            raise ValueError(
                "an IPv6 range may vary only the low 64 bits: min and max must share their /64"
            )
        return self


# --------------------------------------------------------------------------- headers
class Ethernet(Strict):
    """Ethernet addresses. In the lab, dst is the DUT's MAC (see ``tgen lab status``)."""

    src: str = Field("02:00:00:00:00:01", description="Source MAC")
    dst: str = Field(
        "02:00:00:00:00:02", description="Destination MAC (the DUT port, or the peer tester port)"
    )

    @field_validator("src", "dst")
    @classmethod
    def _mac(cls, v: str) -> str:
        if not isinstance(v, str) or not _MAC.match(v):
            raise ValueError(f"{v!r} is not a MAC address like 02:74:67:00:00:01")
        return v.lower().replace("-", ":")


class Vlan(Strict):
    """One 802.1Q tag. Two tags make QinQ: the first is the outer (S-tag, TPID 0x88a8 by default)."""

    id: int = Field(ge=0, le=4094, description="VLAN id 0–4094")
    pcp: int = Field(0, ge=0, le=7, description="Priority code point")
    dei: int = Field(0, ge=0, le=1, description="Drop eligible indicator")
    tpid: int | None = Field(
        None, description="0x8100 or 0x88a8; default 0x88a8 for the outer tag of QinQ, else 0x8100"
    )

    @field_validator("tpid")
    @classmethod
    def _tpid(cls, v: int | None) -> int | None:
        if v is not None and v not in (0x8100, 0x88A8, 0x9100):
            raise ValueError("must be 0x8100, 0x88a8 or 0x9100")
        return v


class IPv4(Strict):
    """IPv4 header: addresses (ranges allowed), TTL, DSCP/ECN."""

    src: Ipv4Range = Field(
        default_factory=lambda: Ipv4Range(min="198.18.0.2", max="198.18.0.2", mode="fixed")
    )
    dst: Ipv4Range = Field(
        default_factory=lambda: Ipv4Range(min="198.19.0.2", max="198.19.0.2", mode="fixed")
    )
    ttl: int = Field(64, ge=1, le=255)
    dscp: int = Field(0, ge=0, le=63)
    ecn: int = Field(0, ge=0, le=3)
    dont_fragment: bool = True


class IPv6(Strict):
    """IPv6 header: addresses (ranges vary the low 64 bits), hop limit, traffic class, flow label."""

    src: Ipv6Range = Field(
        default_factory=lambda: Ipv6Range(min="2001:2::2", max="2001:2::2", mode="fixed")
    )
    dst: Ipv6Range = Field(
        default_factory=lambda: Ipv6Range(min="2001:2:0:1::2", max="2001:2:0:1::2", mode="fixed")
    )
    hop_limit: int = Field(64, ge=1, le=255)
    traffic_class: int = Field(0, ge=0, le=255)
    flow_label: int = Field(0, ge=0, le=0xFFFFF)


class UDP(Strict):
    """UDP ports. Defaults follow RFC 2544/METHODOLOGY: source 49184, destination 7."""

    src_port: PortRange = Field(
        default_factory=lambda: PortRange(min=49184, max=49184, mode="fixed")
    )
    dst_port: PortRange = Field(default_factory=lambda: PortRange(min=7, max=7, mode="fixed"))


class TCP(UDP):
    """TCP ports and flags (a SYN by default: each new tuple opens a conntrack entry)."""

    flags: str = Field("S", description="Any of F S R P A U E C, e.g. S, SA, A, PA")
    seq: int = Field(1, ge=0, le=0xFFFFFFFF)
    ack: int = Field(0, ge=0, le=0xFFFFFFFF, description="Acknowledgment number (with flag A)")
    handshake: bool = Field(
        False,
        description="tgen run: open each flow with SYN / SYN-ACK (the learn: true reply "
        "stream) / ACK before the run and close it after (teardown); data in between",
    )
    teardown: Literal["fin", "rst", "none"] = Field(
        "fin", description="with handshake: FIN/ACK both ways, RST, or none"
    )
    window: int = Field(8192, ge=0, le=65535)

    @field_validator("flags")
    @classmethod
    def _flags(cls, v: str) -> str:
        if not isinstance(v, str) or not set(v) <= set("FSRPAUEC"):
            raise ValueError("flags are letters from F S R P A U E C, e.g. S or PA")
        return v


class RTP(Strict):
    """An RTP header (RFC 3550, 12 bytes) at the start of the UDP payload: version 2, the
    payload type, a sequence number that goes up by 1 per frame, a timestamp that goes up
    by ``clock_step`` per frame, a fixed SSRC. A decoder (tshark ``-d udp.port==N,rtp``)
    reads the stream as the codec's; tgen's signature stays in the last 12 bytes."""

    payload_type: int = Field(0, ge=0, le=127, description="RTP payload type (0 PCMU, 18 G729)")
    clock_step: int = Field(
        160, ge=0, le=1 << 24, description="Timestamp increment per frame (samples per packet)"
    )
    ssrc: int = Field(0x74676E01, ge=0, le=0xFFFFFFFF, description="Synchronisation source")
    marker: bool = Field(False, description="The marker bit")


#: Voice presets (``preset:`` on a stream): RFC 3551's figures for each codec at its common
#: packetisation: (payload type, payload bytes per packet, packets/s, clock step).
#: PCMU (G.711 mu-law): 8,000 samples/s of 8 bits, 20 ms -> 160 B, 50 pps (RFC 3551 4.5.14);
#: G.729: 8 kbit/s in 10 ms frames of 10 B, 2 per packet -> 20 B, 50 pps (4.5.6);
#: G.723.1: 6.3 kbit/s in 30 ms frames of 24 B -> 24 B, 33.3 pps, 240 samples (4.5.3).
VOICE_PRESETS: dict[str, tuple[int, int, float, int]] = {
    "g711": (0, 160, 50.0, 160),
    "g729": (18, 20, 50.0, 160),
    "g723": (4, 24, 1000.0 / 30.0, 240),
}
RTP_HLEN = 12


#: D-ITG's application presets (D-ITG 2.8.1, ITGSend/traffic.cpp: dnsParser, QuakeParser).
#: D-ITG's sizes are UDP payloads, so the frame adds UDP, IP and Ethernet with the FCS.
#: dns: one query every 1/0.56 s (constant), payload uniform on 100..320 B;
#: quake3: gaps 0.6 exponential (mean 4.29 ms) / 0.4 constant 10.75 ms, payload normal
#: (mean 64.151757 B, sd 3.2035755 B), after Lang, Branch and Armitage (ACE 2004).
DITG_DNS_PPS = 0.56
DITG_DNS_PAYLOAD = (100, 320)
DITG_QUAKE3_PAYLOAD = (64.151757, 3.2035755)
DITG_QUAKE3_MEAN_MS = 0.6 * 4.29 + 0.4 * 10.75  # = packets.schedule.QUAKE3_MEAN_MS


def _app_preset(data: dict, hdr: int) -> dict:
    """``preset: dns`` or ``quake3`` (D-ITG's models) fills what the stream leaves out;
    ``hdr`` is the frame's bytes around the UDP payload (Ethernet, tags, IP, UDP, FCS)."""
    name = data.get("preset")
    if name == "dns":
        data.setdefault("udp", {"src_port": 1053, "dst_port": 53})
        lo, hi = DITG_DNS_PAYLOAD
        data.setdefault("size", {"min": hdr + lo, "max": hdr + hi, "mode": "random"})
        data.setdefault("rate", {"pps": DITG_DNS_PPS})
    elif name == "quake3":
        data.setdefault("udp", {"src_port": 27960, "dst_port": 27960})
        mean, sd = DITG_QUAKE3_PAYLOAD
        size = hdr + mean
        data.setdefault("size", {"dist": "normal", "mean": size, "param": sd / size})
        data.setdefault("rate", {"pps": 1000.0 / DITG_QUAKE3_MEAN_MS})
        data.setdefault("idt", {"dist": "quake3"})
    return data


def _voice_preset(data: dict) -> dict:
    """``preset: g711`` fills what the stream leaves out: UDP to port 5004, the RTP header,
    the frame size (the codec's payload behind RTP, UDP, IP and Ethernet, with the FCS)
    and the codec's packet rate."""
    name = data.get("preset")
    l3 = 40 if data.get("ipv6") is not None else 20
    vlans = data.get("vlan") or []
    tags = len(vlans) if isinstance(vlans, list) else 0
    if name in ("dns", "quake3"):
        return _app_preset(data, ETH_HLEN + VLAN_HLEN * tags + l3 + 8 + FCS_LEN)
    if name is None or name not in VOICE_PRESETS:
        return data
    pt, payload, pps, step = VOICE_PRESETS[name]
    data.setdefault("udp", {"src_port": 5004, "dst_port": 5004})
    data.setdefault("rtp", {"payload_type": pt, "clock_step": step})
    data.setdefault("size", ETH_HLEN + VLAN_HLEN * tags + l3 + 8 + RTP_HLEN + payload + FCS_LEN)
    data.setdefault("rate", {"pps": pps})
    return data


class ICMP(Strict):
    """ICMP echo (ICMPv6 echo for IPv6 streams). The echo id acts as the NAT 'port'."""

    type: int | None = Field(
        None, ge=0, le=255, description="Default 8 (IPv4) or 128 (IPv6): echo request"
    )
    code: int = Field(0, ge=0, le=255)
    id: PortRange = Field(default_factory=lambda: PortRange(min=1, max=1, mode="fixed"))


# --------------------------------------------------------------------------- size
#: IMIX presets by their standard names: (frame size with FCS, weight). The weights are
#: the standards' shares (OTG's 58.67 % as 5867 in 10,000), and the frames follow an exact,
#: seeded interleaving of one cycle of the weights. Sources: OTG's flow size weight pairs
#: (open-traffic-generator/models, ``predefined``); FD.io CSIT's IMIX_v4_1 (7×64, 4×570,
#: 1×1518). Where a standard names a size below Ethernet's 64 B minimum (OTG standard_imix:
#: 58 and 62 B; ipv6_imix: 60 B), the frame is sent at 64 B (78 B in ipv6_imix, the smallest
#: IPv6/UDP frame with the signature) and the preset's description says so.
IMIX_PRESETS: dict[str, list[tuple[int, int]]] = {
    "classic": [(64, 7), (594, 4), (1518, 1)],  # the simple IMIX 7:4:1 (Cisco's)
    "cisco": [(64, 7), (594, 4), (1518, 1)],
    "ipv6": [(78, 7), (594, 4), (1518, 1)],
    "imix": [(64, 7), (570, 4), (1518, 1)],  # OTG imix
    "csit": [(64, 7), (570, 4), (1518, 1)],  # FD.io CSIT IMIX_v4_1
    "ipsec_imix": [(90, 5867), (92, 200), (594, 2366), (1418, 1567)],
    "ipv6_imix": [(78, 5867), (496, 200), (594, 2366), (1518, 1567)],  # OTG: 60 B -> 78 B
    "standard_imix": [(64, 5867), (64, 200), (594, 2366), (1518, 1567)],  # 58/62 B -> 64 B
    "tcp_imix": [(90, 5867), (92, 200), (594, 2366), (1518, 1567)],
}
IMIX_NOTES: dict[str, str] = {
    "classic": "64/594/1518 B at 7:4:1",
    "cisco": "64/594/1518 B at 7:4:1 (the same as classic)",
    "ipv6": "78/594/1518 B at 7:4:1",
    "imix": "OTG imix: 64/570/1518 B at 7:4:1",
    "csit": "FD.io CSIT IMIX_v4_1: 7×64, 4×570, 1×1518 B",
    "ipsec_imix": "OTG ipsec_imix: 90/92/594/1418 B at 58.67/2/23.66/15.67 %",
    "ipv6_imix": "OTG ipv6_imix: 60 (sent as 78)/496/594/1518 B at 58.67/2/23.66/15.67 %",
    "standard_imix": "OTG standard_imix: 58 and 62 (sent as 64)/594/1518 B at "
    "58.67/2/23.66/15.67 %",
    "tcp_imix": "OTG tcp_imix: 90/92/594/1518 B at 58.67/2/23.66/15.67 %",
}


class FixedSize(Strict):
    fixed: int = Field(ge=MIN_FRAME, le=MAX_FRAME, description="Frame size in bytes including FCS")


class RangeSize(Strict):
    min: int = Field(ge=MIN_FRAME, le=MAX_FRAME)
    max: int = Field(ge=MIN_FRAME, le=MAX_FRAME)
    mode: Literal["inc", "random"] = "random"
    step: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _order(self):
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be ≤ max ({self.max})")
        check_step(self.step, self.max - self.min + 1, self.mode, f"{self.min}..{self.max}")
        return self


class ImixEntry(Strict):
    size: int = Field(ge=MIN_FRAME, le=MAX_FRAME)
    weight: int = Field(ge=1, le=1000)


def _imix_preset(v: Any) -> Any:
    if isinstance(v, str) and v not in IMIX_PRESETS:
        raise ValueError(
            f"{v!r} is not an IMIX preset: give one of {', '.join(IMIX_PRESETS)}, or a list of "
            "{size, weight}, e.g. [{size: 64, weight: 7}, {size: 1518, weight: 1}]"
        )
    return v


class ImixSize(Strict):
    imix: Annotated[
        Literal[
            "classic",
            "cisco",
            "ipv6",
            "imix",
            "csit",
            "ipsec_imix",
            "ipv6_imix",
            "standard_imix",
            "tcp_imix",
        ]
        | list[ImixEntry],
        BeforeValidator(_imix_preset),
    ] = Field(
        description="A preset name (classic, cisco, ipv6, imix, csit, ipsec_imix, ipv6_imix, "
        "standard_imix, tcp_imix) or a list of {size, weight}"
    )

    @property
    def entries(self) -> list[tuple[int, int]]:
        if isinstance(self.imix, str):
            return IMIX_PRESETS[self.imix]
        return [(e.size, e.weight) for e in self.imix]


class LawSize(Strict):
    """Sizes drawn from a law with a mean, clipped to ``min..max`` (bytes with the FCS):
    one cycle of 16,384 seeded draws, repeated (exact over every cycle)."""

    dist: Literal["exponential", "normal", "lognormal", "gamma", "weibull", "pareto"]
    mean: float = Field(gt=0, le=MAX_FRAME, description="Mean frame size (B, with the FCS)")
    param: float | None = Field(
        None,
        gt=0,
        le=100,
        description="normal: sd as a fraction of the mean (0.25); lognormal: sigma of "
        "ln(size) (0.5); gamma, weibull, pareto: the shape (2, 1.5, 2.5; pareto > 1)",
    )
    min: int = Field(MIN_FRAME, ge=MIN_FRAME, le=MAX_FRAME)
    max: int = Field(1518, ge=MIN_FRAME, le=MAX_FRAME)

    @model_validator(mode="after")
    def _rules(self):
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be ≤ max ({self.max})")
        problem = law_problem(self.dist, self.param)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def law_param(self) -> float:
        return law_param(self.dist, self.param)


def _size_tag(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        return "fixed"
    if isinstance(v, LawSize) or (isinstance(v, dict) and "dist" in v):
        return "law"
    if isinstance(v, dict):
        if "imix" in v:
            return "imix"
        if "fixed" in v:
            return "fixed"
        return "range"
    if isinstance(v, FixedSize):
        return "fixed"
    if isinstance(v, ImixSize):
        return "imix"
    return "range"


def _size_scalar(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return {"fixed": v}
    if isinstance(v, str) and v in IMIX_PRESETS:
        return {"imix": v}
    if not isinstance(v, dict | FixedSize | RangeSize | ImixSize | LawSize):
        raise ValueError(
            f"{v!r} is not a frame size: write bytes (64), a range {{min: 64, max: 1518, mode: random}} "
            f"or an IMIX {{imix: classic}}"
        )
    return v


FrameSize = Annotated[
    Annotated[FixedSize, Tag("fixed")]
    | Annotated[RangeSize, Tag("range")]
    | Annotated[ImixSize, Tag("imix")]
    | Annotated[LawSize, Tag("law")],
    Discriminator(_size_tag),
    BeforeValidator(_size_scalar),
]


def size_bounds(size: FixedSize | RangeSize | ImixSize | LawSize) -> tuple[int, int, float]:
    """(smallest, largest, mean) frame size in bytes including FCS (a law's: the mean of
    its drawn cycle, which the clipping moves; drawn with key 0, within a byte of any
    stream's own cycle)."""
    if isinstance(size, FixedSize):
        return size.fixed, size.fixed, float(size.fixed)
    if isinstance(size, LawSize):
        from tgen_tui.profiles.sizelaw import clipped_mean

        mean = clipped_mean(size.dist, size.mean, size.law_param, size.min, size.max)
        return size.min, size.max, mean
    if isinstance(size, RangeSize):
        return size.min, size.max, (size.min + size.max) / 2
    e = size.entries
    tot = sum(w for _, w in e)
    return min(s for s, _ in e), max(s for s, _ in e), sum(s * w for s, w in e) / tot


# --------------------------------------------------------------------------- rate
class PpsRate(Strict):
    pps: Count = Field(
        ge=0.001, description="Frames per second, e.g. 10000, 100k, 1.5M (at least 0.001)"
    )


class BitRateSpec(Strict):
    bps: BitRate = Field(description="Bits per second, e.g. 100M or 1G")
    layer: Literal["L1", "L2"] = Field(
        "L1", description="L1 counts preamble+IFG (20 B/frame); L2 counts the frame with FCS"
    )


class PercentRate(Strict):
    percent: float = Field(ge=1e-6, le=100, description="Percent of the port's line rate (L1)")


def _rate_tag(v: Any) -> str:
    if isinstance(v, dict):
        for k in ("pps", "bps", "percent"):
            if k in v:
                return k
        return "pps"
    return {PpsRate: "pps", BitRateSpec: "bps", PercentRate: "percent"}.get(type(v), "pps")


_LAYER_SUFFIX = re.compile(r"^(.*?)\s*[@/ ]\s*(L[12])$", re.IGNORECASE)


def _rate_scalar(v: Any) -> Any:
    """Rates as written by hand: ``5Mpps``, ``100Mbit``, ``100 Mbit/s L2``, ``1G@L1``, ``50%``."""
    if isinstance(v, str):
        s = v.strip()
        layer = None
        m = _LAYER_SUFFIX.match(s)
        if m:
            s, layer = m.group(1).strip(), m.group(2).upper()
        if s.endswith("%"):
            out: dict[str, Any] = {"percent": s[:-1]}
        elif s.endswith(("pps", "fps")):
            out = {"pps": s[:-3]}
        elif s.endswith(("bit/s", "bps", "b/s", "bit")):
            out = {"bps": s}
        else:
            raise ValueError(
                f"ambiguous rate {v!r}: write e.g. 5Mpps, 100Mbit/s, 100Mbit L2 or 50%"
            )
        if layer is not None:
            if "bps" not in out:
                raise ValueError(f"{v!r}: L1/L2 applies to bit rates only (e.g. 100Mbit L2)")
            out["layer"] = layer
        return out
    if isinstance(v, int | float) and not isinstance(v, bool):
        return {"pps": v}
    return v


Rate = Annotated[
    Annotated[PpsRate, Tag("pps")]
    | Annotated[BitRateSpec, Tag("bps")]
    | Annotated[PercentRate, Tag("percent")],
    Discriminator(_rate_tag),
    BeforeValidator(_rate_scalar),
]


def parse_rate(value: object) -> PpsRate | BitRateSpec | PercentRate:
    """A rate as the profiles write it (``25kpps``, ``100Mbit L2``, ``10%``, or a number of
    frames/s), parsed by the same model; ValueError with the model's message otherwise."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(Rate).validate_python(value)
    except ValidationError as e:
        msgs = "; ".join(
            str(err.get("msg", "")).removeprefix("Value error, ") for err in e.errors()
        )
        raise ValueError(f"rate {value!r}: {msgs}") from None


def rate_to_pps(
    rate: PpsRate | BitRateSpec | PercentRate, mean_size: float, line_rate_bps: float
) -> float:
    """Resolve a rate to frames/s at the stream's mean frame size (bytes incl. FCS)."""
    if isinstance(rate, PpsRate):
        return float(rate.pps)
    if isinstance(rate, PercentRate):
        return line_rate_fps(line_rate_bps, mean_size) * rate.percent / 100.0
    overhead = float(L1_OVERHEAD) if rate.layer == "L1" else 0.0
    return rate.bps / (8.0 * (mean_size + overhead))


def _burst_period_problems(s: Stream, speed: float, where: str) -> list[str]:
    """``every`` shorter than a burst's own slot (frames at the burst's rate)."""
    mode = s.mode
    if not isinstance(mode, MultiBurst) or mode.every is None:
        return []
    slot = mode.frames / s.burst_pps(speed)
    if slot <= float(mode.every):
        return []
    return [
        f"{where}.mode.every: {float(mode.every) * 1e3:g} ms is shorter than a burst of "
        f"{mode.frames:,} frames at {s.burst_pps(speed):,.0f} fps ({slot * 1e3:.3g} ms)"
    ]


def _k(pps: float) -> str:
    for scale, unit in ((1e6, "M"), (1e3, "k")):
        if pps >= scale:
            return f"{pps / scale:g}{unit}"
    return f"{pps:g}"


# --------------------------------------------------------------------------- rate over time
class RateStep(Strict):
    """A constant rate for a while: ``{rate: 10kpps, for: 5s}``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)
    rate: Rate = Field(description="The rate of this step (pps, bit/s or % of line)")
    for_: Seconds = Field(alias="for", gt=0, description="How long, e.g. 5s")


class RampSpec(Strict):
    """A linear ramp: ``{from: 1kpps, to: 100kpps, over: 30s}``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)
    from_: Rate = Field(alias="from", description="Rate at the ramp's start")
    to: Rate = Field(description="Rate at the ramp's end")
    over: Seconds = Field(gt=0, description="Duration of the ramp, e.g. 30s")


class RampStep(Strict):
    ramp: RampSpec


def _step_tag(v: Any) -> str:
    if isinstance(v, RampStep) or (isinstance(v, dict) and "ramp" in v):
        return "ramp"
    return "step"


def _shape_scalar(v: Any) -> Any:
    """``shape: [steps]`` and ``shape: {ramp: …}`` as shorthands of ``{steps: [...]}``."""
    if isinstance(v, list):
        return {"steps": v}
    if isinstance(v, dict) and "ramp" in v and "steps" not in v:
        rest = {k: x for k, x in v.items() if k != "ramp"}
        return {"steps": [{"ramp": v["ramp"]}], **rest}
    return v


class RateShapeSpec(Strict):
    """The rate over time: steps and linear ramps, in order, sent once or repeated. Frame
    i is due when the integral of the rate reaches i, so counts stay exact."""

    steps: list[
        Annotated[
            Annotated[RateStep, Tag("step")] | Annotated[RampStep, Tag("ramp")],
            Discriminator(_step_tag),
        ]
    ] = Field(min_length=1, max_length=1000, description="Steps {rate, for} and ramps {ramp}")
    repeat: bool = Field(False, description="Repeat the shape (else the stream ends after it)")

    def segments_pps(
        self, mean_size: float, line_rate_bps: float
    ) -> list[tuple[float, float, float]]:
        """(duration_s, pps_start, pps_end) of each step, the rates resolved."""
        out = []
        for st in self.steps:
            if isinstance(st, RateStep):
                r = rate_to_pps(st.rate, mean_size, line_rate_bps)
                out.append((float(st.for_), r, r))
            else:
                a = rate_to_pps(st.ramp.from_, mean_size, line_rate_bps)
                b = rate_to_pps(st.ramp.to, mean_size, line_rate_bps)
                out.append((float(st.ramp.over), a, b))
        return out

    @property
    def duration_s(self) -> float:
        return sum(
            float(st.for_ if isinstance(st, RateStep) else st.ramp.over) for st in self.steps
        )


RateShapeField = Annotated[RateShapeSpec, BeforeValidator(_shape_scalar)]


# --------------------------------------------------------------------------- mode, schedule, idt
class Continuous(Strict):
    type: Literal["continuous"] = "continuous"


class Burst(Strict):
    type: Literal["burst"]
    count: int = Field(ge=1, description="Frames to send, then stop")


class MultiBurst(Strict):
    """``frames`` frames, then a pause: at the stream's rate inside the burst, or at the
    port's line rate (``at: line``); the pause as ``gap`` (from the burst's end) or the
    burst period as ``every`` (start to start); ``bursts`` of them, or until stopped."""

    type: Literal["multi_burst"]
    frames: int = Field(ge=1, description="Frames per burst")
    bursts: int | None = Field(None, ge=1, description="Number of bursts (none: until stopped)")
    gap: Seconds | None = Field(None, description="Pause between bursts, e.g. 10ms")
    every: Seconds | None = Field(
        None, gt=0, description="Burst period, start to start, e.g. 50ms (instead of gap)"
    )
    at: Literal["stream", "line"] = Field(
        "stream", description="Frames inside a burst at the stream's rate or the port's line rate"
    )

    @model_validator(mode="after")
    def _gap_or_every(self):
        if (self.gap is None) == (self.every is None):
            raise ValueError("give the pause between bursts as gap (10ms) or every (50ms)")
        return self

    def pause_s(self, burst_pps: float) -> float:
        """The pause after a burst's slot (``frames / burst_pps``), from gap or every."""
        if self.gap is not None:
            return float(self.gap)
        return float(self.every) - self.frames / burst_pps  # type: ignore[arg-type]


def _mode_scalar(v: Any) -> Any:
    return {"type": v} if isinstance(v, str) else v


Mode = Annotated[
    Continuous | Burst | MultiBurst,
    Field(discriminator="type"),
    BeforeValidator(_mode_scalar),
]


class ConstantIdt(Strict):
    dist: Literal["constant"] = "constant"


class ExponentialIdt(Strict):
    dist: Literal["exponential"]


class ParetoIdt(Strict):
    dist: Literal["pareto"]
    shape: float = Field(1.5, gt=1.0, description="Pareto shape α (> 1 so the mean exists)")


class NormalIdt(Strict):
    dist: Literal["normal"]
    sd: float = Field(0.1, ge=0, description="Standard deviation as a fraction of the mean gap")


class UniformIdt(Strict):
    dist: Literal["uniform"]
    spread: float = Field(0.5, ge=0, le=1, description="Half-width as a fraction of the mean gap")


class GammaIdt(Strict):
    """Gamma gaps: shape 1 is exponential, larger shapes are more regular (CV 1/√shape)."""

    dist: Literal["gamma"]
    shape: float = Field(2.0, ge=0.05, le=1000, description="Gamma shape k (CV = 1/√k)")


class WeibullIdt(Strict):
    """Weibull gaps: shape 1 is exponential, below 1 burstier, above 1 more regular."""

    dist: Literal["weibull"]
    shape: float = Field(1.5, ge=0.2, le=100, description="Weibull shape k")


class LognormalIdt(Strict):
    """Log-normal gaps: ln(gap) is normal with standard deviation ``sigma``."""

    dist: Literal["lognormal"]
    sigma: float = Field(0.5, gt=0, le=3, description="Standard deviation of ln(gap)")


class CauchyIdt(Strict):
    """Cauchy gaps around the mean gap, truncated to 0 .. 2 × the mean gap (a Cauchy law
    has no mean; the symmetric truncation gives it one, equal to the asked gap)."""

    dist: Literal["cauchy"]
    scale: float = Field(
        0.1, gt=0, le=10, description="Scale γ as a fraction of the mean gap (truncated: 0..2×)"
    )


class Quake3Idt(Strict):
    """D-ITG's Quake3 gaps (``preset: quake3``): with probability 0.6 exponential of mean
    4.29 ms, else a constant 10.75 ms (mean 6.874 ms), scaled to the stream's mean gap."""

    dist: Literal["quake3"]


Idt = Annotated[
    ConstantIdt
    | ExponentialIdt
    | ParetoIdt
    | NormalIdt
    | UniformIdt
    | GammaIdt
    | WeibullIdt
    | LognormalIdt
    | CauchyIdt
    | Quake3Idt,
    Field(discriminator="dist"),
    BeforeValidator(lambda v: {"dist": v} if isinstance(v, str) else v),
]


# --------------------------------------------------------------------------- stream, port, profile
class Stream(Strict):
    """One stream: headers, frame size, rate, mode and schedule, sent from ``port``."""

    name: str = Field(min_length=1, max_length=64)
    port: str = Field(description="Name of the sending port (a key of ports:)")
    rx_port: str | None = Field(None, description="Port where the stream is expected to arrive")
    enabled: bool = True
    eth: Ethernet | None = Field(
        None,
        description="Ethernet addresses. Left out, on a port with a gateway (gateway6 for IPv6), "
        "the source is the port's own MAC and the destination the gateway's, resolved by "
        "ARP/ND at start; left out elsewhere, the defaults of eth",
    )
    vlan: list[Vlan] = Field(
        default_factory=list, max_length=2, description="0, 1 or 2 (QinQ) tags, outer first"
    )
    ipv4: IPv4 | None = None
    ipv6: IPv6 | None = None
    udp: UDP | None = None
    tcp: TCP | None = None
    icmp: ICMP | None = None
    rtp: RTP | None = Field(None, description="An RTP header at the start of the UDP payload")
    preset: Literal["g711", "g729", "g723", "dns", "quake3"] | None = Field(
        None,
        description="A voice codec's stream (RFC 3551): UDP 5004, RTP, the codec's frame size "
        "and packet rate (g711: 218 B at 50 fps); or D-ITG's application models: dns (UDP "
        "53, 0.56 queries/s, 100-320 B payloads), quake3 (UDP 27960, 145.5 pps, D-ITG's "
        "gap law, payload normal 64.2 ± 3.2 B); fields given override it",
    )
    size: FrameSize = Field(
        default_factory=lambda: FixedSize(fixed=64),
        description="Bytes incl. FCS: 64, {min,max,mode}, or {imix: classic}",
    )
    rate: Rate = Field(default_factory=lambda: PpsRate(pps=1000))
    shape: RateShapeField | None = Field(
        None,
        description="Rate over time instead of one rate: steps [{rate: 10kpps, for: 5s}, "
        "...] and ramps {ramp: {from: 1kpps, to: 100kpps, over: 30s}}, repeat: true|false",
    )
    mode: Mode = Field(default_factory=Continuous)
    schedule: Schedule = Field(default_factory=Schedule)
    idt: Idt = Field(default_factory=ConstantIdt, description="Inter-departure time distribution")
    blocks: int = Field(
        1,
        ge=1,
        le=1 << 20,
        description="Flows in blocks: each flow (header tuple) sends this many frames in a row "
        "before the next flow's (1: the next flow every frame). With schedule.burst of the "
        "same size, each burst is one flow",
    )
    seed: int | None = Field(None, ge=0, description="Overrides the profile seed for this stream")
    learn: bool = Field(
        False,
        description="Reply stream: its port learns the (translated) tuples of the streams "
        "arriving there and this stream replies to them (addresses and ports from the table)",
    )
    pcap: PcapSource | None = Field(
        None,
        description="Replay a capture: the frames of a pcap/pcapng file instead of synthetic "
        "headers (file, frames, filter, loops, unique, timing)",
    )
    rewrite: Rewrite | None = Field(
        None, description="pcap: streams: address, port and VLAN rewrites for the test bed"
    )

    def _rate_given(self) -> bool:
        """A rate other than the default (a derived profile, dumped and validated again,
        carries the default rate too: that is not the user giving one)."""
        return self.rate != PpsRate(pps=1000)

    @model_validator(mode="after")
    def _rtp_needs_udp(self):
        if self.rtp is not None and self.udp is None:
            raise ValueError("rtp: an RTP header rides on UDP (give udp:)")
        return self

    @model_validator(mode="after")
    def _line_bursts(self):
        if isinstance(self.mode, MultiBurst) and self.mode.at == "line":
            if self._rate_given():
                raise ValueError(
                    "rate: a burst at line rate is sent at the port's speed; give the burst "
                    "period as mode.every (or mode.gap), not a rate"
                )
        return self

    def burst_pps(self, line_rate_bps: float) -> float:
        """Frames/s inside a burst: the line rate for ``at: line``, else the stream's rate."""
        mean = size_bounds(self.size)[2]
        if isinstance(self.mode, MultiBurst) and self.mode.at == "line":
            return line_rate_fps(line_rate_bps, mean)
        return self.peak_pps(line_rate_bps)

    @model_validator(mode="after")
    def _shape_alone(self):
        if self.shape is None:
            return self
        if self._rate_given():
            raise ValueError("shape: give a rate or a shape, not both (the shape has the rates)")
        if not isinstance(self.mode, Continuous):
            raise ValueError("shape: a shaped stream is continuous (no burst or multi_burst)")
        if self.schedule.on and self.schedule.off:
            raise ValueError(
                "shape: a shaped stream has no on/off schedule (the steps are its schedule)"
            )
        return self

    @model_validator(mode="after")
    def _learn_needs_ipv4(self):
        if self.learn and (self.ipv4 is None or self.l4_kind not in ("udp", "tcp")):
            raise ValueError("learn: true needs an IPv4 UDP or TCP stream")
        return self

    @model_validator(mode="before")
    @classmethod
    def _default_l3(cls, data: Any) -> Any:
        """No (or null) ipv4/ipv6 means IPv4; no (or null) udp/tcp/icmp means UDP."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("pcap") is not None:
            check_pcap_stream(data)
            return data
        if data.get("rewrite") is not None:
            raise ValueError("rewrite: goes with a pcap: source (synthetic headers set their own)")
        for k in ("ipv4", "ipv6", "udp", "tcp", "icmp"):
            if k in data and data[k] is None:
                del data[k]
        data = _voice_preset(data)
        if "ipv4" not in data and "ipv6" not in data:
            data["ipv4"] = {}
        if not any(k in data for k in ("udp", "tcp", "icmp")):
            data["udp"] = {}
        return data

    @model_validator(mode="after")
    def _headers(self):
        if self.pcap is not None:
            if not isinstance(self.mode, Continuous) or self.idt.dist != "constant":
                raise ValueError(
                    "a pcap: stream is paced by its rate or the recorded times: leave out "
                    "mode and idt (pcap.loops counts the frames)"
                )
            if self.schedule.on > 0:
                raise ValueError("schedule: a pcap: stream takes start and stop, not on/off")
            return self
        if self.ipv4 is not None and self.ipv6 is not None:
            raise ValueError("give ipv4 or ipv6, not both")
        l4 = [k for k in ("udp", "tcp", "icmp") if getattr(self, k) is not None]
        if len(l4) > 1:
            raise ValueError(f"give one of udp, tcp, icmp (got {', '.join(l4)})")
        space = 1
        for f in self._unique_ranges():
            space *= f.span
        if space > MAX_UNIQUE:
            raise ValueError(
                f"the unique fields span {space:,} combinations; at most {MAX_UNIQUE:,} (2**64) are supported"
            )
        need = self.header_len() + SIG_LEN + FCS_LEN
        lo, _, _ = size_bounds(self.size)
        if lo < need:
            raise ValueError(
                f"size: frame size {lo} B is too small: headers ({self.header_len()} B) + signature "
                f"({SIG_LEN} B) + FCS ({FCS_LEN} B) need at least {need} B"
            )
        return self

    def peak_pps(self, line_rate_bps: float) -> float:
        """The stream's rate in frames/s, or its shape's peak."""
        mean = size_bounds(self.size)[2]
        if self.shape is not None:
            return max(max(a, b) for _, a, b in self.shape.segments_pps(mean, line_rate_bps))
        return rate_to_pps(self.rate, mean, line_rate_bps)

    def mean_pps(self, line_rate_bps: float) -> float:
        """The stream's mean rate (frames/s): bursts and their pauses averaged; a shape's
        peak (its mean is in shape_text)."""
        mode = self.mode
        if isinstance(mode, MultiBurst):
            pps = self.burst_pps(line_rate_bps)
            return mode.frames / (mode.frames / pps + max(0.0, mode.pause_s(pps)))
        return self.peak_pps(line_rate_bps)

    def burst_text(self, line_rate_bps: float) -> str:
        """``1,000 frames at line rate (14,880,952 fps) every 50 ms: mean 20,000 fps``."""
        mode = self.mode
        if not isinstance(mode, MultiBurst):
            return ""
        pps = self.burst_pps(line_rate_bps)
        period = mode.frames / pps + max(0.0, mode.pause_s(pps))
        at = "line rate" if mode.at == "line" else "the stream rate"
        n = "until stopped" if mode.bursts is None else f"{mode.bursts:,} bursts"
        return (
            f"{mode.frames:,} frames at {at} ({pps:,.0f} fps) every {period * 1e3:.4g} ms: "
            f"mean {mode.frames / period:,.0f} fps, {n}"
        )

    def shape_text(self, line_rate_bps: float) -> str:
        """The shape in a few words: ``10k 3s, 50k 3s, 20k 3s (once, 240,000 frames)``."""
        if self.shape is None:
            return ""
        mean = size_bounds(self.size)[2]
        parts, frames = [], 0.0
        for d, a, b in self.shape.segments_pps(mean, line_rate_bps):
            rate = f"{_k(a)}" if a == b else f"{_k(a)}->{_k(b)}"
            parts.append(f"{rate} pps {d:g}s")
            frames += d * (a + b) / 2
        how = "repeated" if self.shape.repeat else f"once, {frames:,.0f} frames"
        return f"{', '.join(parts)} ({how})"

    @property
    def l4_kind(self) -> str:
        if self.pcap is not None:
            return "pcap"
        return "udp" if self.udp else "tcp" if self.tcp else "icmp" if self.icmp else "none"

    def header_len(self) -> int:
        n = ETH_HLEN + VLAN_HLEN * len(self.vlan)
        n += 20 if self.ipv4 is not None else 40
        n += {"udp": 8, "tcp": 20, "icmp": 8, "none": 0}[self.l4_kind]
        return n + (RTP_HLEN if self.rtp is not None else 0)

    def _unique_ranges(self) -> list:
        l3 = self.ipv4 or self.ipv6
        l4 = self.udp or self.tcp
        cands = [l3.src, l3.dst] if l3 is not None else []
        if l4 is not None:
            cands += [l4.src_port, l4.dst_port]
        if self.icmp is not None:
            cands.append(self.icmp.id)
        return [r for r in cands if r.mode == "unique"]

    def flow_ranges(self) -> list[tuple[str, Any]]:
        """The (path, range) of every address, port and ICMP id field of the stream."""
        out: list[tuple[str, Any]] = []
        l3name = "ipv4" if self.ipv4 is not None else "ipv6"
        l3 = self.ipv4 or self.ipv6
        if l3 is not None:
            out += [(f"{l3name}.src", l3.src), (f"{l3name}.dst", l3.dst)]
        l4name = "udp" if self.udp is not None else "tcp"
        l4 = self.udp or self.tcp
        if l4 is not None:
            out += [(f"{l4name}.src_port", l4.src_port), (f"{l4name}.dst_port", l4.dst_port)]
        if self.icmp is not None:
            out.append(("icmp.id", self.icmp.id))
        return out

    def distinct_flows(self) -> int:
        """Distinct tuples the stream sends, as its field program emits them: the inc/dec
        fields (each of period span / gcd(step, span)) and the unique group (one
        permutation of its product) repeat together after the least common multiple of
        their periods; each random field multiplies by its span (it draws from all of it)."""
        period, unique, drawn = 1, 1, 1
        for _, r in self.flow_ranges():
            if r.mode == "unique":
                unique *= r.span
            elif r.mode == "random":
                drawn *= r.span
            else:
                period = math.lcm(period, r.period or 1)
        return math.lcm(period, unique) * drawn


def _iface(cls: type, example: str) -> Any:
    """A validator: an address with its prefix length (``example``) -> ``cls``."""

    def check(v: Any) -> Any:
        if v is None or isinstance(v, cls):
            return v
        s = str(v)
        if "/" not in s:
            raise ValueError(f"{s!r}: give the address with its prefix length, e.g. {example}")
        return cls(s)

    return check


_iface_v4 = _iface(ipaddress.IPv4Interface, "198.18.0.2/24")
_iface_v6 = _iface(ipaddress.IPv6Interface, "2001:2::2/64")


IFNAMSIZ = 16  # the kernel's interface name buffer: 15 bytes and the NUL


def check_ifname(v: Any) -> Any:
    """A Linux interface name: 1 to 15 bytes (UTF-8), no '/', ':' or whitespace, not . or .."""
    if not isinstance(v, str):
        return v
    n = len(v.encode("utf-8", "surrogatepass"))
    if n >= IFNAMSIZ:
        raise ValueError(
            f"{v!r} is {n} bytes; Linux interface names are at most {IFNAMSIZ - 1} bytes (UTF-8)"
        )
    bad = sorted({c for c in v if c in "/:" or c.isspace()})
    if bad or v in (".", ".."):
        shown = ", ".join(repr(c) for c in bad) if bad else repr(v)
        raise ValueError(f"{v!r}: an interface name may not contain {shown}")
    return v


class Port(Strict):
    """A tester port: a Linux interface, optionally inside a network namespace."""

    interface: Annotated[str, BeforeValidator(check_ifname)] = Field(
        min_length=1,
        max_length=15,
        description="Interface name, e.g. p0 or eth1 (at most 15 bytes)",
    )
    netns: NetnsName | None = Field(
        None, description="Network namespace holding the interface (the lab's is tgen-tester)"
    )
    speed: BitRate = Field(
        10e9,
        description="Line rate for % of line rate and limits, e.g. 10G (veth has none: pick the NIC you model)",
    )
    rate: Rate | None = Field(
        None, description="Port total: scale the streams' rates so they sum to this"
    )
    tx_path: Literal["auto", "sendmmsg", "tx_ring", "af_xdp", "xdp"] = Field(
        "auto",
        description="Send path: auto (what tgen calibrate measured fastest here, else sendmmsg), "
        "sendmmsg, tx_ring, af_xdp (bypasses qdisc and packet taps: tcpdump on the port sees "
        "nothing), or xdp (the kernel builds and sends the frames from one template per stream: "
        "BPF_PROG_RUN live frames, Linux 5.18+, root; fixed sizes, pacing burst; a veth peer "
        "needs NAPI: tgen lab up --xdp)",
    )
    pacing: Literal["auto", "qdisc", "timer", "burst"] = Field(
        "auto",
        description="How frames are spaced on the wire: auto (space them when this host can: "
        "qdisc for constant rates, timer for drawn gaps and bursts, else burst), qdisc (a TBF "
        "on the port spaces them, the worker sleeps), timer (each frame released at its due "
        "time; CPU per frame), burst (every due frame at once: the peak rate)",
    )
    host: str | None = Field(
        None,
        max_length=63,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="Tester host that owns this port, e.g. tester-a: with tgen run --cluster the "
        "port's worker runs on the Ray node started with --resources '{\"tgen:tester-a\": 1}'; "
        "without --cluster it is ignored and the port runs on this machine",
    )
    ipv4: Annotated[ipaddress.IPv4Interface | None, BeforeValidator(_iface_v4)] = Field(
        None,
        description="The port's IPv4 address with prefix, e.g. 198.18.0.2/24 (answered by ARP)",
    )
    gateway: V4 | None = Field(
        None, description="IPv4 gateway (the DUT's address); its MAC is resolved by ARP at start"
    )
    ipv6: Annotated[ipaddress.IPv6Interface | None, BeforeValidator(_iface_v6)] = Field(
        None, description="The port's IPv6 address with prefix, e.g. 2001:2::2/64 (answered by ND)"
    )
    gateway6: V6 | None = Field(
        None, description="IPv6 gateway; its MAC is resolved by Neighbour Solicitation at start"
    )
    respond: bool = Field(
        True,
        description="Answer ARP, Neighbour Solicitation and echo requests for the port's address "
        "and its streams' addresses (false: the DUT cannot resolve them)",
    )
    lanes: int = Field(
        1,
        ge=1,
        le=64,
        description="Sender lanes: this many workers, each pinned to its own core, share the "
        "port; each sends a disjoint share of every stream's flows with its own sequence space "
        "and receives a flow-hash share of the port's frames (PACKET_FANOUT)",
    )

    @model_validator(mode="after")
    def _gateways(self):
        own4 = self.ipv4
        if own4 is not None and own4.network.prefixlen <= 30:
            net = own4.network
            for special, what in (
                (net.network_address, "network"),
                (net.broadcast_address, "broadcast"),
            ):
                if own4.ip == special:
                    host = ipaddress.IPv4Address(int(net.network_address) + 2)
                    raise ValueError(
                        f"ipv4: {own4} is the {what} address of {net}: give the port a host "
                        f"address, e.g. {host}/{net.prefixlen}"
                    )
                if self.gateway == special:
                    raise ValueError(
                        f"gateway: {self.gateway} is the {what} address of {net}, not a host: "
                        "give the DUT's address"
                    )
        for gw, own, name, own_name in (
            (self.gateway, self.ipv4, "gateway", "ipv4"),
            (self.gateway6, self.ipv6, "gateway6", "ipv6"),
        ):
            if gw is None:
                continue
            if own is None:
                raise ValueError(f"{name} {gw} needs the port's own address: give {own_name}")
            if gw not in own.network or gw == own.ip:
                raise ValueError(
                    f"{name} {gw} must be another address in the port's network {own.network}"
                )
        return self

    @model_validator(mode="after")
    def _pacing(self):
        if self.pacing == "qdisc" and self.tx_path == "af_xdp":
            raise ValueError(
                "pacing: qdisc needs tx_path sendmmsg or tx_ring (af_xdp bypasses the qdisc)"
            )
        if self.tx_path == "xdp" and self.pacing in ("qdisc", "timer"):
            raise ValueError(
                f"pacing: {self.pacing} does not fit tx_path xdp (the kernel sends each call's "
                "frames back to back): pacing burst or auto"
            )
        if self.pacing == "qdisc" and self.lanes > 1:
            raise ValueError(f"pacing: qdisc needs one sender lane (lanes: {self.lanes})")
        return self


class HookSpec(Strict):
    """A DUT hook: a shell command run over the DUT channel (netns or ssh), with a timeout."""

    command: str = Field(min_length=1, description="Shell command, run on the DUT")
    timeout_s: float = Field(30.0, gt=0, le=3600, description="Seconds before the hook fails")


def _hook_scalar(v: Any) -> Any:
    return {"command": v} if isinstance(v, str) else v


Hook = Annotated[HookSpec, BeforeValidator(_hook_scalar)]


class DutHooks(Strict):
    """Commands run on the DUT around a run and (methodology) around every trial."""

    before_run: Hook | None = None
    after_run: Hook | None = None
    before_trial: Hook | None = Field(
        None, description="Run before every trial (RFC 9693: reset the DUT's state per trial)"
    )
    after_trial: Hook | None = None


class Dut(Strict):
    """How to probe the device under test's conntrack table during a run."""

    netns: NetnsName | None = Field(
        None, description="DUT network namespace (the lab's is tgen-dut)"
    )
    ssh: str | None = Field(
        None, description="Command prefix to reach a remote DUT, e.g. 'ssh root@dut'"
    )
    hooks: DutHooks = Field(
        default_factory=lambda: DutHooks(),
        description="Commands run on the DUT: before_run, after_run, before_trial, after_trial",
    )
    events: dict[str, str] = Field(
        default_factory=dict,
        description="Named DUT commands the console runs from the keyboard (key x), e.g. "
        "{reload: 'nft -f /etc/nftables.conf', flush: 'conntrack -F'}",
    )

    @field_validator("ssh")
    @classmethod
    def _ssh_words(cls, v: str | None) -> str | None:
        if v is None:
            return v
        import shlex

        try:
            words = shlex.split(v)
        except ValueError as e:
            raise ValueError(
                f"{v!r}: {str(e).lower()} (a command prefix, e.g. 'ssh root@dut')"
            ) from None
        if not words:
            raise ValueError("give a command prefix, e.g. 'ssh root@dut'")
        return v


def _learn_lane_problems(profile, s, where: str) -> list[str]:
    """A learn: true reply stream's port (it learns) and its rx_port (it verifies the
    flows) have one lane: each lane receives only a fanout share of the frames."""
    if not s.learn:
        return []
    out = []
    for field, port in (("port", s.port), ("rx_port", s.rx_port)):
        spec = profile.ports.get(port) if port is not None else None
        n = getattr(spec, "lanes", 1) if spec is not None else 1
        if n > 1:
            out.append(
                f"{where}.{field}: port {port} has lanes: {n}, but a learn: true reply stream's "
                "ports (the learner and the flow verifier) have one lane: each lane would see "
                "only its fanout share of the frames"
            )
    return out


class Profile(Strict):
    """A tgen-tui traffic profile: ports and the streams they send."""

    name: str = Field(
        "profile", description="Short name, shown in the console and stored with results"
    )
    description: str = ""
    seed: int = Field(
        1, ge=0, description="PRNG seed for random/unique fields (reported with every result)"
    )
    duration: Seconds | None = Field(
        None, description="Default run duration, e.g. 30s (tgen run --duration overrides)"
    )
    ports: dict[str, Port] = Field(min_length=1)
    streams: list[Stream] = Field(
        description="Raw-frame streams: at least one, or [] with transport: flows"
    )
    dut: Dut | None = None
    hosts: dict[str, TransportHost] = Field(
        default_factory=dict, description="Per port: where its kernel sockets live (transport)"
    )
    transport: list[TransportStream] = Field(
        default_factory=list, description="Kernel TCP/UDP flows between ports' hosts"
    )

    @model_validator(mode="after")
    def _cross(self):
        problems: list[str] = []  # one "path: message" line each; the loader positions them
        if not self.streams and not self.transport:
            problems.append("streams: give at least one stream (or transport: flows)")
        problems += check_transport(self)
        names: set[str] = set()
        for i, s in enumerate(self.streams):
            where = f"streams[{i}]"
            if s.name in names:
                problems.append(f"{where}.name: duplicate stream name {s.name!r}")
            names.add(s.name)
            if s.port not in self.ports:
                problems.append(
                    f"{where}.port: unknown port {s.port!r} (ports: {', '.join(self.ports)})"
                )
                continue
            if s.rx_port is not None and s.rx_port not in self.ports:
                problems.append(
                    f"{where}.rx_port: unknown port {s.rx_port!r} (ports: {', '.join(self.ports)})"
                )
            problems += _learn_lane_problems(self, s, where)
            if s.pcap is not None and self.ports[s.port].lanes > 1:
                problems.append(
                    f"{where}.pcap: port {s.port} has lanes: {self.ports[s.port].lanes}; a "
                    "pcap: stream is sent by one lane (its loops and unique offsets)"
                )
            if s.blocks > 1 and self.ports[s.port].lanes > 1:
                problems.append(
                    f"{where}.blocks: port {s.port} has lanes: {self.ports[s.port].lanes}; a "
                    "stream that sends its flows in blocks is sent by one lane (lanes would "
                    "split each block)"
                )
            if s.blocks > 1 and s.pcap is not None:
                problems.append(
                    f"{where}.blocks: a pcap: stream sends the capture's frames in order"
                )
            if s.enabled and self.ports[s.port].rate is None:
                speed = self.ports[s.port].speed
                _, _, mean = size_bounds(s.size)
                pps = s.peak_pps(speed)
                top = line_rate_fps(speed, mean)
                problems += _burst_period_problems(s, speed, where)
                if pps > top * (1 + 1e-9):
                    problems.append(
                        f"{where}.rate: {pps:,.0f} fps exceeds the line rate of port {s.port} "
                        f"({top:,.0f} fps at {mean:g} B on {speed / 1e9:g} Gbit/s)"
                    )
        if problems:
            raise ValueError("\n".join(problems))
        return self
