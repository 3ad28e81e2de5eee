"""The Responder's learning on the real receive path (root, veth pair in namespaces).

- ``RxRing(headers=True)`` reads IPv4 addresses and UDP/TCP ports of frames that scapy
  built, whatever VLAN tags the kernel left in the packet or moved into the metadata;
- a worker whose port spec carries ``learn`` writes the distinct tuples of one stream's
  signature frames to its table file when the port stops, and reports them in
  ``stopped``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether

from tgen_tui.packets.batch import BatchBuilder, read_learned_table
from tgen_tui.packets.program import program_to_dict
from tgen_tui.worker.netns import netns
from tgen_tui.worker.rxring import RxRing

from .test_worker_process import shm_path, worker  # noqa: F401 - fixtures
from .wk_helpers import make_program

pytestmark = pytest.mark.root

E = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def ip(a: str) -> int:
    return int(ipaddress.ip_address(a))


def test_ring_gathers_tuples_through_vlan_tags(veth):
    pkts = [
        E / IP(src="198.18.0.1", dst="198.19.0.2") / UDP(sport=1000, dport=7) / (b"x" * 30),
        E / Dot1Q(vlan=100) / IP(src="198.18.0.3", dst="198.19.0.4") / UDP(sport=1001, dport=8),
        E
        / Dot1AD(vlan=200)
        / Dot1Q(vlan=300)
        / IP(src="198.18.0.5", dst="198.19.0.6")
        / TCP(sport=1002, dport=9),
        E
        / Dot1Q(vlan=7)
        / Dot1Q(vlan=8)
        / IP(src="198.18.0.7", dst="198.19.0.8", options=[IPOption_NOP()] * 12)
        / UDP(sport=1003, dport=10),
    ]
    raws = [bytes(p) + b"\0" * max(0, 60 - len(bytes(p))) for p in pkts]
    with netns(veth.ns_b):
        rx = RxRing(veth.if_b, retire_ms=2, headers=True)
        plain = RxRing(veth.if_b, retire_ms=2)
    with netns(veth.ns_a):
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((veth.if_a, 0))
    try:
        for r in raws:
            tx.send(r)
        got, other = [], []
        end = time.monotonic() + 3
        while sum(map(len, got)) < len(raws) and time.monotonic() < end:
            b = rx.poll()
            if len(b):
                got.append(b)
            other.append(plain.poll())
            time.sleep(0.01)
        b = got[0] if len(got) == 1 else type(got[0]).concat(got)
        assert len(b) == len(raws) and b.hdr_ok.all()
        want = [
            [ip(p[IP].src), ip(p[IP].dst), (p[UDP] if UDP in p else p[TCP]).sport,
             (p[UDP] if UDP in p else p[TCP]).dport]
            for p in pkts
        ]  # fmt: skip
        assert b.hdr.tolist() == want
        assert (b.vlan[1:] >= 0).all()  # veth moved the outer tag into the ring's metadata
        assert all(x.hdr is None for x in other)  # the default path gathers nothing
    finally:
        tx.close()
        rx.close()
        plain.close()


def test_worker_learns_one_streams_tuples_and_writes_the_table(worker, veth, shm_path):  # noqa: F811
    worker.expect("hello")
    learned = make_program(index=0, size=64, pps=20000.0, count=3000)
    ignored = make_program(index=1, size=64, pps=5000.0, count=500)
    path = f"/dev/shm/tgen-learn-test-{os.getpid()}-{time.monotonic_ns()}.npy"
    try:
        worker.send(
            cmd="configure",
            shm=shm_path,
            n_streams=2,
            ports=[
                {
                    "name": "a",
                    "interface": veth.if_a,
                    "netns": veth.ns_a,
                    "rx": False,
                    "tx_streams": [program_to_dict(learned), program_to_dict(ignored)],
                },
                {
                    "name": "b",
                    "interface": veth.if_b,
                    "netns": veth.ns_b,
                    "rx": True,
                    "learn": {"path": path, "streams": [0], "max": 100_000},
                },
            ],
        )
        worker.expect("ready")
        worker.send(cmd="start", ports=["a"], t0_ns=time.monotonic_ns() + 50_000_000)
        worker.expect("started")
        worker.expect("tx_done", timeout=20)
        worker.send(cmd="stop", drain_ms=100)
        stopped = {}
        while len(stopped) < 2:
            m = worker.expect("stopped")
            stopped[m["port"]] = m
        assert stopped["a"]["learned"] is None
        info = stopped["b"]["learned"]
        assert stopped["b"]["counters"]["rx_frames"] == 3500
        # the expected tuples: stream 0's frames, distinct, in the order they were sent
        vals = BatchBuilder(learned).field_values(np.arange(3000, dtype=np.uint64))
        rows = np.zeros((3000, 4), np.uint32)
        rows[:, 0], rows[:, 1] = ip("198.18.0.1"), ip("198.18.0.2")
        rows[:, 2], rows[:, 3] = vals[0], vals[1]
        _, first = np.unique(rows, axis=0, return_index=True)
        want = rows[np.sort(first)]
        assert info["frames"] == 3000 and info["unparsed"] == 0 and info["path"] == path
        assert info["tuples"] == len(want) and not info["full"]
        table = read_learned_table(path)
        assert sorted(map(tuple, table.tolist())) == sorted(map(tuple, want.tolist()))
    finally:
        if os.path.exists(path):
            os.unlink(path)
