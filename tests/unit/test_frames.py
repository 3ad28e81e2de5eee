"""Frame contents: IPv6 (UDP, TCP, ICMPv6), QinQ, ICMP, IMIX and variable/odd sizes.

Frames come from ``compile_stream`` + ``BatchBuilder``; they are decoded with scapy and
(in a pcap) with tshark, which also validates every checksum.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

import numpy as np
import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6
from scapy.layers.l2 import Ether

from tgen_tui.diagnostics import BadInput

from .tgen_unit_helpers import (
    assert_tshark_checksums_good,
    build,
    check_signatures,
    frames,
    needs_tshark,
    profile_of,
    program_of,
    protos_of,
    rebuilt_with_fresh_checksums,
    tshark_fields,
    write_frames,
)

ETH = {"src": "02:74:67:00:00:01", "dst": "02:74:67:00:00:fe"}


def decode_all(fl):
    return [Ether(f) for f in fl]


# --------------------------------------------------------------------------- IPv6
V6_UDP = {
    "eth": ETH,
    "ipv6": {
        "src": "2001:db8::10",
        "dst": "2001:db8:1::20",
        "hop_limit": 7,
        "traffic_class": 0xB8,
        "flow_label": 0x12345,
    },
    "udp": {"src_port": 5000, "dst_port": {"min": 6000, "max": 6004, "mode": "inc"}},
    "size": 91,
}
V6_TCP = {
    "ipv6": {"src": "2001:db8::1", "dst": "2001:db8::2", "hop_limit": 200, "traffic_class": 4},
    "tcp": {
        "src_port": {"min": 40000, "max": 40009, "mode": "inc"},
        "dst_port": 443,
        "flags": "PA",
        "seq": 123456789,
        "window": 1000,
    },
    "size": 100,
}
V6_ICMP = {
    "ipv6": {"src": "2001:db8::a", "dst": "2001:db8::b", "hop_limit": 1},
    "icmp": {"id": {"min": 5, "max": 9, "mode": "dec"}},
    "size": 83,
}


def test_ipv6_udp_fields_scapy():
    fl = frames(program_of(V6_UDP), 0, 12)
    for i, p in enumerate(decode_all(fl)):
        assert len(fl[i]) == 87
        assert p[Ether].src == ETH["src"] and p[Ether].dst == ETH["dst"] and p[Ether].type == 0x86DD
        v6 = p[IPv6]
        assert (v6.src, v6.dst) == ("2001:db8::10", "2001:db8:1::20")
        assert (v6.hlim, v6.tc, v6.fl, v6.nh) == (7, 0xB8, 0x12345, 17)
        assert v6.plen == 87 - 14 - 40
        assert (p[UDP].sport, p[UDP].dport) == (5000, 6000 + i % 5)
        assert p[UDP].len == 87 - 54
        assert rebuilt_with_fresh_checksums(fl[i]) == fl[i]
    check_signatures(fl, 0)


def test_ipv6_tcp_fields_scapy():
    fl = frames(program_of(V6_TCP), 0, 12)
    for i, p in enumerate(decode_all(fl)):
        assert (p[IPv6].hlim, p[IPv6].tc, p[IPv6].nh) == (200, 4, 6)
        t = p[TCP]
        assert (t.sport, t.dport) == (40000 + i % 10, 443)
        assert str(t.flags) == "PA"
        assert (t.seq, t.window, t.dataofs) == (123456789, 1000, 5)
        assert rebuilt_with_fresh_checksums(fl[i]) == fl[i]


def test_icmpv6_echo_fields_scapy():
    fl = frames(program_of(V6_ICMP), 0, 12)
    for i, p in enumerate(decode_all(fl)):
        assert p[IPv6].nh == 58 and p[IPv6].hlim == 1
        e = p[ICMPv6EchoRequest]
        assert (e.type, e.code, e.id) == (128, 0, 9 - i % 5)
        assert rebuilt_with_fresh_checksums(fl[i]) == fl[i]
    check_signatures(fl, 0)


@needs_tshark
def test_ipv6_frames_in_tshark(tmp_path):
    fl_udp = frames(program_of(V6_UDP), 0, 10)
    fl_tcp = frames(program_of(V6_TCP), 0, 10)
    fl_icmp = frames(program_of(V6_ICMP), 0, 10)
    fl = fl_udp + fl_tcp + fl_icmp
    pcap = write_frames(tmp_path / "v6.pcap", fl)
    assert_tshark_checksums_good(pcap, [protos_of(f) for f in fl])
    fields = ["ipv6.src", "ipv6.dst", "ipv6.hlim", "ipv6.tclass", "ipv6.flow"]
    fields += ["udp.srcport", "udp.dstport", "tcp.srcport", "tcp.dstport", "tcp.window_size_value"]
    fields += ["icmpv6.type", "icmpv6.echo.identifier"]
    rows = tshark_fields(pcap, fields)
    for i, r in enumerate(rows[:10]):
        assert ipaddress.IPv6Address(r["ipv6.src"]) == ipaddress.IPv6Address("2001:db8::10")
        assert ipaddress.IPv6Address(r["ipv6.dst"]) == ipaddress.IPv6Address("2001:db8:1::20")
        assert int(r["ipv6.hlim"]) == 7
        assert int(r["ipv6.tclass"], 0) == 0xB8
        assert int(r["ipv6.flow"], 0) == 0x12345
        assert (r["udp.srcport"], r["udp.dstport"]) == ("5000", str(6000 + i % 5))
    for i, r in enumerate(rows[10:20]):
        assert int(r["ipv6.hlim"]) == 200 and int(r["ipv6.tclass"], 0) == 4
        assert (r["tcp.srcport"], r["tcp.dstport"]) == (str(40000 + i), "443")
        assert r["tcp.window_size_value"] == "1000"
    for i, r in enumerate(rows[20:]):
        assert r["icmpv6.type"] == "128"
        assert int(r["icmpv6.echo.identifier"], 0) == 9 - i % 5


def test_ipv6_ranges_vary_only_low_64_bits():
    lo_s = ipaddress.IPv6Address("2001:db8:0:5::")
    hi_s = ipaddress.IPv6Address("2001:db8:0:5:ffff:ffff:ffff:fffe")  # full /64: see xfail below
    lo_d = ipaddress.IPv6Address("2001:db8:0:7::fffe")
    hi_d = ipaddress.IPv6Address("2001:db8:0:7::1:3")  # the inc range crosses a 16-bit word
    prog = program_of(
        {
            "ipv6": {
                "src": {"min": str(lo_s), "max": str(hi_s), "mode": "random"},
                "dst": {"min": str(lo_d), "max": str(hi_d), "mode": "inc"},
            },
            "udp": {"src_port": {"min": 1, "max": 65535, "mode": "random"}, "dst_port": 7},
            "size": 79,
        }
    )
    buf, lens = build(prog, 0, 2000)
    src = [int.from_bytes(bytes(row[22:38]), "big") for row in buf]
    dst = [int.from_bytes(bytes(row[38:54]), "big") for row in buf]
    assert all(s >> 64 == int(lo_s) >> 64 for s in src)
    assert all(int(lo_s) <= s <= int(hi_s) for s in src)
    assert len(set(src)) == 2000  # 64 random bits: no repeats expected in 2000 draws
    assert len({s & 0xFFFF_FFFF_0000_0000 for s in src}) > 1000  # high half of the low 64 varies
    span = int(hi_d) - int(lo_d) + 1
    assert dst == [int(lo_d) + i % span for i in range(2000)]
    for i in range(0, 2000, 97):
        f = bytes(buf[i, : lens[i]])
        assert rebuilt_with_fresh_checksums(f) == f, f"frame {i}"


@pytest.mark.parametrize("mode", ["random", "inc", "dec", "unique"])
def test_ipv6_full_64_bit_range_builds(mode):
    prog = program_of(
        {
            "ipv6": {
                "src": {
                    "min": "2001:db8:0:5::",
                    "max": "2001:db8:0:5:ffff:ffff:ffff:ffff",
                    "mode": mode,
                }
            },
            "udp": {},
            "size": 80,
        }
    )
    fl = frames(prog, 0, 100)
    src = [int.from_bytes(f[22:38], "big") for f in fl]
    assert all(s >> 64 == 0x20010DB800000005 for s in src)
    assert len(set(src)) == 100


def test_ipv6_range_across_64_bit_boundary_rejected():
    with pytest.raises(BadInput) as ei:
        profile_of(
            {"ipv6": {"src": {"min": "2001:db8::1", "max": "2001:db8:0:1::1", "mode": "inc"}}}
        )
    (prob,) = ei.value.problems
    assert prob.field == "streams[0].ipv6.src"
    assert "low 64 bits" in prob.message
    assert prob.line >= 1 and prob.col >= 1


# --------------------------------------------------------------------------- VLAN / QinQ
QINQ = {
    "eth": ETH,
    "vlan": [{"id": 100, "pcp": 5, "dei": 1}, {"id": 4094, "pcp": 3, "dei": 0}],
    "ipv4": {"src": "198.18.0.2", "dst": "198.19.0.2", "ttl": 9},
    "udp": {"src_port": {"min": 1024, "max": 65535, "mode": "random"}, "dst_port": 7},
    "size": 66,  # the smallest QinQ IPv4/UDP frame with a signature
}


def tci(pcp: int, dei: int, vid: int) -> bytes:
    return ((pcp << 13) | (dei << 12) | vid).to_bytes(2, "big")


def test_qinq_bytes_and_scapy():
    fl = frames(program_of(QINQ), 0, 20)
    for i, f in enumerate(fl):
        assert len(f) == 62
        assert f[12:14] == b"\x88\xa8" and f[14:16] == tci(5, 1, 100)
        assert f[16:18] == b"\x81\x00" and f[18:20] == tci(3, 0, 4094)
        assert f[20:22] == b"\x08\x00"
        p = Ether(f)
        outer, inner = p.getlayer(1), p.getlayer(2)
        assert (outer.prio, outer.dei, outer.vlan) == (5, 1, 100)
        assert (inner.prio, inner.dei, inner.vlan) == (3, 0, 4094)
        assert p[IP].ttl == 9 and p[IP].len == 62 - 22
        assert rebuilt_with_fresh_checksums(f) == f, f"frame {i}"
    check_signatures(fl, 0)


@pytest.mark.parametrize(
    ("vlan", "tpids"),
    [
        ([{"id": 35}], [0x8100]),
        ([{"id": 35, "tpid": 0x88A8}], [0x88A8]),
        ([{"id": 1, "tpid": 0x9100}, {"id": 2}], [0x9100, 0x8100]),
        ([{"id": 1}, {"id": 2, "tpid": 0x88A8}], [0x88A8, 0x88A8]),
    ],
    ids=["single", "single-88a8", "qinq-9100", "qinq-inner-88a8"],
)
def test_vlan_tpids(vlan, tpids):
    prog = program_of({"vlan": vlan, "ipv6": {}, "tcp": {}, "size": 98})
    (f,) = frames(prog, 0, 1)
    for k, tpid in enumerate(tpids):
        assert int.from_bytes(f[12 + 4 * k : 14 + 4 * k], "big") == tpid
        assert int.from_bytes(f[14 + 4 * k : 16 + 4 * k], "big") & 0xFFF == vlan[k]["id"]
    end = 12 + 4 * len(tpids)
    assert f[end : end + 2] == b"\x86\xdd"
    assert prog.vlan_ids == tuple(v["id"] for v in vlan)
    assert rebuilt_with_fresh_checksums(f) == f


@needs_tshark
def test_qinq_in_tshark(tmp_path):
    fl = frames(program_of(QINQ), 0, 50)
    pcap = write_frames(tmp_path / "qinq.pcap", fl)
    assert_tshark_checksums_good(pcap, [{"ip", "udp"}] * 50)
    fields = ["eth.type", "ieee8021ad.id", "ieee8021ad.priority", "ieee8021ad.dei"]
    fields += ["vlan.id", "vlan.priority", "vlan.dei", "ip.ttl", "udp.dstport"]
    for r in tshark_fields(pcap, fields):
        assert r["ieee8021ad.id"] == "100"
        assert r["ieee8021ad.priority"] == "5"
        assert r["ieee8021ad.dei"] in ("1", "True")
        assert r["vlan.id"] == "4094"
        assert r["vlan.priority"] == "3"
        assert r["vlan.dei"] in ("0", "False")
        assert r["ip.ttl"] == "9" and r["udp.dstport"] == "7"


# --------------------------------------------------------------------------- ICMPv4
def test_icmpv4_echo_fields():
    prog = program_of(
        {
            "ipv4": {"src": {"min": "10.0.0.1", "max": "10.0.0.9", "mode": "random"}},
            "icmp": {"id": {"min": 100, "max": 103, "mode": "inc"}},
            "size": 67,
        }
    )
    fl = frames(prog, 0, 40)
    for i, p in enumerate(decode_all(fl)):
        assert p[IP].proto == 1
        assert (p[ICMP].type, p[ICMP].code, p[ICMP].id) == (8, 0, 100 + i % 4)
        assert rebuilt_with_fresh_checksums(fl[i]) == fl[i], f"frame {i}"


# --------------------------------------------------------------------------- sizes
def test_imix_classic_exact_7_4_1_every_cycle():
    prog = program_of({"size": {"imix": "classic"}}, seed=7)
    _, lens = build(prog, 0, 12 * 200)
    want = Counter({60: 7, 590: 4, 1514: 1})  # without the 4-byte FCS
    for c in range(200):
        assert Counter(lens[12 * c : 12 * c + 12].tolist()) == want, f"cycle {c}"
    # interleaved, not 7 small frames then 4 medium then 1 large
    assert lens[:12].tolist() != sorted(lens[:12].tolist())
    assert prog.sizes.mean + 4 == pytest.approx((7 * 64 + 4 * 594 + 1518) / 12)


def test_imix_frames_are_valid_and_signed():
    prog = program_of({"size": {"imix": "classic"}, "udp": {}}, seed=7)
    fl = frames(prog, 0, 24)
    assert sorted({len(f) for f in fl}) == [60, 590, 1514]
    for i, f in enumerate(fl):
        assert rebuilt_with_fresh_checksums(f) == f, f"frame {i}"
    check_signatures(fl, 0)


def test_imix_custom_weights():
    prog = program_of({"size": {"imix": [{"size": 100, "weight": 3}, {"size": 200, "weight": 2}]}})
    _, lens = build(prog, 0, 50)
    for c in range(10):
        assert Counter(lens[5 * c : 5 * c + 5].tolist()) == Counter({96: 3, 196: 2})


def test_random_size_stays_in_range():
    prog = program_of({"size": {"min": 64, "max": 1518, "mode": "random"}}, seed=2)
    _, lens = build(prog, 0, 20_000)
    assert lens.min() == 60 and lens.max() == 1514  # both ends reached, nothing outside
    assert len(np.unique(lens)) > 1300
    assert (lens % 2 == 1).sum() > 5000  # odd lengths are common


def test_inc_size_with_step():
    prog = program_of({"size": {"min": 64, "max": 80, "mode": "inc", "step": 5}})
    _, lens = build(prog, 0, 10)
    assert (lens + 4).tolist() == [64, 69, 74, 79, 64, 69, 74, 79, 64, 69]


ODD_KINDS = {
    "v4-udp": ({"udp": {}}, 65),
    "v4-tcp": ({"tcp": {"flags": "S"}}, 71),
    "v4-icmp": ({"icmp": {}}, 65),
    "v6-udp": ({"ipv6": {}, "udp": {}}, 85),
    "v6-tcp": ({"ipv6": {}, "tcp": {}}, 91),
    "v6-icmp": ({"ipv6": {}, "icmp": {}}, 85),
    "qinq-v4-udp": ({"vlan": [{"id": 7}, {"id": 8}], "udp": {}}, 67),
    "vlan-v6-tcp": ({"vlan": [{"id": 9, "pcp": 7}], "ipv6": {}, "tcp": {}}, 95),
}


def _odd_size_frames(kind: str) -> list[bytes]:
    hdr, lo = ODD_KINDS[kind]
    st = dict(hdr)
    l4 = next(k for k in ("udp", "tcp", "icmp") if k in st)
    if l4 == "icmp":
        st["icmp"] = {"id": {"min": 0, "max": 65535, "mode": "random"}}
    else:
        st[l4] = dict(
            st[l4],
            src_port={"min": 0, "max": 65535, "mode": "random"},
            dst_port={"min": 1, "max": 65535, "mode": "random"},
        )
    l3 = "ipv6" if "ipv6" in st else "ipv4"
    if l3 == "ipv4":
        st["ipv4"] = {"src": {"min": "1.0.0.0", "max": "223.255.255.255", "mode": "random"}}
    else:
        st["ipv6"] = {"src": {"min": "2001:db8::", "max": "2001:db8::ffff:ffff", "mode": "random"}}
    st["size"] = {"min": lo, "max": lo + 40, "mode": "random"}
    fl = frames(program_of(st, seed=99), 0, 150)
    assert any(len(f) % 2 for f in fl) and any(len(f) % 2 == 0 for f in fl)
    return fl


@pytest.mark.parametrize("kind", list(ODD_KINDS))
def test_odd_sizes_keep_valid_checksums_scapy(kind):
    for i, f in enumerate(_odd_size_frames(kind)):
        assert rebuilt_with_fresh_checksums(f) == f, f"{kind} frame {i} (len {len(f)})"


@needs_tshark
def test_odd_sizes_keep_valid_checksums_tshark(tmp_path):
    fl = [f for kind in ODD_KINDS for f in _odd_size_frames(kind)]
    fl += frames(program_of({"tcp": {}, "size": 1517}), 0, 3)
    fl += frames(program_of({"udp": {}, "size": 9215}), 0, 3)  # jumbo, odd
    pcap = write_frames(tmp_path / "odd.pcap", fl)
    expect = [protos_of(f) for f in fl]
    assert sum("tcp" in e for e in expect) >= 300 and sum("icmpv6" in e for e in expect) >= 150
    assert_tshark_checksums_good(pcap, expect)


def test_fixed_minimum_sizes_accepted_and_one_below_rejected():
    cases = [
        ({"udp": {}}, 64),  # headers + signature + FCS = 58 B, but 64 B is the Ethernet minimum
        ({"tcp": {}}, 70),
        ({"vlan": [{"id": 1}, {"id": 2}], "udp": {}}, 66),
        ({"ipv6": {}, "tcp": {}}, 90),
    ]
    for hdr, need in cases:
        (f,) = frames(program_of(dict(hdr, size=need)), 0, 1)
        assert len(f) == need - 4
        assert rebuilt_with_fresh_checksums(f) == f
        if need > 64:
            with pytest.raises(BadInput) as ei:
                profile_of(dict(hdr, size=need - 1))
            assert ei.value.problems[0].field == "streams[0].size"
            assert f"at least {need} B" in ei.value.problems[0].message
