"""The ARP / ND / echo responder on frames built and decoded with scapy (no root).

Replies are decoded by scapy and compared field by field; checksums are compared with
the ones scapy computes for the same packet.
"""

from __future__ import annotations

import ipaddress

import numpy as np
from scapy.layers.inet import ICMP, IP
from scapy.layers.inet6 import (
    ICMPv6EchoReply,
    ICMPv6EchoRequest,
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6NDOptDstLLAddr,
    ICMPv6NDOptSrcLLAddr,
    IPv6,
)
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.l3 import responder_ranges
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.worker.arpnd import mac_bytes
from tgen_tui.worker.responder import Responder, control_frames, with_macs

MAC = "02:74:67:00:00:01"
DUT = "02:74:67:00:00:fe"


def v4(a: str) -> int:
    return int(ipaddress.IPv4Address(a))


def v6(a: str) -> int:
    return int(ipaddress.IPv6Address(a))


def responder() -> Responder:
    spec = {
        "v4": [[v4("198.18.0.2"), v4("198.18.0.2")], [v4("198.18.1.0"), v4("198.18.255.255")]],
        "v6": [[str(v6("2001:2::2")), str(v6("2001:2::ffff:ffff"))]],
        "own4": v4("198.18.0.2"),
        "own6": str(v6("2001:2::2")),
    }
    return Responder(spec, mac_bytes(MAC))


def arp_req(target: str, sender: str = "198.18.0.1") -> Ether:
    return Ether(src=DUT, dst="ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=DUT, psrc=sender, hwdst="00:00:00:00:00:00", pdst=target
    )


def test_arp_request_in_a_range_gets_a_reply_out_of_range_none():
    r = responder()
    for target in ("198.18.0.2", "198.18.1.0", "198.18.200.17", "198.18.255.255"):
        out = Ether(r.answer(bytes(arp_req(target)), -1))
        assert out.dst == DUT and out.src == MAC
        a = out[ARP]
        assert (a.op, a.hwsrc, a.psrc, a.hwdst, a.pdst) == (2, MAC, target, DUT, "198.18.0.1")
    for target in ("198.18.0.3", "198.18.0.255", "198.19.0.2", "198.18.0.1"):
        assert r.answer(bytes(arp_req(target)), -1) is None
    # a gratuitous ARP of the DUT is not answered
    assert r.answer(bytes(arp_req("198.18.0.1", "198.18.0.1")), -1) is None
    assert r.answered["arp"] == 4


def test_tagged_requests_get_the_same_tags_in_band_and_stripped():
    r = responder()
    req = arp_req("198.18.0.2")
    tagged = Ether(src=DUT, dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=35, prio=3) / req[ARP]
    out = Ether(r.answer(bytes(tagged), -1))
    assert out.type == 0x8100 and out[Dot1Q].vlan == 35 and out[Dot1Q].prio == 3
    assert out[ARP].op == 2
    # the driver stripped the outer tag into the ring's metadata (veth does): it goes back in-band
    untagged = bytes(req)
    out = Ether(r.answer(untagged, (0x8100 << 16) | 76))
    assert out.type == 0x8100 and out[Dot1Q].vlan == 76 and out[ARP].psrc == "198.18.0.2"
    # QinQ: outer S-tag stripped (tpid 0x88a8 in the metadata), inner C-tag in band
    inner = Ether(src=DUT, dst="ff:ff:ff:ff:ff:ff", type=0x8100) / Dot1Q(vlan=20) / req[ARP]
    out = Ether(r.answer(bytes(inner), (0x88A8 << 16) | 100))
    assert out.type == 0x88A8 and out[Dot1AD].vlan == 100 and out[Dot1Q].vlan == 20
    assert out[ARP].op == 2


def test_neighbour_solicitation_gets_an_advertisement_with_a_valid_checksum():
    r = responder()
    target = "2001:2::abcd"
    ns = (
        Ether(src=DUT, dst="33:33:ff:00:ab:cd")
        / IPv6(src="2001:2::1", dst="ff02::1:ff00:abcd", hlim=255)
        / ICMPv6ND_NS(tgt=target)
        / ICMPv6NDOptSrcLLAddr(lladdr=DUT)
    )
    out = Ether(r.answer(bytes(ns), -1))
    assert out.dst == DUT and out.src == MAC
    ip = out[IPv6]
    assert (ip.src, ip.dst, ip.hlim) == (target, "2001:2::1", 255)
    na = out[ICMPv6ND_NA]
    assert (na.tgt, na.S, na.O, na.R) == (target, 1, 1, 0)
    assert out[ICMPv6NDOptDstLLAddr].lladdr == MAC
    got = na.cksum
    del na.cksum
    assert Ether(bytes(out))[ICMPv6ND_NA].cksum == got  # scapy recomputes the same
    rebuilt = IPv6(bytes(ip))
    del rebuilt[ICMPv6ND_NA].cksum
    assert IPv6(bytes(rebuilt))[ICMPv6ND_NA].cksum == got
    ns[ICMPv6ND_NS].tgt = "2001:2:0:1::2"  # not ours (another /64)
    assert r.answer(bytes(ns), -1) is None


def test_echo_requests_to_the_port_address_are_answered():
    r = responder()
    req = (
        Ether(src=DUT, dst=MAC)
        / IP(src="198.18.0.1", dst="198.18.0.2", ttl=9)
        / ICMP(type=8, id=7, seq=3)
        / Raw(b"x" * 40)
    )
    out = Ether(r.answer(bytes(req), -1))
    ip, ic = out[IP], out[ICMP]
    assert (ip.src, ip.dst, ic.type, ic.id, ic.seq, bytes(ic.payload)) == (
        "198.18.0.2",
        "198.18.0.1",
        0,
        7,
        3,
        b"x" * 40,
    )
    c_ip, c_ic = ip.chksum, ic.chksum
    del ip.chksum, ic.chksum
    again = Ether(bytes(out))
    assert (again[IP].chksum, again[ICMP].chksum) == (c_ip, c_ic)
    req[IP].dst = "198.18.1.5"  # in a range but not the port's own address: no echo
    assert r.answer(bytes(req), -1) is None
    req6 = (
        Ether(src=DUT, dst=MAC)
        / IPv6(src="2001:2::1", dst="2001:2::2")
        / ICMPv6EchoRequest(id=5, seq=1, data=b"abc")
    )
    out = Ether(r.answer(bytes(req6), -1))
    rep = out[ICMPv6EchoReply]
    assert (out[IPv6].src, out[IPv6].dst, rep.id, rep.seq, rep.data) == (
        "2001:2::2",
        "2001:2::1",
        5,
        1,
        b"abc",
    )
    c = rep.cksum
    del rep.cksum
    assert Ether(bytes(out))[ICMPv6EchoReply].cksum == c


def test_a_malformed_ipv4_header_gets_no_answer_and_no_exception():
    r = responder()
    req = Ether(src=DUT, dst=MAC) / IP(src="198.18.0.1", dst="198.18.0.2") / ICMP(type=8)
    raw = bytearray(bytes(req).ljust(60, b"\0"))
    raw[14] = 0x4F  # IHL 15: a 60-byte header that the 60-byte frame cannot hold
    assert r.answer(bytes(raw), -1) is None
    raw[14] = 0x44  # IHL 4: shorter than an IPv4 header
    assert r.answer(bytes(raw), -1) is None
    assert r.answered["echo"] == 0


def test_announcements_per_tag_stack():
    spec = {"own4": v4("198.18.0.2"), "own6": str(v6("2001:2::2")), "tags": [[], [[0x8100, 35]]]}
    frames = [Ether(f) for f in Responder(spec, mac_bytes(MAC)).announcements()]
    assert len(frames) == 4
    garp = frames[0][ARP]
    assert (garp.op, garp.psrc, garp.pdst, frames[0].dst) == (
        1,
        "198.18.0.2",
        "198.18.0.2",
        "ff:ff:ff:ff:ff:ff",
    )
    na = frames[1][ICMPv6ND_NA]
    assert (na.tgt, na.S, na.O, frames[1][IPv6].dst) == ("2001:2::2", 0, 1, "ff02::1")
    assert frames[2][Dot1Q].vlan == 35 and frames[3][Dot1Q].vlan == 35


def test_control_frames_takes_only_unsigned_arp_icmp_from_a_block():
    frames = [
        bytes(arp_req("198.18.0.2")),
        bytes(Ether() / IP(proto=17) / Raw(b"\0" * 30)),  # UDP: never a control frame
        bytes(Ether() / Dot1Q(vlan=4) / IP() / ICMP()),
        bytes(Ether() / IPv6() / ICMPv6ND_NS(tgt="2001:2::2")),
        bytes(arp_req("198.18.0.9")),  # a signed frame (has_sig) is skipped whatever it is
    ]
    buf = b"".join(f.ljust(128, b"\0") for f in frames)
    u8 = np.frombuffer(buf, dtype=np.uint8)
    start = np.arange(len(frames), dtype=np.int64) * 128
    snap = np.array([len(f) for f in frames], dtype=np.uint32)
    has_sig = np.array([False, False, False, False, True])
    vlan = np.full(len(frames), -1, dtype=np.int64)
    got = control_frames(u8, start, snap, has_sig, vlan)
    assert [g[0] for g in got] == [frames[0], frames[2], frames[3]]


def test_responder_ranges_and_auto_macs_from_a_profile():
    text = """
name: l3
ports:
  p0: {interface: p0, ipv4: 198.18.0.2/24, gateway: 198.18.0.1, ipv6: "2001:2::2/64", gateway6: "2001:2::1"}
  p1: {interface: p1, ipv4: 198.19.0.2/24, respond: false}
streams:
  - {name: a, port: p0, rx_port: p1, ipv4: {src: {min: 198.18.0.10, max: 198.18.1.3}, dst: 198.19.0.2}}
  - {name: b, port: p1, rx_port: p0, ipv4: {src: 198.19.0.2, dst: {min: 198.18.1.4, max: 198.18.1.9}}}
  - {name: c, port: p0, ipv6: {src: "2001:2::2", dst: "2001:2:0:1::2"}, size: 78}
  - {name: d, port: p0, eth: {src: "02:00:00:00:00:09", dst: "02:00:00:00:00:0a"}}
"""
    prof = load_profile_text(text, "l3.yaml")
    v4r, v6r = responder_ranges(prof, "p0")
    assert v4r == ((v4("198.18.0.2"), v4("198.18.0.2")), (v4("198.18.0.10"), v4("198.18.1.9")))
    assert v6r == ((v6("2001:2::2"), v6("2001:2::2")),)
    assert responder_ranges(prof, "p1") == ((), ())  # respond: false
    c = compile_profile(prof)
    auto = {p.name: p.eth_auto for p in c.streams}
    assert auto == {"a": True, "b": False, "c": True, "d": False}
    l3 = {"mac": MAC, "gw4": DUT, "gw6": "02:74:67:00:00:fd"}
    out = {p.name: p for p in with_macs(c.streams, l3)}
    assert Ether(out["a"].template).dst == DUT and Ether(out["a"].template).src == MAC
    assert Ether(out["c"].template).dst == "02:74:67:00:00:fd"
    assert out["d"].template == c.streams[3].template
    assert Ether(out["b"].template).dst == "02:00:00:00:00:02"  # no gateway: eth defaults


def test_a_gateway_needs_the_port_address_in_its_network():
    import pytest

    from tgen_tui.diagnostics import BadInput

    for extra, msg in (
        ("gateway: 198.18.0.1", "gateway 198.18.0.1 needs the port's own address: give ipv4"),
        (
            "ipv4: 198.18.0.2/24, gateway: 198.19.0.1",
            "gateway 198.19.0.1 must be another address in the port's network 198.18.0.0/24",
        ),
        ("ipv6: '2001:2::2/64', gateway6: '2001:2::2'", "gateway6 2001:2::2 must be another"),
    ):
        text = f"ports:\n  p0: {{interface: p0, {extra}}}\nstreams:\n  - {{name: a, port: p0}}\n"
        with pytest.raises(BadInput) as e:
            load_profile_text(text, "x.yaml")
        (p,) = e.value.problems
        assert (p.line, p.field) == (2, "ports.p0") and p.message.startswith(msg)
