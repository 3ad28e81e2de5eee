"""Captured frames for the Capture screen: one line each, the layers of one, the filter
check as the operator types, the default file name.

scapy decodes here (reading, never sending), and only the frames the console is handed
(a capture reports its last few frames four times a second, engine/capture.py): the
list decodes each such frame once, the detail pane the one the cursor is on.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from tgen_tui.engine.capture import SELECTOR_STREAM

CAPTURE_DIR = "captures"  # under the current directory
_COMMENT = re.compile(r"^stream (?P<name>\S+) seq (?P<seq>\d+)(?: lane (?P<lane>\d+))?")


@dataclass(frozen=True)
class Signed:
    """What a frame's comment says about its signature (``stream up seq 12 lane 0``)."""

    stream: str | None  # None: no signature ("other")
    seq: int | None = None
    lane: int = 0

    def short(self) -> str:
        """``up #12`` (``up #12/1`` on lane 1), or ``other``."""
        if self.stream is None:
            return "other"
        lane = f"/{self.lane}" if self.lane else ""
        return f"{self.stream} #{self.seq}{lane}"


def parse_comment(comment: str) -> Signed:
    m = _COMMENT.match(comment)
    if m is None:
        return Signed(None)
    return Signed(m["name"], int(m["seq"]), int(m["lane"] or 0))


def stamp(ts_ns: int, digits: int = 6) -> str:
    """A CLOCK_REALTIME stamp as local ``HH:MM:SS.ffffff`` (``digits`` of the second)."""
    s, frac = divmod(int(ts_ns), 1_000_000_000)
    head = time.strftime("%H:%M:%S", time.localtime(s))
    return f"{head}.{frac:09d}"[: 9 + digits] if digits else head


def summary(data: bytes) -> str:
    """The frame in one line, as decoded: ``198.19.0.1:10000 > 198.19.0.2:7 udp``
    (``vlan 35 ...``, ``arp who-has 198.18.0.1 tell 198.18.0.2``, ``icmp6 type 135``)."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    try:
        e = Ether(data)
    except Exception:  # noqa: BLE001 - a frame scapy cannot read is still listed
        return f"{len(data)} bytes, not decodable"
    tags = []
    layer = e.payload
    while isinstance(layer, Dot1Q):
        tags.append(f"vlan {layer.vlan}")
        layer = layer.payload
    pre = " ".join(tags) + " " if tags else ""
    if ARP in e:
        a = e[ARP]
        if a.op == 1:
            return f"{pre}arp who-has {a.pdst} tell {a.psrc}"
        return f"{pre}arp {a.psrc} is-at {a.hwsrc}"
    ip = e[IP] if IP in e else e[IPv6] if IPv6 in e else None
    if ip is None:
        return f"{pre}{e.src} > {e.dst} type 0x{int(e.type):04x}"
    for proto, name in ((UDP, "udp"), (TCP, "tcp")):
        if proto in e:
            l4 = e[proto]
            flags = f" [{l4.sprintf('%TCP.flags%')}]" if proto is TCP else ""
            return f"{pre}{ip.src}:{l4.sport} > {ip.dst}:{l4.dport} {name}{flags}"
    if ICMP in e:
        return f"{pre}{ip.src} > {ip.dst} icmp type {e[ICMP].type}"
    nh = getattr(ip, "nh", None) if IPv6 in e else getattr(ip, "proto", None)
    if IPv6 in e and nh == 58:
        head = bytes(ip.payload)[:1]
        return f"{pre}{ip.src} > {ip.dst} icmp6 type {head[0] if head else '?'}"
    return f"{pre}{ip.src} > {ip.dst} proto {nh}"


def layers(data: bytes) -> str:
    """Every layer and field of the frame: scapy's ``Ether(data).show(dump=True)``."""
    from scapy.layers.l2 import Ether

    try:
        return str(Ether(data).show(dump=True)).rstrip()
    except Exception as e:  # noqa: BLE001 - shown, never raised into the screen
        return f"not decodable: {e}"


def hexdump(data: bytes, per_line: int = 16) -> str:
    """Offset, bytes in hex, and their printable characters, ``per_line`` bytes a line."""
    out = []
    for off in range(0, len(data), per_line):
        chunk = data[off : off + per_line]
        hx = " ".join(f"{b:02x}" for b in chunk).ljust(3 * per_line - 1)
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"{off:04x}  {hx}  {asc}")
    return "\n".join(out)


def filter_problem(text: str, streams: list[str]) -> str | None:
    """What is wrong with a filter as typed (None: it compiles): tgen's selectors
    (``stream NAME``, ``other``, ``arpnd``) or libpcap's message for an expression. The
    engine checks again at the start (engine/capture.py's check_spec)."""
    from tgen_tui.packets.bpf import check_filter

    f = text.strip()
    if f == "other":
        return None
    if f.startswith(SELECTOR_STREAM):
        name = f[len(SELECTOR_STREAM) :].strip()
        if name in streams:
            return None
        return f"no stream {name!r} (streams: {', '.join(streams) or 'none'})"
    return check_filter(f)


def default_file(port: str, now: float | None = None, folder: str = CAPTURE_DIR) -> str:
    """``captures/tgen-p1-20260512-101500.pcapng``: the file a capture of ``port``
    started at ``now`` writes (relative to the current directory)."""
    t = time.localtime(time.time() if now is None else now)
    return str(Path(folder) / f"tgen-{port}-{time.strftime('%Y%m%d-%H%M%S', t)}.pcapng")


__all__ = [
    "CAPTURE_DIR",
    "Signed",
    "default_file",
    "filter_problem",
    "hexdump",
    "layers",
    "parse_comment",
    "stamp",
    "summary",
]
