"""Latency from kernel transmit timestamps: the shared table, the receiver's join, and two
real worker processes (one sends, one receives) joined through the engine's table."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from tgen_tui.packets.program import program_to_dict
from tgen_tui.worker.client import WorkerClient
from tgen_tui.worker.counters import (
    R_FRAMES,
    R_HIST,
    R_LAT_COUNT,
    R_LAT_EVERY,
    R_LAT_MAX,
    R_LAT_MIN,
    R_LAT_SUM,
    R_LAT_UNSTAMPED,
    CounterView,
)
from tgen_tui.worker.rxring import RxBatch
from tgen_tui.worker.rxstats import RxStats
from tgen_tui.worker.txstamps import StampTable, sample_every, tags_for

from .test_rxstats import _batch, _table
from .wk_helpers import make_program


def test_sample_every_is_a_power_of_two_near_the_target():
    assert sample_every(1000) == 1 and sample_every(1024) == 1 and sample_every(1025) == 2
    assert sample_every(20_000) == 32 and sample_every(100_000) == 128
    assert sample_every(14_880_952) == 16384


def test_table_lookup_matches_only_the_frame_it_recorded():
    t = StampTable.private(n_streams=2, window=256)
    t.begin_stream(1, 4)
    t.record(tags_for(1, 0, 1), np.array([111]))
    t.record(np.array([(1 << 40) | 8], dtype=np.uint64), np.array([888]))
    got = t.lookup(np.array([1, 1, 1, 0]), np.array([0, 8, 12, 0]), np.array([4, 4, 4, 1]))
    assert got.tolist() == [111, 888, -1, -1]
    # 256 slots later the slot holds another frame: the old one no longer matches
    t.record(np.array([(1 << 40) | (8 + 4 * 256)], dtype=np.uint64), np.array([999]))
    got = t.lookup(np.array([1, 1]), np.array([8, 8 + 4 * 256]), np.array([4, 4]))
    assert got.tolist() == [-1, 999]


def test_receiver_joins_sampled_frames_and_waits_for_late_stamps():
    table = StampTable.private(n_streams=2, window=1024)
    table.begin_stream(0, 4)  # stream 0: kernel stamps on seq % 4 == 0; stream 1: signature
    tab = _table(2)
    rs = RxStats(tab, stamps=table)
    b = _batch(0, np.arange(16), lat=999_999)  # the signature would say ~1 ms
    rx = b.rx_ns
    # the sender's kernel stamps: frames 0, 4, 8 left 3 µs before they arrived; 12 not yet
    table.record(tags_for(0, 0, 16)[[0, 4, 8]], rx[[0, 4, 8]] - 3000)
    rs.add(b)
    row = tab[0]
    assert row[R_FRAMES] == 16 and row[R_LAT_EVERY] == 4
    assert row[R_LAT_COUNT] == 3 and row[R_LAT_SUM] == 9000
    assert row[R_LAT_MIN] == row[R_LAT_MAX] == 3000 and row[R_HIST:].sum() == 3
    assert rs.pending == 1
    table.record(tags_for(0, 12, 1), rx[[12]] - 5000)  # frame 12's stamp comes later
    rs.resolve_pending(int(rx[-1]))
    assert row[R_LAT_COUNT] == 4 and row[R_LAT_MAX] == 5000 and rs.pending == 0
    b2 = _batch(0, [16], rx0=int(rx[-1]) + 1000)  # sampled, never stamped
    rs.add(b2)
    assert rs.pending == 1
    rs.resolve_pending(int(b2.rx_ns[0]) + 10, final=True)
    assert row[R_LAT_UNSTAMPED] == 1 and row[R_LAT_COUNT] == 4 and rs.pending == 0
    # a signature stream in the same table: every frame, from its signature
    rs.add(_batch(1, np.arange(10), lat=7000))
    assert tab[1][R_LAT_COUNT] == 10 and tab[1][R_LAT_EVERY] == 0
    assert tab[1][R_LAT_MIN] == tab[1][R_LAT_MAX] == 7000


def test_latency_beyond_the_32_bit_stamp_is_not_wrapped():
    table = StampTable.private(n_streams=1, window=256)
    table.begin_stream(0, 1)
    tab = _table(1)
    rs = RxStats(tab, stamps=table)
    b = _batch(0, [0])
    table.record(tags_for(0, 0, 1), b.rx_ns - 5_000_000_000)  # held 5 s by a stuck DUT
    rs.add(b)
    assert tab[0][R_LAT_MAX] == 5_000_000_000  # the signature's 32 bits would say 0.7 s


def test_signature_stamps_are_widened_by_the_senders_64_bit_references():
    """tx_ring/AF_XDP senders record the send time of every K-th frame: the receiver keeps
    the signature's latency but takes its high bits from them (no wrap at 4.29 s)."""
    table = StampTable.private(n_streams=1, window=256)
    table.begin_stream(0, -4)
    tab = _table(1)
    rs = RxStats(tab, stamps=table)
    held = 5_000_000_123  # a stuck DUT released the frames 5 s late
    b = _batch(0, [1, 2, 3], lat=held)  # the signature's 32 bits say 705 ms
    table.record(tags_for(0, 0, 1), b.rx_ns[:1] - held - 1000)  # frame 0 left 1 µs earlier
    rs.add(b)
    row = tab[0]
    assert row[R_LAT_COUNT] == 3 and row[R_LAT_MIN] == row[R_LAT_MAX] == held
    assert row[R_LAT_EVERY] == 0  # a signature source
    # a frame whose reference slot already holds a frame 256 samples later: no value
    table.record(tags_for(0, 4 * 256, 1), np.array([1]))
    rs.add(_batch(0, [2], lat=held, rx0=int(b.rx_ns[-1]) + 1000))  # a late duplicate of 2
    rs.add(_batch(0, [5], lat=1000, rx0=int(b.rx_ns[-1]) + 2000))  # no reference yet
    assert row[R_LAT_UNSTAMPED] == 1 and row[R_FRAMES] == 5  # frame 2 again: too old
    assert row[R_LAT_COUNT] == 3 + 1  # frame 5: its 32-bit signature latency
    assert row[R_LAT_MIN] == 1000


def test_one_batch_of_kernel_and_widened_streams():
    """Streams of both sources interleaved in one received batch are each timed their way."""
    table = StampTable.private(n_streams=2, window=256)
    table.begin_stream(0, 4)  # kernel stamps, 1 in 4
    table.begin_stream(1, -4)  # signature, widened from references
    tab = _table(2)
    rs = RxStats(tab, stamps=table)
    a, b = _batch(0, np.arange(8), lat=999_999), _batch(1, np.arange(8), lat=6_000_000_000)
    table.record(tags_for(0, 0, 8)[[0, 4]], a.rx_ns[[0, 4]] - 2000)
    table.record(tags_for(1, 0, 8)[[0, 4]], b.rx_ns[[0, 4]] - 6_000_000_000 - 500)
    mixed = RxBatch(*(np.ravel(np.column_stack([getattr(a, f), getattr(b, f)]))
                      for f in RxBatch.FIELDS))  # fmt: skip
    rs.add(mixed)
    assert tab[0][R_LAT_COUNT] == 2 and tab[0][R_LAT_MIN] == tab[0][R_LAT_MAX] == 2000
    assert tab[1][R_LAT_COUNT] == 8 and tab[1][R_LAT_MIN] == tab[1][R_LAT_MAX] == 6_000_000_000
    assert tab[0][R_LAT_EVERY] == 4 and tab[1][R_LAT_EVERY] == 0


@pytest.fixture
def two_workers():
    core = max(os.sched_getaffinity(0))
    ws = [WorkerClient(core=core), WorkerClient(core=core)]
    try:
        yield ws
    finally:
        for w in ws:
            w.close()


@pytest.mark.root
@pytest.mark.parametrize("path", ["sendmmsg", "tx_ring"])
def test_two_workers_join_kernel_stamps_through_the_shared_table(veth, two_workers, path):
    """As the engine runs them: one worker sends, another receives, one shared table.
    sendmmsg: kernel stamps on every K-th frame (K from the rate: 32 at 20 kfps);
    tx_ring: signature stamps on every frame (widened by the table's references)."""
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    stamps = f"/dev/shm/tgen-wtest-{tag}-stamps"
    shm = [f"/dev/shm/tgen-wtest-{tag}-{i}" for i in (0, 1)]
    table = StampTable.create(stamps, 1)  # the engine's part; kept open to look inside
    tx, rx = two_workers
    try:
        prog = program_to_dict(make_program(index=0, size=64, pps=20_000.0, count=4000))
        for w, ctr, port in (
            (tx, shm[0], {"name": "a", "interface": veth.if_a, "netns": veth.ns_a,
                          "rx": False, "tx_streams": [prog], "tx_path": path}),
            (rx, shm[1], {"name": "b", "interface": veth.if_b, "netns": veth.ns_b,
                          "rx": True, "tx_streams": []}),
        ):  # fmt: skip
            w.expect("hello")
            w.send(cmd="configure", shm=ctr, n_streams=1, ports=[port], stamps=stamps)
            w.expect("ready")
        os.unlink(stamps)  # mapped by both, as the engine does
        rx.send(cmd="start")
        rx.expect("started")
        tx.send(cmd="start", t0_ns=time.monotonic_ns() + 20_000_000)
        tx.expect("started")
        tx.expect("tx_done", timeout=20)
        tx.send(cmd="stop", drain_ms=0)
        tx.expect("stopped")
        rx.send(cmd="stop", drain_ms=200)
        rx.expect("stopped")
        row = CounterView.open(shm[1]).rx[0][0].copy()
    finally:
        for p in shm + [stamps]:
            if os.path.exists(p):
                os.unlink(p)
    assert row[R_FRAMES] == 4000
    k = sample_every(20_000)
    every = k if path == "sendmmsg" else 0  # 20 kfps: every K-th frame stamped by the kernel
    assert row[R_LAT_EVERY] == every
    assert row[R_LAT_COUNT] == 4000 // (every or 1) and row[R_LAT_UNSTAMPED] == 0
    assert row[R_HIST:].sum() == row[R_LAT_COUNT]
    # the sender published every K-th frame's time: kernel stamps (K), 64-bit references (-K)
    assert table.every[0] == (k if path == "sendmmsg" else -k)
    assert np.count_nonzero(table.seq1[0]) == 4000 // k
    table.close()
    assert 0 <= row[R_LAT_MIN] <= row[R_LAT_MAX]


@pytest.mark.root
def test_a_new_rate_gets_its_own_sampling_interval(veth, two_workers):
    """A stream raised from 1 kfps (every frame stamped) to 40 kfps is sampled 1 in 64."""
    w = two_workers[0]
    shm = f"/dev/shm/tgen-wtest-{os.getpid()}-{time.monotonic_ns()}"
    try:
        prog = program_to_dict(make_program(index=0, size=64, pps=1000.0))
        w.expect("hello")
        w.send(cmd="configure", shm=shm, n_streams=1, ports=[
            {"name": "a", "interface": veth.if_a, "netns": veth.ns_a, "rx": False,
             "tx_streams": [prog], "tx_path": "sendmmsg"},
            {"name": "b", "interface": veth.if_b, "netns": veth.ns_b, "rx": True,
             "tx_streams": []},
        ])  # fmt: skip
        w.expect("ready")
        w.send(cmd="start", t0_ns=time.monotonic_ns() + 20_000_000)
        w.expect("started")
        time.sleep(0.5)
        view = CounterView.open(shm)
        assert view.rx[0][0][R_LAT_EVERY] == 1
        w.send(cmd="set_rate", stream=0, pps=40_000.0)
        w.expect("rate")
        time.sleep(0.5)
        w.send(cmd="stop", drain_ms=200)
        w.expect("stopped")
        w.expect("stopped")
        row = view.rx[0][0].copy()
        view.close()
    finally:
        if os.path.exists(shm):
            os.unlink(shm)
    assert row[R_LAT_EVERY] == sample_every(40_000) == 64
    # every frame before the change, 1 in 8 after: far fewer latencies than frames
    assert 0 < row[R_LAT_COUNT] < row[R_FRAMES] // 2
