"""The stateful figures' numpy parts: first-seen tables and receive gaps."""

from __future__ import annotations

import numpy as np

from tgen_tui.worker.liveflow import FirstSeen, GapTracker


def test_first_seen_keeps_the_earliest_time_of_each_key_across_merges():
    fs = FirstSeen()
    fs.add(np.array([5, 3, 5], dtype=np.uint64), np.array([10, 11, 12], dtype=np.int64))
    fs.merge()
    fs.add(np.array([3, 9, 1], dtype=np.uint64), np.array([20, 21, 22], dtype=np.int64))
    fs.add(np.array([9], dtype=np.uint64), np.array([23], dtype=np.int64))
    fs.merge()
    assert fs.keys.tolist() == [1, 3, 5, 9]
    assert fs.times.tolist() == [22, 11, 10, 21]


def test_gap_tracker_finds_the_longest_gap_per_stream_across_batches():
    g = GapTracker()
    sig = np.ones(4, dtype=bool)
    g.add(np.array([0, 1, 0, 1], np.uint16), np.array([100, 105, 110, 300], np.int64), sig)
    g.add(np.array([0, 0], np.uint16), np.array([500, 510], np.int64), sig[:2])
    rep = g.report()
    assert rep[0] == {"max_gap_ns": 390, "gap_start_ns": 110}  # 110 -> 500, over two batches
    assert rep[1] == {"max_gap_ns": 195, "gap_start_ns": 105}
    g.add(np.array([2], np.uint16), np.array([600], np.int64), np.zeros(1, dtype=bool))
    assert 2 not in g.report()  # frames without a signature are not a stream's


def test_gap_tracker_matches_a_frame_by_frame_walk():
    rng = np.random.default_rng(1)
    g, last, best = GapTracker(), {}, {}
    for i in range(50):
        n = int(rng.integers(1, 200))
        st = rng.integers(0, 5, n).astype(np.uint16)
        t = np.sort(rng.integers(0, 10**6, n)) + i * 10**6
        sig = rng.random(n) < 0.9
        g.add(st, t, sig)
        for s, ts in zip(st[sig].tolist(), t[sig].tolist(), strict=True):
            if s in last and ts - last[s] > best.get(s, -1):
                best[s] = ts - last[s]
            last[s] = ts
    rep = g.report()
    assert {s: r["max_gap_ns"] for s, r in rep.items() if s in best} == best
