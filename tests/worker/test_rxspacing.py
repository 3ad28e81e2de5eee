"""Receive-side spacing in RxStats: inter-arrival gaps of consecutive sequence numbers."""

from __future__ import annotations

import numpy as np

from tgen_tui.packets.program import SIG_MAGIC
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxring import RxBatch
from tgen_tui.worker.rxstats import RxStats, lat_bucket
from tgen_tui.worker.txstamps import StampTable


def _table(n_streams=4):
    t = np.zeros((n_streams, C.RX_STRIDE), dtype=np.int64)
    t[:, C.R_MAX_SEQ] = -1
    t[:, C.R_LAT_MIN] = C.INT64_MAX
    t[:, C.R_LAT_MAX] = -1
    t[:, C.R_VLAN_LAST] = -1
    return t


def _batch(stream, seq, rx_ns):
    seq = np.asarray(seq, dtype=np.uint32)
    n = len(seq)
    rx = np.asarray(rx_ns, dtype=np.int64)
    return RxBatch(
        length=np.full(n, 60, dtype=np.uint32),
        snaplen=np.full(n, 60, dtype=np.uint32),
        magic=np.full(n, SIG_MAGIC, dtype=np.uint16),
        stream=np.broadcast_to(np.asarray(stream, dtype=np.uint16), (n,)).copy(),
        seq=seq,
        ts=((rx - 1000) & 0xFFFFFFFF).astype(np.uint32),
        rx_ns=rx,
        vlan=np.full(n, -1, dtype=np.int64),
    )


def _hist(row):
    return row[C.R_IAT_HIST : C.R_HIST]


def test_gaps_only_between_consecutive_seqs_across_batches():
    t = _table()
    stamps = StampTable.private(4)
    stamps.set_gap(1, 100)
    st = RxStats(t, stamps=stamps)
    # seq 0..3 at 0, 100, 205, 330; seq 4 lost; 5 at 500; 6 at 590 (next batch, with
    # stream 2 interleaved); 8 before 7 (reordered), 9 after
    st.add(_batch(1, [0, 1, 2, 3, 5], [0, 100, 205, 330, 500]))
    b = _batch([1, 2, 1, 1, 1, 2], [6, 0, 8, 7, 9, 1], [590, 600, 700, 710, 800, 650])
    st.add(b)
    r = t[1]
    # gaps: 0-1 100, 1-2 105, 2-3 125, 5-6 90 (across batches); 8-7 and 7-9 are not n, n+1
    gaps = np.array([100, 105, 125, 90])
    assert r[C.R_IAT_COUNT] == 4 and r[C.R_IAT_SUM] == gaps.sum()
    assert r[C.R_IAT_ASKED_COUNT] == 4
    assert r[C.R_IAT_ABS_ERR] == 0 + 5 + 25 + 10
    assert r[C.R_IAT_WITHIN] == 3  # 100, 105, 90 are within 10 µs of 100; 125 is not
    assert r[C.R_IAT_ASKED] == 100
    assert (
        np.array_equal(np.flatnonzero(_hist(r)), np.unique(lat_bucket(gaps)))
        and _hist(r).sum() == 4
    )
    # stream 2 (no asked gap): its gap 0 -> 1 (50 ns) is measured, not compared
    r2 = t[2]
    assert r2[C.R_IAT_COUNT] == 1 and r2[C.R_IAT_SUM] == 50
    assert r2[C.R_IAT_ASKED_COUNT] == r2[C.R_IAT_WITHIN] == r2[C.R_IAT_ASKED] == 0
    # the latency histogram is untouched by the gaps: one entry per frame
    assert r[C.R_HIST :].sum() == r[C.R_LAT_COUNT] == 9


def test_clear_breaks_the_chain_and_no_stamps_table():
    t = _table()
    st = RxStats(t)  # no stamp table: gaps measured, nothing asked
    st.add(_batch(0, [0, 1], [0, 1000]))
    st.clear()
    st.add(_batch(0, [2, 3], [5000, 6000]))  # 1 -> 2 spans the clear: not a gap
    r = t[0]
    assert r[C.R_IAT_COUNT] == 2 and r[C.R_IAT_SUM] == 2000
    assert r[C.R_IAT_ASKED_COUNT] == 0 and r[C.R_IAT_ABS_ERR] == 0


def test_duplicate_does_not_make_a_gap():
    t = _table()
    stamps = StampTable.private(4)
    stamps.set_gap(0, 1000)
    st = RxStats(t, stamps=stamps)
    st.add(_batch(0, [0, 0, 1], [0, 10, 1000]))  # the duplicate 0 is the previous frame of 1
    r = t[0]
    assert r[C.R_IAT_COUNT] == 1 and r[C.R_IAT_SUM] == 990 and r[C.R_IAT_WITHIN] == 1


def test_layout_iat_slots_are_contiguous_and_histograms_in_order():
    # RxStats adds the five sums as one block: count, sum, asked count, |err|, within
    five = (C.R_IAT_COUNT, C.R_IAT_SUM, C.R_IAT_ASKED_COUNT, C.R_IAT_ABS_ERR, C.R_IAT_WITHIN)
    assert five == tuple(range(C.R_IAT_COUNT, C.R_IAT_COUNT + 5))
    assert C.R_IAT_HIST == C.RX_FIXED and C.R_HIST == C.RX_FIXED + C.HIST_BUCKETS
    assert C.RX_STRIDE == C.R_HIST + C.HIST_BUCKETS  # row[R_HIST:] is the latency histogram


def test_stamp_table_gap_layout():
    a = StampTable.private(3, window=256)
    a.set_gap(2, 12345)
    a.set_gap(7, 1)  # out of range: ignored
    assert a.gap_ns.tolist() == [0, 0, 12345]
    a.begin_stream(2, 4)
    assert a.every.tolist() == [0, 0, 4] and a.gap_ns[2] == 12345


def test_lat_bucket_agrees_with_the_bucket_edges():
    """lat_bucket (bit arithmetic, shared by latency and spacing) puts every value in the
    bucket whose [edge, next edge) holds it."""
    from tgen_tui.worker.rxstats import hist_edges_ns

    rng = np.random.default_rng(3)
    v = np.concatenate(
        [np.arange(0, 5000), rng.integers(0, 1 << 32, 200_000), (1 << np.arange(32)) - 1]
    )
    want = np.searchsorted(hist_edges_ns(), v, side="right") - 1
    assert np.array_equal(lat_bucket(v), want)
    assert lat_bucket(np.array([-5, 1 << 40])).tolist() == [0, C.HIST_BUCKETS - 1]
