"""Per-stream rx accounting and the counter block, on crafted sequences (no network)."""

from __future__ import annotations

import numpy as np
import pytest

from tgen_tui.packets.program import SIG_MAGIC
from tgen_tui.worker.counters import (
    HIST_BUCKETS,
    INT64_MAX,
    P_TX_FRAMES,
    R_BYTES,
    R_DUP,
    R_FRAMES,
    R_HIST,
    R_JIT_COUNT,
    R_JIT_SUM,
    R_LAT_COUNT,
    R_LAT_MAX,
    R_LAT_MIN,
    R_LAT_SUM,
    R_MAX_SEQ,
    R_NEG_LAT,
    R_OOO,
    R_TOO_OLD,
    R_VLAN_FRAMES,
    R_VLAN_LAST,
    RX_STRIDE,
    T_REQ_MPPS,
    CounterView,
)
from tgen_tui.worker.rxring import RxBatch
from tgen_tui.worker.rxstats import RxStats, hist_edges_ns, hist_percentile_ns, lat_bucket


def _table(n_streams=4):
    t = np.zeros((n_streams, RX_STRIDE), dtype=np.int64)
    t[:, R_MAX_SEQ] = -1
    t[:, R_LAT_MIN] = INT64_MAX
    t[:, R_LAT_MAX] = -1
    t[:, R_VLAN_LAST] = -1
    return t


def _batch(stream, seq, lat=1000, vlan=None, length=60, magic=SIG_MAGIC, rx0=10**12):
    seq = np.asarray(seq, dtype=np.uint64) & 0xFFFFFFFF
    n = len(seq)
    stream = np.broadcast_to(np.asarray(stream, dtype=np.uint16), (n,)).copy()
    rx = rx0 + np.arange(n, dtype=np.int64) * 1000
    lat = np.broadcast_to(np.asarray(lat, dtype=np.int64), (n,))
    ts = ((rx - lat) & 0xFFFFFFFF).astype(np.uint32)
    vl = (
        np.full(n, -1, dtype=np.int64)
        if vlan is None
        else np.broadcast_to(np.asarray(vlan), (n,)).astype(np.int64)
    )
    return RxBatch(
        length=np.full(n, length, dtype=np.uint32),
        snaplen=np.full(n, length, dtype=np.uint32),
        magic=np.broadcast_to(np.asarray(magic, dtype=np.uint16), (n,)).copy(),
        stream=stream,
        seq=seq.astype(np.uint32),
        ts=ts,
        rx_ns=rx,
        vlan=vl,
    )


def test_in_order_no_loss():
    t = _table()
    st = RxStats(t)
    assert st.add(_batch(1, range(100))) == (100, 0)
    assert st.add(_batch(1, range(100, 150))) == (50, 0)
    r = t[1]
    assert r[R_FRAMES] == 150 and r[R_BYTES] == 150 * 60
    assert r[R_OOO] == 0 and r[R_DUP] == 0 and r[R_MAX_SEQ] == 149
    assert r[R_LAT_COUNT] == 150 and r[R_LAT_SUM] == 150 * 1000
    assert r[R_LAT_MIN] == 1000 == r[R_LAT_MAX]
    assert r[R_JIT_SUM] == 0 and r[R_JIT_COUNT] == 149
    assert t[0, R_FRAMES] == 0


def test_loss_shows_as_gap():
    t = _table()
    st = RxStats(t)
    st.add(_batch(0, [0, 1, 2, 5, 6, 9]))
    assert t[0, R_FRAMES] == 6 and t[0, R_MAX_SEQ] == 9
    assert t[0, R_OOO] == 0 and t[0, R_DUP] == 0
    # loss = max_seq + 1 - frames (when nothing is reordered)
    assert t[0, R_MAX_SEQ] + 1 - t[0, R_FRAMES] == 4


def test_reorder_and_duplicates_within_and_across_batches():
    t = _table()
    st = RxStats(t)
    st.add(_batch(2, [0, 1, 3, 2, 4, 4, 1]))  # 2 late (ooo); second 4 dup; 1 dup
    assert t[2, R_FRAMES] == 7
    assert t[2, R_OOO] == 1
    assert t[2, R_DUP] == 2
    st.add(_batch(2, [5, 3, 6, 0, 7]))  # 3 and 0 are duplicates from the earlier batch
    assert t[2, R_DUP] == 4
    assert t[2, R_OOO] == 1
    st.add(_batch(2, [10, 8, 9]))  # 8 and 9 arrive after 10: out of order, new
    assert t[2, R_OOO] == 3 and t[2, R_DUP] == 4 and t[2, R_MAX_SEQ] == 10


def test_interleaved_streams_are_independent():
    t = _table()
    st = RxStats(t)
    s = np.array([0, 1, 0, 1, 0, 1, 3])
    q = np.array([0, 0, 1, 1, 2, 0, 0])  # stream 1 sees a duplicate of 0
    st.add(_batch(s, q))
    assert list(t[:, R_FRAMES]) == [3, 3, 0, 1]
    assert t[1, R_DUP] == 1 and t[0, R_DUP] == 0 and t[3, R_DUP] == 0
    assert t[0, R_MAX_SEQ] == 2 and t[1, R_MAX_SEQ] == 1


def test_other_frames():
    t = _table(n_streams=2)
    st = RxStats(t)
    b = _batch([0, 1, 5, 0], [0, 0, 0, 1])  # stream 5 >= n_streams -> other
    b.magic[1] = 0x1234  # no magic -> other
    assert st.add(b) == (2, 2)
    assert t[0, R_FRAMES] == 2 and t[1, R_FRAMES] == 0


def test_sequence_wraps_32_bits():
    t = _table()
    st = RxStats(t)
    base = (1 << 32) - 3
    st.add(_batch(0, [base + i for i in range(6)]))
    assert t[0, R_MAX_SEQ] == (1 << 32) + 2
    assert t[0, R_OOO] == 0 and t[0, R_DUP] == 0
    st.add(_batch(0, [(1 << 32) + 3, (1 << 32) - 1]))  # late frame from before the wrap
    assert t[0, R_OOO] == 0 and t[0, R_DUP] == 1  # seen already: a duplicate, not ooo


def test_window_and_too_old():
    t = _table(1)
    st = RxStats(t, window=1024)
    st.add(_batch(0, range(5000)))
    st.add(_batch(0, [4999 - 1023, 4999 - 1024, 100]))
    # 3976 is inside the window (dup), 3975 and 100 are older: late, not checked
    assert t[0, R_DUP] == 1
    assert t[0, R_TOO_OLD] == 2
    assert t[0, R_OOO] == 2


def test_latency_hist_jitter_vlan_negative():
    t = _table()
    st = RxStats(t)
    lat = np.array([1000, 3000, 2000, 1_000_000, 0], dtype=np.int64)
    st.add(_batch(0, range(5), lat=lat, vlan=(0x8100 << 16) | 100))
    r = t[0]
    assert r[R_LAT_MIN] == 0 and r[R_LAT_MAX] == 1_000_000
    assert r[R_LAT_SUM] == lat.sum()
    assert r[R_JIT_COUNT] == 4
    assert r[R_JIT_SUM] == 2000 + 1000 + 998_000 + 1_000_000
    assert r[R_VLAN_FRAMES] == 5 and r[R_VLAN_LAST] == (0x8100 << 16) | 100
    assert r[R_BYTES] == 5 * 64  # stripped tag counted back
    assert r[R_HIST:].sum() == 5
    # negative latency (clock noise) is clamped and counted
    st.add(_batch(0, [5], lat=-500))
    assert t[0, R_NEG_LAT] == 1 and t[0, R_LAT_MIN] == 0
    st.clear()
    assert t[0, R_MAX_SEQ] == -1 and t[0, R_LAT_MAX] == -1
    st.add(_batch(0, [0], lat=7))
    assert t[0, R_DUP] == 0 and t[0, R_LAT_MIN] == 7 and t[0, R_FRAMES] == 7


def test_hist_buckets():
    edges = hist_edges_ns()
    assert len(edges) == HIST_BUCKETS + 1
    assert (np.diff(edges) > 0).all()
    v = np.array([0, 63, 64, 1023, 1024, 1087, 1088, 2047, 2048, 10**6, 2**32 - 1])
    b = lat_bucket(v)
    assert ((edges[b] <= v) & (v < edges[b + 1])).all()
    rng = np.random.default_rng(0)
    v = rng.integers(0, 2**32, 10000)
    b = lat_bucket(v)
    assert ((edges[b] <= v) & (v < edges[b + 1])).all()
    h = np.bincount(lat_bucket(np.arange(1, 1001) * 1000), minlength=HIST_BUCKETS)
    p50 = hist_percentile_ns(h, 0.5)
    assert 500_000 <= p50 <= 500_000 * 1.07
    assert hist_percentile_ns(np.zeros(HIST_BUCKETS), 0.5) is None


def test_counter_block_roundtrip(tmp_path):
    path = str(tmp_path / "ctr")
    w = CounterView.create(path, n_ports=2, n_tx=3, n_streams=5, n_rx=1)
    w.ports[1, P_TX_FRAMES] += 42
    w.tx[2, T_REQ_MPPS] = 1_500_000
    st = RxStats(w.rx[0])
    st.add(_batch(3, range(10)))
    r = CounterView.open(path)
    assert r.arr.flags.writeable is False
    snap = r.snapshot()
    assert snap["ports"][1]["tx_frames"] == 42
    assert snap["tx"][2]["requested_mpps"] == 1_500_000
    assert list(snap["rx"][0]) == [3]
    s3 = snap["rx"][0][3]
    assert s3["frames"] == 10 and s3["max_seq"] == 9 and sum(s3["hist"]) == 10
    with pytest.raises(ValueError):
        (tmp_path / "bad").write_bytes(b"\0" * 1024)
        CounterView.open(str(tmp_path / "bad"))
    w.close()
    r.close()
