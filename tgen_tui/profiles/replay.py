"""Pydantic models of a replayed capture: a stream's ``pcap:`` source and its ``rewrite:``.

A ``pcap:`` stream takes its frames from a pcap or pcapng file instead of synthetic
headers: which frames (a range of frame numbers, a BPF filter), how many times (loops),
whether each loop's flows are made new (``unique``: the source addresses move on by the
span of the capture's sources every loop, as tcpreplay's ``--unique-ip``), and how they are
timed (at the stream's ``rate:``, or at the recorded times times ``speed``, optionally with
every gap capped at ``max_gap``). ``rewrite:`` maps addresses onto the test bed (IPv4 and
IPv6 prefix maps, keeping the host bits), L4 ports, and adds, changes or strips VLAN tags.

The file itself is read by ``tgen_tui.packets`` (the loader only resolves its path and
checks that it exists): a corrupt file, a rule that maps nothing and a frame over the MTU
are errors of the compile step, named by stream and field.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tgen_tui.profiles.base import Seconds, Strict

TIMINGS = ("rate", "recorded")
SIGNATURES = ("auto", "off")


def _frames_scalar(v: Any) -> Any:
    """``"1-100"`` or ``7`` (frame numbers from 1, as Wireshark counts) -> {first, last}."""
    if isinstance(v, int) and not isinstance(v, bool):
        return {"first": v, "last": v}
    if isinstance(v, str):
        a, sep, b = v.partition("-")
        try:
            first = int(a) if a.strip() else 1
            last = int(b) if sep and b.strip() else (None if sep else first)
        except ValueError:
            raise ValueError(f"{v!r} is not a frame range: write 1-100, 5-, or 7") from None
        return {"first": first, "last": last}
    return v


class FrameRange(Strict):
    """Frame numbers of the file, counted from 1 as Wireshark does; both ends included."""

    first: int = Field(1, ge=1, description="First frame (1 = the file's first)")
    last: int | None = Field(None, ge=1, description="Last frame (none: to the end)")

    @model_validator(mode="before")
    @classmethod
    def _scalar(cls, v: Any) -> Any:
        return _frames_scalar(v)

    @model_validator(mode="after")
    def _order(self):
        if self.last is not None and self.last < self.first:
            raise ValueError(f"last ({self.last}) must be ≥ first ({self.first})")
        return self


class PcapSource(Strict):
    """A stream's frames from a capture file (pcap or pcapng, Ethernet link type)."""

    file: str = Field(
        min_length=1, description="pcap or pcapng file; relative to the profile's folder"
    )
    frames: FrameRange = Field(default_factory=FrameRange, description="e.g. 1-100")
    filter: str | None = Field(
        None, description="BPF expression (as tcpdump's), e.g. 'udp or icmp': the frames kept"
    )
    loops: int | None = Field(
        1, ge=1, description="Times the selection is sent (null: until stopped)"
    )
    unique: bool = Field(
        False,
        description="Every loop moves the IPv4/IPv6 source addresses on by the span of the "
        "capture's sources, so a stateful DUT sees new flows each loop",
    )
    timing: Literal["rate", "recorded"] = Field(
        "rate",
        description="rate: at the stream's rate; recorded: at the file's times times speed",
    )
    speed: float = Field(1.0, gt=0, le=1e6, description="timing: recorded: 2 = twice as fast")
    max_gap: Seconds | None = Field(
        None, description="timing: recorded: cap every recorded gap at this, e.g. 10ms"
    )
    signature: Literal["auto", "off"] = Field(
        "auto",
        description="auto: write the 12-byte signature over the end of UDP, TCP and ICMP echo "
        "payloads that have room (not fragments); off: send the payloads as captured",
    )
    mtu: int = Field(1500, ge=68, le=9216, description="Largest IP packet the port may send")

    @field_validator("filter")
    @classmethod
    def _filter(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("give a BPF expression, e.g. 'udp or icmp', or leave filter out")
        return v

    @model_validator(mode="after")
    def _recorded_only(self):
        if self.timing == "rate" and (self.speed != 1.0 or self.max_gap is not None):
            raise ValueError("speed and max_gap go with timing: recorded")
        return self


def _prefix_map(family: type, v: Any) -> Any:
    """{"10.0.0.0/8": "198.18.0.0/15"} -> list of (from, to) networks, checked."""
    if not isinstance(v, dict):
        raise ValueError('give a map of prefixes, e.g. {"10.0.0.0/8": "198.18.0.0/15"}')
    out = []
    for a, b in v.items():
        nets = []
        for x in (a, b):
            try:
                n = ipaddress.ip_network(str(x), strict=False)
            except ValueError:
                raise ValueError(f"{x!r} is not a prefix like 10.0.0.0/8") from None
            if not isinstance(n, family):
                kind = "IPv4" if family is ipaddress.IPv4Network else "IPv6"
                raise ValueError(f"{x!r} is not an {kind} prefix")
            nets.append(n)
        out.append((str(nets[0]), str(nets[1])))
    return out


class VlanRewrite(Strict):
    """Set the outer tag's id (added to untagged frames; priority kept where there is one)."""

    id: int = Field(ge=0, le=4094)
    pcp: int | None = Field(None, ge=0, le=7, description="Priority (default: kept, or 0)")


class Rewrite(Strict):
    """How a replayed capture is fitted to the test bed; checksums are fixed incrementally."""

    ipv4: list[tuple[str, str]] = Field(
        default_factory=list,
        description='IPv4 prefix map, e.g. {"10.0.0.0/8": "198.18.0.0/15"}: source and '
        "destination; the host bits are kept (modulo the target's size)",
    )
    ipv6: list[tuple[str, str]] = Field(
        default_factory=list, description='IPv6 prefix map, e.g. {"2001:db8::/32": "2001:2::/48"}'
    )
    ports: dict[int, int] = Field(
        default_factory=dict,
        description="UDP/TCP port map, source and destination, e.g. {53: 5353, 80: 8080}",
    )
    vlan: Literal["keep", "strip"] | VlanRewrite = Field(
        "keep", description="keep, strip (remove every tag), or {id: 35} (set or add the outer)"
    )

    @field_validator("ipv4", mode="before")
    @classmethod
    def _v4(cls, v: Any) -> Any:
        return _prefix_map(ipaddress.IPv4Network, v) if not isinstance(v, list) else v

    @field_validator("ipv6", mode="before")
    @classmethod
    def _v6(cls, v: Any) -> Any:
        return _prefix_map(ipaddress.IPv6Network, v) if not isinstance(v, list) else v

    @field_validator("ports")
    @classmethod
    def _ports(cls, v: dict[int, int]) -> dict[int, int]:
        for a, b in v.items():
            if not (0 <= a <= 65535 and 0 <= b <= 65535):
                raise ValueError(f"{a}: {b}: ports are 0 to 65535")
        return v


#: keys of a stream that a pcap: stream takes from its file instead
HEADER_KEYS = ("vlan", "ipv4", "ipv6", "udp", "tcp", "icmp", "size", "learn")


def _default(key: str, v: Any) -> bool:
    """A header key at its default, as a validated stream dumps it (a derived profile:
    profiles.revalidate): no tags, no headers, the default size, not learning."""
    if v is None or v is False or v == []:
        return True
    return key == "size" and (v == 64 or v == {"fixed": 64})


def check_pcap_stream(data: dict) -> None:
    """A ``pcap:`` stream gives no synthetic headers (ValueError naming the first)."""
    given = [k for k in HEADER_KEYS if k in data and not _default(k, data[k])]
    if given:
        raise ValueError(
            f"{given[0]}: a pcap: stream takes its headers and sizes from the file: "
            f"remove {', '.join(given)} (use rewrite: to change addresses, ports or VLANs)"
        )


__all__ = ["FrameRange", "PcapSource", "Rewrite", "VlanRewrite", "check_pcap_stream"]
