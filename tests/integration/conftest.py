"""Fixtures for the root-only integration tests: unique lab prefixes that are always torn
down, and a tiny AF_PACKET frame sender/receiver that works inside a namespace.

Sockets are opened by a short-lived thread that joins the namespace with ``setns`` (the
same trick :mod:`tgen_tui.lab.commands` uses), so no extra process is needed and the
caller's own namespace never changes.
"""

from __future__ import annotations

import secrets
import socket
import struct
import time

import pytest

ETH_P_ALL = 0x0003
SO_RCVBUFFORCE = 33
MAGIC = b"TGENLAB!"
PACKET_OUTGOING = 4


@pytest.fixture
def lab_prefix():
    """A unique prefix (``t`` + 5 hex chars); the lab is taken down afterwards, even on failure."""
    from tgen_tui.lab import topology

    prefix = "t" + secrets.token_hex(3)[:5]
    try:
        yield prefix
    finally:
        topology.down(prefix)


def ip_checksum(header: bytes) -> int:
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def udp_frame(
    src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, sport: int, dport: int, seq: int
) -> bytes:
    """A 60-byte Ethernet/IPv4/UDP frame carrying MAGIC and a sequence number."""
    payload = MAGIC + struct.pack("!I", seq)
    payload += bytes(60 - 14 - 20 - 8 - len(payload))
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # checksum 0: none
    hdr = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(udp),
        seq & 0xFFFF,
        0,
        64,
        17,
        0,
        socket.inet_aton(src_ip),
        socket.inet_aton(dst_ip),
    )
    hdr = hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + b"\x08\x00" + hdr + udp


def parse_udp(frame: bytes) -> dict | None:
    """Decode a frame built by :func:`udp_frame` (after NAT); None if it is something else."""
    if len(frame) < 14 + 20 + 8 + len(MAGIC) or frame[12:14] != b"\x08\x00":
        return None
    ihl = (frame[14] & 0x0F) * 4
    if frame[14 + 9] != 17:
        return None
    ip = frame[14 : 14 + ihl]
    udp = frame[14 + ihl :]
    if udp[8 : 8 + len(MAGIC)] != MAGIC:
        return None
    sport, dport = struct.unpack("!HH", udp[:4])
    return {
        "dst_mac": frame[0:6].hex(":"),
        "src_mac": frame[6:12].hex(":"),
        "src": socket.inet_ntoa(ip[12:16]),
        "dst": socket.inet_ntoa(ip[16:20]),
        "ttl": ip[8],
        "ip_ok": ip_checksum(ip) == 0,
        "sport": sport,
        "dport": dport,
        "seq": struct.unpack("!I", udp[8 + len(MAGIC) : 12 + len(MAGIC)])[0],
    }


def packet_socket(netns: str, ifname: str, *, rcvbuf: int = 0) -> socket.socket:
    """An AF_PACKET socket bound to ``ifname`` in ``netns`` (opened via setns in a thread)."""
    from tgen_tui.lab.commands import in_netns

    def make() -> socket.socket:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        s.bind((ifname, ETH_P_ALL))
        return s

    return in_netns(netns, make)


def drain(
    sock: socket.socket, idle: float = 0.3, limit: float = 10.0, others: list | None = None
) -> list[dict]:
    """Read test frames until ``idle`` seconds pass without one (incoming frames only).

    Incoming frames that are not test frames are appended to ``others`` when given.
    """
    sock.settimeout(idle)
    got = []
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            data, addr = sock.recvfrom(2048)
        except TimeoutError:
            break
        if addr[2] == PACKET_OUTGOING:
            continue
        p = parse_udp(data)
        if p is not None:
            got.append(p)
        elif others is not None:
            others.append(data)
    return got


def send_frames(sock: socket.socket, frames: list[bytes]) -> int:
    send = sock.send
    for f in frames:
        send(f)
    return len(frames)


class PacketIO:
    """The helpers above, handed to tests as a fixture."""

    udp_frame = staticmethod(udp_frame)
    parse_udp = staticmethod(parse_udp)
    packet_socket = staticmethod(packet_socket)
    drain = staticmethod(drain)
    send_frames = staticmethod(send_frames)


@pytest.fixture
def pio() -> PacketIO:
    return PacketIO()
