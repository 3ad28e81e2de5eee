"""ARP, IPv6 Neighbour Discovery and echo frames: parse a request, build the answer.

Plain bytes and ``struct``; the standard library only. These run on control frames (a
handful per second), never on test frames: the receive path hands over only frames
without a test signature whose ethertype says ARP, ICMP or ICMPv6 (worker/responder.py).

A frame here is the Ethernet frame as the ring captured it. VLAN tags may be in the
packet (``in-band``), or the outer one may have been moved into the ring's metadata by
the driver (veth does this); :func:`split_tags` returns the in-band ones and the caller
prepends a stripped one, so a reply carries the same tags as the request.
"""

from __future__ import annotations

import struct

ETH_P_ARP = 0x0806
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
TAG_TPIDS = (0x8100, 0x88A8, 0x9100)
BROADCAST = b"\xff" * 6
IPPROTO_ICMP = 1
IPPROTO_ICMPV6 = 58
ND_NS, ND_NA = 135, 136
ECHO6_REQ, ECHO6_REP = 128, 129
ALL_NODES6 = bytes.fromhex("ff020000000000000000000000000001")


def mac_bytes(mac: str) -> bytes:
    return bytes(int(x, 16) for x in mac.replace("-", ":").split(":"))


def mac_str(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def split_tags(frame: bytes) -> tuple[list[tuple[int, int]], int, int]:
    """(in-band tags as (tpid, tci), ethertype, offset of the L3 header)."""
    tags = []
    off = 12
    et = int.from_bytes(frame[off : off + 2], "big")
    while et in TAG_TPIDS and len(tags) < 2 and len(frame) >= off + 6:
        tags.append((et, int.from_bytes(frame[off + 2 : off + 4], "big")))
        off += 4
        et = int.from_bytes(frame[off : off + 2], "big")
    return tags, et, off + 2


def eth_header(dst: bytes, src: bytes, tags: list[tuple[int, int]], ethertype: int) -> bytes:
    out = dst + src
    for tpid, tci in tags:
        out += struct.pack("!HH", tpid, tci)
    return out + struct.pack("!H", ethertype)


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _icmp6_csum(src: bytes, dst: bytes, body: bytes) -> int:
    pseudo = src + dst + struct.pack("!IxxxB", len(body), IPPROTO_ICMPV6)
    return csum(pseudo + body)


# ---------------------------------------------------------------------- ARP
def arp_frame(op: int, sha: bytes, spa: int, tha: bytes, tpa: int, dst: bytes, tags: list) -> bytes:
    body = struct.pack(
        "!HHBBH6s4s6s4s",
        1,
        ETH_P_IP,
        6,
        4,
        op,
        sha,
        spa.to_bytes(4, "big"),
        tha,
        tpa.to_bytes(4, "big"),
    )
    frame = eth_header(dst, sha, tags, ETH_P_ARP) + body
    return frame + b"\0" * max(0, 60 - len(frame))


def parse_arp(frame: bytes, l3: int) -> tuple[int, bytes, int, int] | None:
    """(op, sender MAC, sender IPv4, target IPv4) of an Ethernet/IPv4 ARP packet."""
    if len(frame) < l3 + 28:
        return None
    ht, pt, hl, pl, op, sha, spa, _tha, tpa = struct.unpack_from("!HHBBH6s4s6s4s", frame, l3)
    if ht != 1 or pt != ETH_P_IP or hl != 6 or pl != 4:
        return None
    return op, sha, int.from_bytes(spa, "big"), int.from_bytes(tpa, "big")


# ---------------------------------------------------------------------- IPv6 ND
def ipv6_header(src: bytes, dst: bytes, plen: int, hlim: int = 255) -> bytes:
    return struct.pack("!IHBB", 6 << 28, plen, IPPROTO_ICMPV6, hlim) + src + dst


def solicited_node(addr: int) -> bytes:
    return bytes.fromhex("ff0200000000000000000001ff") + (addr & 0xFFFFFF).to_bytes(3, "big")


def ns_frame(mac: bytes, src: int, target: int, tags: list) -> bytes:
    """A Neighbour Solicitation for ``target`` from ``src`` (with our link-layer address;
    from the unspecified address ``src`` 0, a DAD-style probe, without it)."""
    s, d = src.to_bytes(16, "big"), solicited_node(target)
    body = struct.pack("!BBHI", ND_NS, 0, 0, 0) + target.to_bytes(16, "big")
    if src:
        body += struct.pack("!BB", 1, 1) + mac
    body = body[:2] + struct.pack("!H", _icmp6_csum(s, d, body)) + body[4:]
    dmac = b"\x33\x33" + d[12:]
    return eth_header(dmac, mac, tags, ETH_P_IPV6) + ipv6_header(s, d, len(body)) + body


def na_frame(
    mac: bytes, target: int, dst_ip: bytes, dst_mac: bytes, tags: list, solicited: bool
) -> bytes:
    """A Neighbour Advertisement of ``target`` at ``mac`` (override; solicited or not)."""
    t = target.to_bytes(16, "big")
    flags = (0x40000000 if solicited else 0) | 0x20000000
    body = struct.pack("!BBHI", ND_NA, 0, 0, flags) + t + struct.pack("!BB", 2, 1) + mac
    body = body[:2] + struct.pack("!H", _icmp6_csum(t, dst_ip, body)) + body[4:]
    return eth_header(dst_mac, mac, tags, ETH_P_IPV6) + ipv6_header(t, dst_ip, len(body)) + body


def parse_icmp6(frame: bytes, l3: int) -> tuple[int, bytes, bytes, int] | None:
    """(ICMPv6 type, IPv6 source, IPv6 destination, offset of the ICMPv6 header)."""
    if len(frame) < l3 + 44 or frame[l3] >> 4 != 6 or frame[l3 + 6] != IPPROTO_ICMPV6:
        return None
    return frame[l3 + 40], frame[l3 + 8 : l3 + 24], frame[l3 + 24 : l3 + 40], l3 + 40


def na_target(frame: bytes, icmp: int) -> tuple[int, bytes | None] | None:
    """(target, target link-layer address option or None) of an NA."""
    if len(frame) < icmp + 24:
        return None
    target = int.from_bytes(frame[icmp + 8 : icmp + 24], "big")
    pos = icmp + 24
    while pos + 8 <= len(frame):
        kind, ln = frame[pos], frame[pos + 1]
        if ln == 0:
            break
        if kind == 2:
            return target, frame[pos + 2 : pos + 8]
        pos += 8 * ln
    return target, None


# ---------------------------------------------------------------------- echo
def echo4_reply(frame: bytes, l3: int, mac: bytes, tags: list) -> bytes | None:
    """The echo reply to an IPv4 echo request frame (addresses swapped, TTL 64)."""
    ihl = (frame[l3] & 15) * 4
    tot = int.from_bytes(frame[l3 + 2 : l3 + 4], "big")
    if len(frame) < l3 + tot or tot < ihl + 8:
        return None
    ip = bytearray(frame[l3 : l3 + ihl])
    ip[12:16], ip[16:20] = frame[l3 + 16 : l3 + 20], frame[l3 + 12 : l3 + 16]
    ip[8] = 64
    ip[10:12] = b"\0\0"
    ip[10:12] = csum(bytes(ip)).to_bytes(2, "big")
    icmp = bytearray(frame[l3 + ihl : l3 + tot])
    icmp[0] = 0
    icmp[2:4] = b"\0\0"
    icmp[2:4] = csum(bytes(icmp)).to_bytes(2, "big")
    return eth_header(frame[6:12], mac, tags, ETH_P_IP) + bytes(ip) + bytes(icmp)


def echo6_reply(frame: bytes, l3: int, mac: bytes, tags: list) -> bytes | None:
    plen = int.from_bytes(frame[l3 + 4 : l3 + 6], "big")
    if len(frame) < l3 + 40 + plen or plen < 8:
        return None
    src, dst = frame[l3 + 24 : l3 + 40], frame[l3 + 8 : l3 + 24]
    body = bytearray(frame[l3 + 40 : l3 + 40 + plen])
    body[0] = ECHO6_REP
    body[2:4] = b"\0\0"
    body[2:4] = _icmp6_csum(src, dst, bytes(body)).to_bytes(2, "big")
    hdr = ipv6_header(src, dst, plen, 64)
    return eth_header(frame[6:12], mac, tags, ETH_P_IPV6) + hdr + bytes(body)
