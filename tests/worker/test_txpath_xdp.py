"""The AF_XDP send path (XdpTx, copy mode on veth): exact bytes and counts through the kernel."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.worker.netns import netns
from tgen_tui.worker.txpath import XDP_CHUNK, open_tx

from .wk_helpers import make_program

pytestmark = pytest.mark.root


def _sink(ns: str, ifn: str) -> socket.socket:
    with netns(ns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind((ifn, 0))
    s.settimeout(2.0)
    return s


def test_xdp_sends_exact_frames(veth):
    prog = make_program(size=60)
    b = BatchBuilder(prog, max_batch=256)
    rx = _sink(veth.ns_b, veth.if_b)
    r0 = veth.rx_packets()
    with netns(veth.ns_a):
        tx = open_tx(veth.if_a, "af_xdp", max_batch=256)
    try:
        assert (tx.kind, tx.mode) == ("af_xdp", "copy")
        want: list[bytes] = []
        sent = 0
        for k in range(0, 3000, 256):  # 12 batches: the UMEM (4096 chunks) wraps around
            n = min(256, 3000 - k)
            buf, lens = b.build(k, n)
            want += [bytes(buf[i, : lens[i]]) for i in range(n)]
            m = 0
            while m < n:
                m += tx.send(buf[m:n], lens[m:n])
            sent += m
    finally:
        tx.close()
    assert sent == 3000
    got = []
    while len(got) < 3000:
        try:
            f = rx.recv(2048)
        except TimeoutError:
            break
        if len(f) == 60 and f[12:14] == b"\x08\x00" and f[23] == 17:
            got.append(f)
    rx.close()
    assert veth.rx_packets() - r0 == 3000
    assert got == want  # every frame, in order, byte for byte


def test_xdp_rejects_oversized_and_batches(veth):
    with netns(veth.ns_a):
        tx = open_tx(veth.if_a, "af_xdp", max_batch=8)
    try:
        big = np.zeros((1, XDP_CHUNK + 16), dtype=np.uint8)
        with pytest.raises(ValueError, match="exceeds the AF_XDP chunk"):
            tx.send(big, np.array([XDP_CHUNK + 8]))
        with pytest.raises(ValueError, match="exceeds max_batch"):
            tx.send(np.zeros((9, 64), dtype=np.uint8), np.full(9, 60))
        assert tx.send(np.zeros((0, 64), dtype=np.uint8), np.zeros(0, dtype=np.int64)) == 0
    finally:
        tx.close()


def test_xdp_missing_interface_is_an_oserror(veth):
    with netns(veth.ns_a), pytest.raises(OSError):
        open_tx("nope0", "af_xdp")
