"""The RFC 9693 Responder's learned tuples: header gather, learner, and table field mode.

- :func:`tgen_tui.worker.rxring.parse_l3l4` on frames scapy built, laid out in a buffer
  as a receive block would hold them (802.1Q, QinQ, IPv4 options, TCP, fragments, ...);
- :class:`tgen_tui.worker.learn.Learner`: deduplication across merges, arrival order, the
  cap at M, only signature frames of the learned streams, the atomic table file;
- the ``table`` field mode: a reply stream's addresses and ports come from the table in
  all four orders, and scapy finds valid IPv4 and UDP/TCP checksums in every frame.
"""

from __future__ import annotations

import ipaddress
import os

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether

from tgen_tui.packets.batch import BatchBuilder, read_learned_table, table_rows
from tgen_tui.packets.compile import REPLY_COLUMNS, with_learned_table
from tgen_tui.packets.program import SIG_MAGIC, TABLE
from tgen_tui.worker.learn import Learner
from tgen_tui.worker.rxring import RxBatch, parse_l3l4

from .tgen_unit_helpers import frames, program_of, rebuilt_with_fresh_checksums

E = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def ip(a: str) -> int:
    return int(ipaddress.ip_address(a))


def block_of(pkts, gap: int = 24) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The frames' bytes in one buffer at irregular offsets, as a ring block holds them."""
    raw = [bytes(p) for p in pkts]
    buf = np.full(sum(len(r) + gap for r in raw) + 64, 0xEE, dtype=np.uint8)
    starts, off = [], 10
    for r in raw:
        buf[off : off + len(r)] = np.frombuffer(r, dtype=np.uint8)
        starts.append(off)
        off += len(r) + gap
    return buf, np.array(starts, dtype=np.int64), np.array([len(r) for r in raw], np.uint32)


# ---------------------------------------------------------------------------- header gather


def test_parse_l3l4_reads_ipv4_udp_tcp_through_tags_and_options():
    pkts = [
        E / IP(src="198.18.0.1", dst="198.19.0.2") / UDP(sport=1000, dport=7) / (b"x" * 20),
        E / Dot1Q(vlan=5) / IP(src="198.18.0.3", dst="198.19.0.2") / TCP(sport=1001, dport=8),
        E
        / Dot1AD(vlan=6)
        / Dot1Q(vlan=7)
        / IP(src="198.18.0.4", dst="198.19.0.5")
        / UDP(sport=1002, dport=9),
        E / IP(src="198.18.0.6", dst="198.19.0.7", options=[IPOption_NOP()] * 8) / UDP(sport=1003, dport=10),
        E / Dot1Q(vlan=9) / IP(src="198.18.0.8", dst="198.19.0.9", ihl=15, options=[IPOption_NOP()] * 40) / TCP(sport=65535, dport=1),
    ]  # fmt: skip
    assert bytes(pkts[3])[14] == 0x47 and bytes(pkts[4])[18] == 0x4F  # IHL 7 and 15 (60 B)
    buf, starts, snaps = block_of(pkts)
    hdr, ok = parse_l3l4(buf, starts, snaps)
    assert ok.all()
    for row, p in zip(hdr, pkts, strict=True):
        l4 = p[UDP] if UDP in p else p[TCP]
        assert list(row) == [ip(p[IP].src), ip(p[IP].dst), l4.sport, l4.dport]


def test_parse_l3l4_flags_what_has_no_ipv4_l4_tuple():
    pkts = [
        E / IP(src="198.18.0.7", dst="198.19.0.2", frag=3) / UDP(sport=1, dport=2),  # later frag
        E / ARP(),
        E / IPv6() / UDP(),
        E / IP(src="198.18.0.1", dst="198.19.0.2") / UDP(sport=5, dport=6),  # truncated below
        E / IP(src="198.18.0.1", dst="198.19.0.2", proto=1) / (b"\0" * 8),  # ICMP
        E / Dot1Q(vlan=3) / IP(src="198.18.0.9", dst="198.19.0.2") / UDP(sport=11, dport=12),
    ]
    buf, starts, snaps = block_of(pkts)
    snaps[3] = 14 + 20 + 3  # the capture ends inside the ports
    hdr, ok = parse_l3l4(buf, starts, snaps)
    assert ok.tolist() == [False, False, False, False, False, True]
    assert hdr[5].tolist() == [ip("198.18.0.9"), ip("198.19.0.2"), 11, 12]
    # a frame at the very end of the buffer never reads past it
    hdr, ok = parse_l3l4(buf[: starts[5] + 20], starts[5:], snaps[5:])
    assert ok.tolist() == [False]
    assert parse_l3l4(buf, starts[:0], snaps[:0])[0].shape == (0, 4)


# ---------------------------------------------------------------------------- learner


def batch_of(tuples, stream, magic=SIG_MAGIC, ok=None) -> RxBatch:
    t = np.asarray(tuples, dtype=np.uint32).reshape(-1, 4)
    n = len(t)
    u32 = np.zeros(n, np.uint32)
    b = RxBatch(
        length=u32,
        snaplen=u32,
        magic=np.full(n, magic, np.uint16),
        stream=np.asarray(np.broadcast_to(stream, n), np.uint16),
        seq=u32,
        ts=u32,
        rx_ns=np.zeros(n, np.int64),
        vlan=np.full(n, -1, np.int64),
    )
    b.hdr = t
    b.hdr_ok = np.ones(n, bool) if ok is None else np.asarray(ok)
    return b


def tup(i: int) -> list[int]:
    return [ip("198.19.0.1"), ip("198.19.0.2"), 1024 + i, 80 + i % 7]


def test_learner_dedups_keeps_arrival_order_in_a_ring_of_m(tmp_path):
    path = str(tmp_path / "t.npy")
    lr = Learner(path, streams=[3], max_rows=6, merge_ns=100)
    lr.add(batch_of([tup(5), tup(1), tup(5), tup(2)], 3), now_ns=100)  # merged: 5, 1, 2
    assert lr.learned == 3 and lr.merges == 1
    lr.add(batch_of([tup(1), tup(9)], 3), now_ns=150)  # not merged yet (50 ns later)
    assert lr.learned == 3 and lr.merges == 1
    lr.add(batch_of([tup(7)], 4), now_ns=160)  # another stream: not learned
    lr.add(batch_of([tup(8)], 3, magic=0), now_ns=170)  # no signature: not learned
    lr.add(batch_of([tup(4), tup(6)], 3, ok=[False, True]), now_ns=180)  # 4 unparsed
    lr.add(batch_of([tup(2), tup(3), tup(0), tup(11), tup(12)], 3), now_ns=300)
    # merged: 9, 6, 3, 0, 11, 12: nine distinct tuples in a ring of 6 keep the latest 6
    s = lr.write()
    assert s["tuples"] == 6 and s["full"] and s["overflow"] == 3 and s["unparsed"] == 1
    assert s["frames"] == 4 + 2 + 2 + 5
    got = read_learned_table(path)
    assert got.dtype == np.uint32 and got.tolist() == [tup(i) for i in (9, 6, 3, 0, 11, 12)]
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


@pytest.mark.parametrize("pairs", [1, 4, 6000])  # 6,000 address pairs: the unpacked path
def test_learner_merges_many_batches_exactly(tmp_path, pairs):
    rng = np.random.default_rng(7)
    n = 30000
    rows = np.zeros((n, 4), np.uint32)
    rows[:, 0] = rng.integers(0, pairs, n) + ip("198.19.0.1")
    rows[:, 1] = ip("198.19.0.2")
    rows[:, 2] = rng.integers(1024, 1100, n)
    rows[:, 3] = rng.integers(1, 30, n)
    lr = Learner(str(tmp_path / "t.npy"), streams=[0], max_rows=10**6, merge_ns=1)
    for k, part in enumerate(np.array_split(rows, 37)):
        lr.add(batch_of(part, 0), now_ns=10 * (k + 1))
    _, first = np.unique(rows, axis=0, return_index=True)
    expect = rows[np.sort(first)]  # every distinct tuple once, in order of first arrival
    got = lr.table()
    assert lr.merges == 37 and np.array_equal(got, expect)
    assert len(lr._runs) <= 2 + int(np.log2(37))  # runs merge like a binary counter


def test_missing_or_empty_table_is_one_clear_line(tmp_path):
    p = program_of(reply_stream())
    q = with_learned_table(p, str(tmp_path / "none.npy"), "inc")
    with pytest.raises(ValueError, match="no learned-tuple table") as e:
        BatchBuilder(q)
    assert "\n" not in str(e.value)
    np.save(tmp_path / "empty.npy", np.zeros((0, 4), np.uint32))
    q = with_learned_table(p, str(tmp_path / "empty.npy"), "inc")
    with pytest.raises(ValueError, match="is empty"):
        BatchBuilder(q)


# ---------------------------------------------------------------------------- table fields


def reply_stream(size=64, l4="udp") -> dict:
    return {
        "eth": {"src": "02:74:67:00:00:02", "dst": "02:74:67:00:01:fe"},
        "ipv4": {"src": "198.19.0.2", "dst": "198.19.0.1"},
        l4: {"src_port": 7, "dst_port": 49184},
        "size": size,
    }


ORDERS = ("fixed", "inc", "dec", "random")


@pytest.mark.parametrize("l4", ["udp", "tcp"])
@pytest.mark.parametrize("size", [80, 128, {"min": 80, "max": 200, "mode": "random"}])
def test_table_fields_reply_to_learned_tuples_in_every_order(tmp_path, size, l4):
    """src = learned dst ip:port, dst = learned src ip:port (the NAT's), at row r(i)."""
    m = 13
    t = np.array(
        [[ip("198.19.0.1") + i % 3, ip("198.19.0.2") + i % 2, 1024 + 4099 * i, 7 + i] for i in range(m)],
        dtype=np.uint32,
    )  # fmt: skip
    path = str(tmp_path / "t.npy")
    np.save(path, t)
    p = program_of(reply_stream(size, l4))
    n = 40
    for order in ORDERS:
        q = with_learned_table(p, path, order)
        assert sum(f.mode == TABLE for f in q.fields) == 4 and q.table == path
        idx = np.arange(n, dtype=np.uint64)
        rows = table_rows(order, q.table_key, idx, m)
        want = {"fixed": [0] * n, "inc": [i % m for i in range(n)]}
        want["dec"] = [m - 1 - i % m for i in range(n)]
        if order in want:
            assert rows.tolist() == want[order]
        else:
            assert rows.min() >= 0 and rows.max() < m and len(set(rows.tolist())) > m // 2
        for i, raw in enumerate(frames(q, 0, n)):
            assert rebuilt_with_fresh_checksums(raw) == raw, (order, i)  # IPv4 + L4 valid
            pkt = Ether(raw)
            seg = pkt[UDP] if l4 == "udp" else pkt[TCP]
            r = t[rows[i]]
            assert ip(pkt[IP].src) == r[1] and ip(pkt[IP].dst) == r[0]
            assert seg.sport == r[3] and seg.dport == r[2]


def test_table_reply_keeps_other_varying_fields_and_the_seed(tmp_path):
    t = np.array(
        [[ip("198.19.0.1"), ip("198.19.0.2"), 5000 + i, 9 + i] for i in range(5)], np.uint32
    )
    path = str(tmp_path / "t.npy")
    np.save(path, t)
    s = reply_stream()
    s["ipv4"]["ttl"] = 17
    p = program_of(s | {"udp": {"src_port": {"min": 1, "max": 9, "mode": "inc"}, "dst_port": 5}})
    q = with_learned_table(p, path, "random", columns={"ip.dst": 0, "l4.dst_port": 2})
    assert [f.name for f in q.fields] == ["l4.src_port", "ip.dst", "l4.dst_port"]
    a, b = frames(q, 0, 30), frames(q, 0, 30)
    assert a == b  # same seed, same frames
    for i, raw in enumerate(a):
        assert rebuilt_with_fresh_checksums(raw) == raw
        pkt = Ether(raw)
        assert pkt[UDP].sport == 1 + i % 9 and pkt[IP].src == "198.19.0.2"
        assert pkt[IP].dst == "198.19.0.1" and 5000 <= pkt[UDP].dport < 5005
    assert REPLY_COLUMNS == {"ip.src": 1, "ip.dst": 0, "l4.src_port": 3, "l4.dst_port": 2}


def test_tables_of_dead_runs_are_removed(tmp_path):
    import subprocess
    import sys

    from tgen_tui.session.learned import remove_stale_tables, remove_table

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    dead, me = p.pid, os.getpid()
    names = [
        f"tgen-learn-{dead}-ab.npy",
        f"tgen-learn-{dead}-ab.npy.tmp7",
        f"tgen-learn-{me}-cd.npy",
    ]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / f"tgen-learn-{me}-cd.npy.tmp{me}").write_bytes(b"x")
    assert sorted(os.path.basename(f) for f in remove_stale_tables(str(tmp_path))) == names[:2]
    remove_table(str(tmp_path / names[2]))  # the table and its temporary file
    assert os.listdir(tmp_path) == []
