"""The port's ARP / Neighbour Discovery / echo responder, on the worker's receive side.

A tester port with an L3 identity (profile ``ipv4``/``ipv6``) answers, from user space:

- ARP requests and IPv6 Neighbour Solicitations whose target lies in one of the port's
  address ranges (its own address, its streams' source ranges, the destination ranges of
  the streams expected on it): membership of a range, not a table, so a range of millions
  of addresses costs two integers;
- echo requests (ICMP, ICMPv6) to the port's own address.

A reply carries the request's VLAN tags (a tag the driver stripped into the ring's
metadata comes back in-band, outer first). At start it sends a gratuitous ARP and an
unsolicited NA for the port's own addresses, once per tag stack its streams use.

The kernel owns none of these addresses (the tester interface has no IP), so it answers
neither ARP nor test frames (no ICMP errors towards the DUT).

Cost on the test-frame path: :func:`control_frames` is called per ring block and looks
only at frames without the test signature (one vectorised compare), and of those only at
ARP / IPv4 ICMP / ICMPv6 ethertypes (vectorised); only those are copied to Python.

Imports: the standard library and numpy only.
"""

from __future__ import annotations

import select
import socket
import struct
import time

import numpy as np

from tgen_tui.worker import arpnd as A

MAX_CTL_PER_BLOCK = 256  # control frames copied from one block (a flood cannot stall rx)
MAX_CTL_LEN = 1600


def control_frames(
    u8: np.ndarray, start: np.ndarray, snap: np.ndarray, has_sig: np.ndarray, vlan: np.ndarray
) -> list[tuple[bytes, int]]:
    """(frame bytes, ring vlan meta) of the ARP/ICMP/ICMPv6 frames of a block that carry no
    test signature. ``start``: each frame's Ethernet header position in ``u8``."""
    cand = np.flatnonzero(~has_sig)
    if len(cand) == 0:
        return []
    st = start[cand].astype(np.int64)
    top = len(u8) - 2
    et = (u8[np.clip(st + 12, 0, top)].astype(np.int32) << 8) | u8[np.clip(st + 13, 0, top)]
    off = np.full(len(cand), 14, dtype=np.int64)
    for _ in range(2):
        tag = (et == 0x8100) | (et == 0x88A8) | (et == 0x9100)
        if not tag.any():
            break
        p = np.clip(st + off + 2, 0, top)
        et = np.where(tag, (u8[p].astype(np.int32) << 8) | u8[np.clip(p + 1, 0, top)], et)
        off = off + 4 * tag
    keep = (et == A.ETH_P_ARP) | (et == A.ETH_P_IP) | (et == A.ETH_P_IPV6)
    if et.size and (et == A.ETH_P_IP).any():  # IPv4: only ICMP
        proto = u8[np.clip(st + off + 9, 0, top)]
        keep &= (et != A.ETH_P_IP) | (proto == A.IPPROTO_ICMP)
    if (et == A.ETH_P_IPV6).any():  # IPv6: only ICMPv6 right after the header
        nh = u8[np.clip(st + off + 6, 0, top)]
        keep &= (et != A.ETH_P_IPV6) | (nh == A.IPPROTO_ICMPV6)
    idx = np.flatnonzero(keep)[:MAX_CTL_PER_BLOCK]
    out = []
    for i in idx:  # control frames only (a handful per second)
        s = int(st[i])
        n = min(int(snap[cand[i]]), MAX_CTL_LEN)
        out.append((bytes(u8[s : s + n]), int(vlan[cand[i]])))
    return out


def _ranges(pairs) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([int(a) for a, _ in pairs], dtype=np.uint64)
    hi = np.array([int(b) for _, b in pairs], dtype=np.uint64)
    return lo, hi


SOL_PACKET, PACKET_ADD_MEMBERSHIP, PACKET_MR_ALLMULTI = 263, 1, 2


def receive_all_multicast(sock: socket.socket, interface: str) -> None:
    """Make the ring see every multicast frame: a Neighbour Solicitation goes to the
    solicited-node group (33:33:ff:xx:xx:xx) of the address asked for, which a real NIC's
    filter drops unless the interface is in all-multicast mode (veth delivers all). The
    kernel undoes it when the socket closes."""
    mreq = struct.pack("iHH8s", socket.if_nametoindex(interface), PACKET_MR_ALLMULTI, 0, b"")
    sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)


class Responder:
    """Answers ARP/NS/echo for one port (see the module docstring).

    ``spec``: {"v4": [[lo, hi], ...], "v6": [[lo, hi], ...], "own4": int | None,
    "own6": int | None, "tags": [[[tpid, tci], ...], ...] (the tag stacks to announce on)}.
    """

    def __init__(self, spec: dict, mac: bytes):
        self.mac = mac
        self.v4 = _ranges(spec.get("v4", ()))
        self.v6 = [(int(a), int(b)) for a, b in spec.get("v6", ())]
        own4, own6 = spec.get("own4"), spec.get("own6")
        self.own4 = None if own4 is None else int(own4)
        self.own6 = None if own6 is None else int(own6)
        self.tag_stacks = [
            [(int(t), int(c)) for t, c in stack] for stack in spec.get("tags", [[]])
        ] or [[]]
        self.answered = {"arp": 0, "nd": 0, "echo": 0}

    def has4(self, addr: int) -> bool:
        lo, hi = self.v4
        a = np.uint64(addr)
        return bool(((lo <= a) & (a <= hi)).any())

    def has6(self, addr: int) -> bool:
        return any(lo <= addr <= hi for lo, hi in self.v6)

    def announcements(self) -> list[bytes]:
        """Gratuitous ARP and unsolicited NA for the port's own addresses, per tag stack."""
        out = []
        for tags in self.tag_stacks:
            if self.own4 is not None:
                out.append(
                    A.arp_frame(1, self.mac, self.own4, b"\0" * 6, self.own4, A.BROADCAST, tags)
                )
            if self.own6 is not None:
                out.append(
                    A.na_frame(self.mac, self.own6, A.ALL_NODES6, b"\x33\x33\0\0\0\1", tags, False)
                )
        return out

    def answer(self, frame: bytes, meta_vlan: int) -> bytes | None:
        """The reply to one control frame, or None."""
        if len(frame) < 14:
            return None
        tags, et, l3 = A.split_tags(frame)
        if meta_vlan >= 0:  # the driver stripped the outer tag: it goes back in-band
            tpid = (meta_vlan >> 16) or 0x8100
            tags = [(tpid, meta_vlan & 0xFFFF), *tags]
        if et == A.ETH_P_ARP:
            return self._arp(frame, l3, tags)
        if et == A.ETH_P_IPV6:
            return self._icmp6(frame, l3, tags)
        if et == A.ETH_P_IP and self.own4 is not None and len(frame) >= l3 + 28:
            ihl = (frame[l3] & 15) * 4  # a malformed header length must not end the worker
            if ihl < 20 or len(frame) < l3 + ihl + 8:
                return None
            if frame[l3 + 9] == A.IPPROTO_ICMP and frame[l3 + ihl] == 8:
                if int.from_bytes(frame[l3 + 16 : l3 + 20], "big") == self.own4:
                    reply = A.echo4_reply(frame, l3, self.mac, tags)
                    if reply is not None:
                        self.answered["echo"] += 1
                    return reply
        return None

    def _arp(self, frame: bytes, l3: int, tags: list) -> bytes | None:
        p = A.parse_arp(frame, l3)
        if p is None or p[0] != 1:
            return None
        _op, sha, spa, tpa = p
        if spa == tpa or not self.has4(tpa):  # a gratuitous ARP, or not ours
            return None
        self.answered["arp"] += 1
        return A.arp_frame(2, self.mac, tpa, sha, spa, frame[6:12], tags)

    def _icmp6(self, frame: bytes, l3: int, tags: list) -> bytes | None:
        p = A.parse_icmp6(frame, l3)
        if p is None:
            return None
        kind, src, dst, icmp = p
        if kind == A.ND_NS and len(frame) >= icmp + 24:
            target = int.from_bytes(frame[icmp + 8 : icmp + 24], "big")
            if not self.has6(target):
                return None
            self.answered["nd"] += 1
            dad = src == bytes(16)
            dst_ip = A.ALL_NODES6 if dad else src
            dst_mac = b"\x33\x33\0\0\0\1" if dad else frame[6:12]
            return A.na_frame(self.mac, target, dst_ip, dst_mac, tags, not dad)
        if kind == A.ECHO6_REQ and self.own6 is not None:
            if int.from_bytes(dst, "big") == self.own6:
                self.answered["echo"] += 1
                return A.echo6_reply(frame, l3, self.mac, tags)
        return None


# ---------------------------------------------------------------------- gateway resolution
def port_mac(sock: socket.socket) -> bytes:
    """The MAC of the interface an AF_PACKET socket is bound to."""
    return sock.getsockname()[4][:6]


def resolve(
    interface: str,
    family: int,
    own: int,
    gateway: int,
    tags: list | None = None,
    tries: int = 3,
    timeout_s: float = 1.0,
    quiet: bool = False,
) -> tuple[bytes, bytes | None]:
    """(our MAC, the gateway's MAC or None): ARP (family 4) or NS (6) for ``gateway``
    from ``own``, ``tries`` times, waiting ``timeout_s`` for each answer. Call it inside
    the port's namespace. ``quiet`` (a port that does not respond): ask as a probe from
    the unspecified address (ARP probe, DAD-style NS), so the gateway learns nothing."""
    tags = tags or []
    if quiet:
        own = 0
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    try:
        sock.bind((interface, 0))
        mac = port_mac(sock)
        if family == 4:
            req = A.arp_frame(1, mac, own, b"\0" * 6, gateway, A.BROADCAST, tags)
        else:
            req = A.ns_frame(mac, own, gateway, tags)
        for _ in range(max(1, tries)):
            sock.send(req)
            end = time.monotonic() + timeout_s
            while (left := end - time.monotonic()) > 0:
                r, _, _ = select.select([sock], [], [], left)
                if not r:
                    break
                frame, addr = sock.recvfrom(2048)
                if addr[2] == socket.PACKET_OUTGOING:
                    continue
                got = _reply_from(frame, family, gateway)
                if got is not None:
                    return mac, got
        return mac, None
    finally:
        sock.close()


def _reply_from(frame: bytes, family: int, gateway: int) -> bytes | None:
    if len(frame) < 14:
        return None
    _tags, et, l3 = A.split_tags(frame)
    if family == 4 and et == A.ETH_P_ARP:
        p = A.parse_arp(frame, l3)
        if p is not None and p[0] == 2 and p[2] == gateway:
            return p[1]
    if family == 6 and et == A.ETH_P_IPV6:
        p6 = A.parse_icmp6(frame, l3)
        if p6 is not None and p6[0] == A.ND_NA:
            t = A.na_target(frame, p6[3])
            if t is not None and t[0] == gateway:
                return t[1] if t[1] is not None else frame[6:12]
    return None


# ---------------------------------------------------------------------- the worker's side
def template_tags(template: bytes) -> list[tuple[int, int]]:
    return A.split_tags(template)[0]


def with_macs(progs: list, l3: dict | None) -> list:
    """``progs`` with the port's MAC and its resolved gateway's written into the templates
    of the ``eth_auto`` streams (ValueError naming the stream when a MAC is missing)."""
    import dataclasses

    out = []
    for p in progs:
        if not getattr(p, "eth_auto", False):
            out.append(p)
            continue
        l3 = l3 or {}
        gw = l3.get("gw4") if p.l3 == 4 else l3.get("gw6")
        if not gw or not l3.get("mac"):
            which = "gateway" if p.l3 == 4 else "gateway6"
            raise ValueError(f"stream {p.name}: no resolved {which} MAC for port {p.port}")
        t = A.mac_bytes(gw) + A.mac_bytes(l3["mac"]) + p.template[12:]
        out.append(dataclasses.replace(p, template=t))
    return out


class PortResponder:
    """A port's responder with its own send socket (open it inside the port's namespace)."""

    def __init__(self, interface: str, spec: dict, progs: list):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self.sock.bind((interface, 0))
            mac = port_mac(self.sock)
        except OSError:
            self.sock.close()
            raise
        spec = dict(spec)
        stacks = {tuple(template_tags(p.template)) for p in progs} or {()}
        spec.setdefault("tags", [list(s) for s in sorted(stacks)])
        self.responder = Responder(spec, mac)
        self.sent = 0
        self.errors = 0

    def _send(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
            self.sent += 1
        except OSError:
            self.errors += 1  # a full queue or a down link: the peer asks again

    def announce(self) -> None:
        for f in self.responder.announcements():
            self._send(f)

    def serve(self, ctl: list[tuple[bytes, int]]) -> None:
        for frame, vlan in ctl:
            reply = self.responder.answer(frame, vlan)
            if reply is not None:
                self._send(reply)
        ctl.clear()

    def close(self) -> None:
        self.sock.close()
