"""Helpers for worker tests: veth pairs in fresh namespaces, hand-made frames and programs."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass

from tgen_tui.packets.program import SIG_LEN, SIG_MAGIC


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


@dataclass
class VethPair:
    ns_a: str
    ns_b: str
    if_a: str
    if_b: str

    def rx_packets(self, side: str = "b") -> int:
        ns, ifn = (self.ns_b, self.if_b) if side == "b" else (self.ns_a, self.if_a)
        out = sh("ip", "netns", "exec", ns, "cat", f"/sys/class/net/{ifn}/statistics/rx_packets")
        return int(out.stdout)


def make_pair(prefix: str = "w") -> VethPair:
    tag = prefix + secrets.token_hex(3)
    p = VethPair(f"{tag}a", f"{tag}b", f"{tag}-a", f"{tag}-b")
    try:
        for ns in (p.ns_a, p.ns_b):
            sh("ip", "netns", "add", ns)
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh(
            "ip",
            "link",
            "add",
            p.if_a,
            "netns",
            p.ns_a,
            "type",
            "veth",
            "peer",
            "name",
            p.if_b,
            "netns",
            p.ns_b,
        )
        for ns, ifn, addr in ((p.ns_a, p.if_a, "198.18.0.1/24"), (p.ns_b, p.if_b, "198.18.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", ifn)
            sh("ip", "-n", ns, "link", "set", ifn, "up")
    except Exception:
        destroy_pair(p)
        raise
    return p


def destroy_pair(p: VethPair) -> None:
    for ns in (p.ns_a, p.ns_b):
        sh("ip", "netns", "del", ns, check=False)


def make_frames(
    n: int, stream: int = 0, size: int = 60, start: int = 0, ts: int = 0, vlan: int | None = None
):
    """Hand-made UDP test frames with the signature, as an (n, stride) uint8 array + lengths.

    Ethernet (optionally one 802.1Q tag) / IPv4 198.18.0.1 -> 198.18.0.2 / UDP 49184 -> 7;
    checksums are not fixed up (UDP checksum 0 = none). Vectorised, like the real builder.
    """
    import numpy as np

    stride = (size + 15) & ~15
    buf = np.zeros((n, stride), dtype=np.uint8)
    hdr = bytearray()
    hdr += bytes.fromhex("020000000002") + bytes.fromhex("020000000001")
    if vlan is not None:
        hdr += b"\x81\x00" + vlan.to_bytes(2, "big")
    hdr += b"\x08\x00"
    l3 = len(hdr)
    ip_len = size - l3
    hdr += bytes([0x45, 0]) + ip_len.to_bytes(2, "big") + b"\0\0\x40\0\x40\x11\0\0"
    hdr += bytes([198, 18, 0, 1, 198, 18, 0, 2])
    hdr += (
        (49184).to_bytes(2, "big")
        + (7).to_bytes(2, "big")
        + (ip_len - 20).to_bytes(2, "big")
        + b"\0\0"
    )
    buf[:, : len(hdr)] = np.frombuffer(bytes(hdr), dtype=np.uint8)
    sig = np.zeros(n, dtype=[("magic", "<u2"), ("stream", "<u2"), ("seq", "<u4"), ("ts", "<u4")])
    sig["magic"] = SIG_MAGIC
    sig["stream"] = stream
    sig["seq"] = (np.arange(start, start + n, dtype=np.uint64) & 0xFFFFFFFF).astype(np.uint32)
    sig["ts"] = ts & 0xFFFFFFFF
    buf[:, size - SIG_LEN : size] = sig.view(np.uint8).reshape(n, SIG_LEN)
    lens = np.full(n, size, dtype=np.int64)
    return buf, lens


def make_program(
    index: int = 0, size: int = 60, pps: float = 1000.0, count: int | None = None, **sched
):
    """A hand-made StreamProgram (Ethernet/IPv4/UDP, random ports) for the real BatchBuilder."""
    import numpy as np

    from tgen_tui.packets.program import (
        CSUM_L4,
        FieldOp,
        Schedule,
        SizeProgram,
        StreamProgram,
    )

    eth = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
    ip = bytes([0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2])
    udp = bytes(8)
    tmpl = eth + ip + udp + bytes(size - len(eth) - len(ip) - len(udp))

    def ws(b: bytes) -> int:
        return int(np.frombuffer(b, dtype=">u2").astype(np.uint64).sum())

    return StreamProgram(
        index=index,
        name=f"s{index}",
        port="p0",
        template=tmpl,
        l3=4,
        l3_offset=14,
        l4="udp",
        l4_offset=34,
        l4_csum_offset=40,
        ip_csum_base=ws(ip),
        l4_csum_base=ws(ip[12:20]) + 17,
        l4_pseudo=True,
        sizes=SizeProgram(mode="fixed", min=size, max=size),
        schedule=Schedule(pps=pps, count=count, **sched),
        fields=(
            FieldOp("sport", 34, 2, "random", 1024, 65535, key=11 + index, csum=CSUM_L4),
            FieldOp("dport", 36, 2, "random", 1, 49151, key=12 + index, csum=CSUM_L4),
        ),
        seed=index,
    )
