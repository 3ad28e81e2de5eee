"""Helpers for the replay tests: a scapy-made capture of a small mix, and checksum checks.

Not a test module; imported by tests/unit/test_replay.py and tests/integration/test_replay_lab.py.
"""

from __future__ import annotations

from pathlib import Path

#: the flows of :func:`make_mix` (conntrack entries one loop creates): DNS, HTTP, ICMP
#: echo, the fragmented UDP datagram, the VLAN-tagged UDP frame
MIX_FLOWS = 5
MIX_FRAMES = 8


def mix_packets(t0: float = 1000.0, gap: float = 0.001, syn: bool = True) -> list:
    """DNS over UDP, HTTP over TCP (SYN, then a GET), an ICMP echo, a 3,000-byte UDP
    datagram in three fragments and a VLAN-tagged UDP frame; 10.0.0.0/8 addresses,
    client to server only; recorded ``gap`` s apart. ``syn=False``: the GET alone (a
    stateful DUT picks the connection up mid-stream; after a SYN that was never
    answered, conntrack finds the GET invalid and a NAT forwards it untranslated)."""
    from scapy.layers.dns import DNS, DNSQR
    from scapy.layers.inet import ICMP, IP, TCP, UDP, fragment
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    e = Ether(src="00:11:22:33:44:55", dst="66:77:88:99:aa:bb")
    get = b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: tgen\r\n\r\n"
    pk = [
        e
        / IP(src="10.0.0.1", dst="10.1.0.53")
        / UDP(sport=33000, dport=53)
        / DNS(rd=1, qd=DNSQR(qname="example.com")),
        e / IP(src="10.0.0.2", dst="10.1.0.80") / TCP(sport=40000, dport=80, flags="S", seq=1000),
        e
        / IP(src="10.0.0.2", dst="10.1.0.80")
        / TCP(sport=40000, dport=80, flags="PA", seq=1001, ack=5)
        / Raw(get),
        e / IP(src="10.0.0.3", dst="10.1.0.1") / ICMP(id=77, seq=1) / Raw(b"p" * 56),
    ]
    big = IP(src="10.0.0.4", dst="10.1.0.9", id=4242) / UDP(sport=5000, dport=9) / Raw(b"F" * 3000)
    pk += [e / f for f in fragment(big, fragsize=1400)]
    pk.append(e / Dot1Q(vlan=35) / IP(src="10.0.0.5", dst="10.1.0.7") / UDP(sport=6000, dport=7)
              / Raw(b"v" * 40))  # fmt: skip
    if not syn:
        del pk[1]
    for i, p in enumerate(pk):
        p.time = t0 + i * gap
    assert len(pk) == MIX_FRAMES - (not syn)
    return pk


def make_mix(path: Path, pcapng: bool = False, **kw) -> Path:
    """Write :func:`mix_packets` to ``path`` (pcap, or pcapng)."""
    from scapy.utils import PcapNgWriter, wrpcap

    pk = mix_packets(**kw)
    if pcapng:
        w = PcapNgWriter(str(path))
        for p in pk:
            w.write(p)
        w.close()
    else:
        wrpcap(str(path), pk)
    return path


def checksums_valid(frames: list[bytes]) -> list[str]:
    """Problems found by scapy (an empty list: every IPv4 header, UDP, TCP, ICMP and ICMPv6
    checksum is right; fragments: the IP header each, the UDP checksum after reassembly)."""
    from scapy.layers.inet import IP, UDP, defragment
    from scapy.layers.l2 import Ether

    from .tgen_unit_helpers import rebuilt_with_fresh_checksums

    bad, frags = [], []
    for i, raw in enumerate(frames):
        pkt = Ether(raw)
        if IP in pkt and (pkt[IP].flags.MF or pkt[IP].frag):
            q = pkt[IP].copy()
            del q.chksum
            if IP(bytes(q)).chksum != pkt[IP].chksum:
                bad.append(f"frame {i}: IPv4 header checksum")
            frags.append(pkt[IP])
            continue
        if rebuilt_with_fresh_checksums(raw) != raw:
            bad.append(f"frame {i}: {pkt.summary()}")
    for whole in defragment(frags) if frags else []:
        if UDP in whole and not whole[IP].flags.MF and not whole[IP].frag:
            u = whole[UDP]
            c = u.chksum
            del u.chksum
            if IP(bytes(whole))[UDP].chksum != c:
                bad.append(f"reassembled {whole.summary()}: UDP checksum")
    return bad
