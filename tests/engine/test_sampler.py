"""The stats layer alone, without root: the sampler on a temporary counter file, the
result builder and the threshold evaluation on its output.

A test plays the worker: it writes counters into a real counter block (the same
``CounterView`` the worker uses) and checks what the sampler makes of them.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tgen_tui.engine import stats
from tgen_tui.engine.probes import DutReading, IfCounters
from tgen_tui.engine.thresholds import evaluate, parse_thresholds
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import RxStats


@pytest.fixture
def block(tmp_path):
    """One worker serving p0 (sends stream 0 'up') and p1 (receives), 2 stream indexes."""
    cv = C.CounterView.create(str(tmp_path / "ctr"), n_ports=2, n_tx=1, n_streams=2, n_rx=2)
    cv.ports[0, C.P_RX_TABLE] = 0
    cv.ports[1, C.P_RX_TABLE] = 1
    cv.tx[0, C.T_STREAM] = 0
    yield cv
    cv.close()


def _ctx(path: str) -> tuple[stats.SampleContext, stats.WorkerCtx]:
    ctx = stats.SampleContext(
        ports=(
            stats.PortSetup("p0", "p0", "ns", 0, 1, 1e9, (0,)),
            stats.PortSetup("p1", "p1", "ns", 0, 1, 1e9, ()),
        ),
        streams=(stats.StreamCtx("up", 0, "p0", "p1"),),
        n_streams=2,
        warnings=("a warning",),
        dut_source="netns:x-dut",
    )
    w = stats.WorkerCtx(0, 1, ("p0", "p1"), ("up",), path, ((0, 0),))
    return ctx, w


def _live(state: str = "running", **kw) -> stats.LiveState:
    return stats.LiveState(
        t0=time.monotonic() - 1.0,
        port_state={"p0": state, "p1": state},
        port_failure={},
        port_link={"p0": "up", "p1": "up"},
        rates={0: 1000.0},
        workers={0: stats.WorkerLive(123, True, tx_path="sendmmsg")},
        **kw,
    )


def _ifc(tx: int, rx: int) -> dict:
    return {
        "ns": {
            "p0": IfCounters(0, 0, 0, tx * 60, tx, 0),
            "p1": IfCounters(rx * 60, rx, 0, 0, 0, 0),
        }
    }


def _send(cv, n: int, due: int | None = None) -> None:
    cv.tx[0, C.T_TX_FRAMES] += n
    cv.tx[0, C.T_TX_BYTES] += 60 * n
    cv.tx[0, C.T_DUE] += n if due is None else due
    cv.ports[0, C.P_TX_FRAMES] += n
    cv.ports[0, C.P_TX_BYTES] += 60 * n
    cv.ports[0, C.P_TX_DUE] += n if due is None else due


def _receive(cv, rx: RxStats, seqs: list[int], lat_ns: int = 50_000) -> None:
    n = len(seqs)
    now = 10_000_000_000
    rx.account(
        np.zeros(n, dtype=np.int64),
        np.array(seqs, dtype=np.int64),
        np.full(n, (now - lat_ns) & 0xFFFFFFFF, dtype=np.int64),
        np.full(n, now & 0xFFFFFFFF, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.full(n, 60, dtype=np.int64),
    )
    cv.ports[1, C.P_RX_FRAMES] += n
    cv.ports[1, C.P_RX_BYTES] += 60 * n


def test_sampler_counts_rates_loss_and_latency(block):
    ctx, w = _ctx(block.path)
    acc = stats.Accumulator(ctx)
    acc.attach(w)
    rx = RxStats(block.rx[1])
    acc.prime(_ifc(0, 0))
    s0 = acc.sample(stats.Readings(_ifc(0, 0), [0.0, 50.0]), _live())
    assert s0.port("p0").tx_frames == 0 and s0.stream("up").lost == 0
    _send(block, 1000, due=1010)
    _receive(block, rx, [i for i in range(1000) if i != 500])  # frame 500 lost
    time.sleep(0.05)
    s1 = acc.sample(stats.Readings(_ifc(1000, 999), [0.0, 50.0]), _live())
    up, p0, p1 = s1.stream("up"), s1.port("p0"), s1.port("p1")
    assert (up.tx_frames, up.rx_frames, up.lost, up.duplicates) == (1000, 999, 1, 0)
    assert up.due_frames == 1010 and p0.backlog == 10
    assert up.achieved_pps == pytest.approx(1000.0 * 1000 / 1010)
    assert p0.if_tx_frames == 1000 and p1.if_rx_frames == 999
    assert p0.tx_pps > 0 and p0.tx_bps == pytest.approx(p0.tx_pps * 64 * 8)
    assert up.latency_ns.min == 50_000 and up.latency_ns.max == 50_000
    assert s1.workers[0].tx_path == "sendmmsg" and s1.warnings == ("a warning",)
    # the final count (port stopped) is sent minus unique received
    s2 = acc.sample(stats.Readings(_ifc(1000, 999), []), _live("stopped"), final=True)
    assert s2.stream("up").lost == 1 and s2.final


def test_clear_of_one_stream_rebases_counts_and_sequence_floor(block):
    ctx, w = _ctx(block.path)
    acc = stats.Accumulator(ctx)
    acc.attach(w)
    rx = RxStats(block.rx[1])
    _send(block, 100)
    _receive(block, rx, list(range(100)))
    acc.clear(_ifc(100, 100), ports=set(), streams={0})
    rx.clear([0])  # the worker's receiver reset for stream 0
    # the stream goes on from sequence 100 (it was sending): floor = 100
    _send(block, 50)
    _receive(block, rx, list(range(100, 150)))
    s = acc.sample(stats.Readings(_ifc(150, 150), []), _live(seq_floor={0: 100}))
    up = s.stream("up")
    assert (up.tx_frames, up.rx_frames, up.lost, up.duplicates) == (50, 50, 0, 0)
    # port counters were not part of the clear
    assert s.port("p0").tx_frames == 150


def test_dut_fill_time_and_new_entries_per_second(block):
    ctx, w = _ctx(block.path)
    acc = stats.Accumulator(ctx)
    acc.attach(w)
    acc.sample(stats.Readings(_ifc(0, 0), [], DutReading(0, 100, 1 << 30)), _live())
    time.sleep(0.05)
    s = acc.sample(
        stats.Readings(_ifc(0, 0), [], DutReading(100, 100, 1 << 30), (("udp_timeout", "30"),)),
        _live(),
    )
    assert s.dut.conntrack_count == 100 and s.dut.full_at_s is not None
    assert s.dut.new_per_s > 0 and s.dut.fill_pct == 100.0
    assert dict(s.dut.settings) == {"udp_timeout": "30"}


def test_thresholds_on_a_result_built_from_sampled_counters(block):
    from tgen_tui.engine.result import build_result
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile_text

    compiled = compile_profile(
        load_profile_text(
            """
name: t
ports: {p0: {interface: p0}, p1: {interface: p1}}
streams:
  - {name: up, port: p0, rx_port: p1, eth: {src: "02:00:00:00:00:01", dst: "02:00:00:00:00:02"},
     ipv4: {src: 198.18.0.1, dst: 198.19.0.1}, udp: {src_port: 1, dst_port: 7}, rate: 1000pps}
"""
        )
    )
    ctx, w = _ctx(block.path)
    acc = stats.Accumulator(ctx)
    acc.attach(w)
    rx = RxStats(block.rx[1])
    _send(block, 1000)
    _receive(block, rx, list(range(990)))
    snap = acc.sample(stats.Readings(_ifc(1000, 990), []), _live("stopped"), final=True)
    typed = build_result(
        compiled, snap, duration_s=1.0, partial=False, profile_path="t.yaml", events=[], plan=[]
    )
    res = typed.to_doc()
    assert res["schema_version"] == 1
    assert res["streams"]["up"]["lost"] == 10
    breached = evaluate(parse_thresholds(["loss>0.5%", "lost>20", "p99>1ms"]), typed)
    assert [b["threshold"] for b in breached] == ["loss>0.5%"]
    assert breached[0]["value"] == pytest.approx(1.0)


def test_a_sample_right_after_a_command_takes_its_rates_over_a_longer_interval(block):
    """Workers write counters once per batch, so a sample a few ms after the last one (the
    engine samples after every command) would read one batch as a spike; its rates are
    taken against the newest sample at least MIN_RATE_DT old instead."""
    ctx, w = _ctx(block.path)
    now = [100.0]
    acc = stats.Accumulator(ctx, clock=lambda: now[0])
    acc.attach(w)
    acc.prime(_ifc(0, 0))
    acc.sample(stats.Readings(_ifc(0, 0), []), _live())
    for _ in range(2):  # 1,000 frames per 0.1 s: 10 kpps
        now[0] += 0.1
        _send(block, 1000)
        s = acc.sample(stats.Readings(_ifc(0, 0), []), _live())
    assert s.port("p0").tx_pps == pytest.approx(10_000)
    now[0] += 0.005  # a command; one 256-frame batch went out since the last sample
    _send(block, 256)
    s = acc.sample(stats.Readings(_ifc(0, 0), []), _live())
    assert s.port("p0").tx_pps == pytest.approx(1256 / 0.105)  # not 256 / 0.005 = 51,200
    now[0] += 0.095
    _send(block, 744)
    s = acc.sample(stats.Readings(_ifc(0, 0), []), _live())  # 95 ms later: long enough
    assert s.port("p0").tx_pps == pytest.approx(744 / 0.095)
    assert stats.MIN_RATE_DT <= 0.1  # never longer than the default sampling interval


def test_a_stream_counts_on_its_rx_port_only_and_says_what_arrived_elsewhere(block):
    """The issue's 2,719: the DUT's ICMP errors quote the end of the frame they answer,
    where the signature is, so p0's ring counted "up" frames sent back to p0 (up is
    received on p1). They are rx_elsewhere now, and up's counts stay within p1's."""
    from tgen_tui.engine.result import elsewhere_warnings

    ctx, w = _ctx(block.path)
    acc = stats.Accumulator(ctx)
    acc.attach(w)
    on_p1, on_p0 = RxStats(block.rx[1]), RxStats(block.rx[0])
    acc.prime(_ifc(0, 0))
    _send(block, 1000)
    _receive(block, on_p1, list(range(900)))  # 100 lost: the link went down
    now = 10_000_000_000
    on_p0.account(*(np.array(v, dtype=np.int64) for v in (
        [0, 0, 0], [950, 960, 970], [now & 0xFFFFFFFF] * 3, [now & 0xFFFFFFFF] * 3, [-1] * 3,
        [60] * 3,
    )))  # fmt: skip
    block.ports[0, C.P_RX_FRAMES] += 3
    s = acc.sample(stats.Readings(_ifc(1000, 900), []), _live("stopped"), final=True)
    up = s.stream("up")
    assert (up.rx_frames, up.rx_elsewhere, up.lost) == (900, 3, 100)
    assert up.rx_frames <= s.port("p1").if_rx_frames
    assert up.out_of_order == 0 and up.duplicates == 0  # p0's seqs 950.. did not count
    (line,) = elsewhere_warnings(s)
    assert line.startswith("stream up: 3 frames with its signature arrived on another port")
    taken = acc.take()  # blocks copied before the interfaces are read: used as they were
    _receive(block, on_p1, [900])
    s2 = acc.sample(stats.Readings(_ifc(1000, 901), []), _live("stopped"), True, pre=taken)
    assert s2.stream("up").rx_frames == 900  # the copy, not the block now
    acc.clear(_ifc(1000, 901))
    s3 = acc.sample(stats.Readings(_ifc(1000, 901), []), _live("stopped"), True, pre=taken)
    assert s3.stream("up").rx_frames == 0  # a clear since the copy: read now, rebased
