"""The kernel paths: AF_PACKET TX (sendmmsg, TX ring) and the TPACKET_V3 RX ring (root, netns)."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from tgen_tui.packets.program import SIG_MAGIC
from tgen_tui.worker.netns import current_ns_id, netns
from tgen_tui.worker.rxring import (
    RxRing,
    chain_offsets_doubling,
    chain_offsets_fast,
)
from tgen_tui.worker.txpath import MmsgTx, RingTx, open_tx

from .wk_helpers import make_frames, make_program


def _recv_all(sock: socket.socket, want: int, timeout: float = 2.0) -> list[bytes]:
    out: list[bytes] = []
    end = time.monotonic() + timeout
    sock.settimeout(0.05)
    while len(out) < want and time.monotonic() < end:
        try:
            out.append(sock.recv(65535))
        except TimeoutError:
            pass
    return out


def _ring_frames(rx: RxRing, want: int, timeout: float = 2.0) -> list[tuple[bytes, int]]:
    out: list[tuple[bytes, int]] = []
    end = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < end:
        out += rx.poll_frames()
        time.sleep(0.005)
    return out


def test_netns_context_restores(veth):
    home = current_ns_id()
    with netns(veth.ns_a):
        inside = current_ns_id()
        assert socket.if_nametoindex(veth.if_a) > 0
    assert current_ns_id() == home != inside
    with pytest.raises(OSError):
        with netns("w-no-such-namespace-xyz"):
            pass
    assert current_ns_id() == home


@pytest.mark.parametrize("kind", ["sendmmsg", "tx_ring"])
def test_frames_arrive_byte_identical(veth, kind):
    n = 700
    buf, lens = make_frames(n, stream=2, size=60)
    lens[::3] = 60  # keep one size; vary a byte per frame so frames differ
    buf[:, 20] = np.arange(n) % 251
    with netns(veth.ns_b):
        rx = RxRing(veth.if_b)
        cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        cap.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE: keep every frame
        cap.bind((veth.if_b, 0x0003))
    with netns(veth.ns_a):
        tx = open_tx(veth.if_a, kind)
    try:
        sent = tx.send(buf, lens)
        assert sent == n
        got_ring = _ring_frames(rx, n)
        got_sock = _recv_all(cap, n)
        want = [bytes(buf[i, : lens[i]]) for i in range(n)]
        assert [f for f, _ in got_ring] == want
        assert got_sock == want
    finally:
        tx.close()
        rx.close()
        cap.close()


def test_builder_frames_arrive_byte_identical(veth):
    batch = pytest.importorskip("tgen_tui.packets.batch")
    b = batch.BatchBuilder(make_program(index=1, size=64), max_batch=256)
    with netns(veth.ns_b):
        rx = RxRing(veth.if_b)
    with netns(veth.ns_a):
        tx = MmsgTx(veth.if_a, max_batch=256)
    try:
        want = []
        for k in range(4):
            buf, lens = b.build(k * 256, 256)
            want += [bytes(buf[i, : lens[i]]) for i in range(256)]
            assert tx.send(buf, lens) == 256
        got = _ring_frames(rx, len(want))
        assert [f for f, _ in got] == want
    finally:
        tx.close()
        rx.close()


def test_ring_count_matches_interface_counter_and_parses(veth):
    with netns(veth.ns_b):
        rx = RxRing(veth.if_b, block_size=1 << 16, block_nr=8, retire_ms=2)
    with netns(veth.ns_a):
        tx = MmsgTx(veth.if_a, max_batch=512)
    try:
        r0 = veth.rx_packets("b")
        total = 0
        seen = []
        for k in range(40):  # mixed sizes -> some blocks need the slow chain path
            size = 60 if k % 3 else 200
            buf, lens = make_frames(512, stream=k % 4, size=size, start=k * 512, ts=1234)
            total += tx.send(buf, lens)
            seen.append(rx.poll())
        time.sleep(0.05)
        seen.append(rx.poll())
        r1 = veth.rx_packets("b")
        got = sum(len(s) for s in seen)
        assert total == 40 * 512
        assert r1 - r0 == total
        pk, dr = rx.kernel_stats()
        assert dr == 0
        assert got == total == pk
        allb = [s for s in seen if len(s)]
        magic = np.concatenate([s.magic for s in allb])
        seq = np.concatenate([s.seq for s in allb])
        ts = np.concatenate([s.ts for s in allb])
        assert (magic == SIG_MAGIC).all()
        assert (ts == 1234).all()
        np.testing.assert_array_equal(np.sort(seq), np.arange(total))
        assert rx.slow_blocks > 0
    finally:
        tx.close()
        rx.close()


def test_vlan_tag_is_reported(veth):
    with netns(veth.ns_b):
        rx = RxRing(veth.if_b)
    with netns(veth.ns_a):
        tx = MmsgTx(veth.if_a)
    try:
        buf, lens = make_frames(10, stream=1, size=64, vlan=0x2064)  # PCP 1, VID 100
        assert tx.send(buf, lens) == 10
        time.sleep(0.02)
        end = time.monotonic() + 2
        got = rx.poll()
        while len(got) < 10 and time.monotonic() < end:
            time.sleep(0.01)
            got = rx.poll() if len(got) == 0 else got
        assert len(got) == 10
        assert (got.vlan == ((0x8100 << 16) | 0x2064)).all()
        # the stripped tag is not in the length; the signature is still found
        assert (got.length == 60).all()
        assert (got.magic == SIG_MAGIC).all()
    finally:
        tx.close()
        rx.close()


def test_rx_timestamps_are_monotonic_clock(veth):
    with netns(veth.ns_b):
        rx = RxRing(veth.if_b, retire_ms=1)
    with netns(veth.ns_a):
        tx = MmsgTx(veth.if_a)
    try:
        t0 = time.monotonic_ns()
        buf, lens = make_frames(5, size=60)
        tx.send(buf, lens)
        time.sleep(0.02)
        got = rx.poll()
        t1 = time.monotonic_ns()
        assert len(got) == 5
        assert (got.rx_ns >= t0 - 1_000_000).all() and (got.rx_ns <= t1).all()
    finally:
        tx.close()
        rx.close()


def _fake_block(sizes: list[int], block: int = 1 << 14) -> tuple[np.ndarray, int, int]:
    """A synthetic V3 block: headers chained by tp_next_offset, garbage elsewhere."""
    rng = np.random.default_rng(1)
    u8 = rng.integers(0, 256, block, dtype=np.uint8)  # garbage
    u32 = u8.view(np.uint32)
    first = 48
    off = first
    offs = []
    for s in sizes:
        step = (s + 7) & ~7
        offs.append(off)
        u32[off >> 2] = step
        u8[off + 24 : off + 26] = (82, 0)  # tp_mac, the same in every header
        off += step
    return u32, first, off, offs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chain_doubling_matches_walk(seed):
    rng = np.random.default_rng(seed)
    sizes = list(rng.integers(48, 400, 37))
    sizes[5] = sizes[6] = 200  # a run of equal sizes inside
    u32, first, end, offs = _fake_block(sizes)
    got = chain_offsets_doubling(u32, first, len(sizes), end)
    np.testing.assert_array_equal(got, offs)
    assert chain_offsets_fast(u32, first, len(sizes)) is None


def test_chain_fast_path():
    u32, first, end, offs = _fake_block([100] * 50)
    np.testing.assert_array_equal(chain_offsets_fast(u32, first, 50), offs)
    np.testing.assert_array_equal(chain_offsets_doubling(u32, first, 50, end), offs)


def test_unknown_tx_kind():
    with pytest.raises(ValueError):
        open_tx("lo", "carrier-pigeon")


def test_ringtx_rejects_oversize(veth):
    with netns(veth.ns_a):
        tx = RingTx(veth.if_a, max_len=128, ring_frames=256)
    try:
        assert tx.max_len == 256 - 32  # slot size: next power of two of 32 + 128
        buf = np.zeros((1, 320), dtype=np.uint8)
        with pytest.raises(ValueError):
            tx.send(buf, np.array([300]))
    finally:
        tx.close()
