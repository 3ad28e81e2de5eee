"""Sender lanes (tgen_tui.packets.lanes, worker/fanout, engine/lanes): the lanes' frames
together are the one sender's frames; each lane has its own sequence space; the engine
merges a stream's rows over lanes and receivers (counts, loss, duplicates, histograms)."""

from __future__ import annotations

import numpy as np
import pytest

from tgen_tui.engine import figures as F
from tgen_tui.engine import lanes as EL
from tgen_tui.packets.lanes import Lane, LaneBuilder, lane_count, lane_schedule
from tgen_tui.packets.program import Schedule
from tgen_tui.worker import counters as C
from tgen_tui.worker.fanout import lane_rows
from tgen_tui.worker.rxstats import RxStats

from .tgen_unit_helpers import column, frames, program_of, signature

UDP_INC = {
    "eth": {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"},
    "ipv4": {"src": "198.18.0.2", "dst": "198.19.0.2"},
    "udp": {"src_port": {"min": 10000, "max": 10255, "mode": "inc"}, "dst_port": 7},
    "size": 64,
}
UNIQUE = {
    "eth": {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"},
    "ipv4": {"src": "198.18.0.2", "dst": "198.19.0.2"},
    "udp": {
        "src_port": {"min": 1024, "max": 1024 + 255, "mode": "unique"},
        "dst_port": {"min": 2000, "max": 2000 + 255, "mode": "unique"},
    },
    "size": 64,
}


def _lane_frames(prog, lane: Lane, n: int, max_batch: int = 100) -> list[bytes]:
    b = LaneBuilder(prog, lane, max_batch=max_batch)
    out: list[bytes] = []
    k = 0
    while k < n:
        m = min(max_batch, n - k)
        buf, lens = b.build(k, m, 0)
        out += [bytes(buf[i, : lens[i]]) for i in range(m)]
        k += m
    return out


@pytest.mark.parametrize("stream", [UDP_INC, UNIQUE], ids=["inc", "unique"])
def test_lanes_send_the_one_senders_frames(stream):
    """Lane L's frame k is the one sender's frame k*N + L, but for the signature: the
    stream index + L * block, and seq = k (its own sequence space)."""
    prog = program_of(stream, index=3)
    n_lanes, block, per_lane = 2, 8, 400
    one = frames(prog, 0, n_lanes * per_lane)
    for lane in range(n_lanes):
        mine = _lane_frames(prog, Lane(lane, n_lanes, block), per_lane)
        for k, f in enumerate(mine):
            ref = one[k * n_lanes + lane]
            magic, s, seq, _ = signature(f)
            assert (s, seq) == (3 + lane * block, k)
            # headers identical (the IP checksum too; the UDP checksum covers the signature)
            assert f[:24] == ref[:24] and f[26:40] == ref[26:40] and f[42:-12] == ref[42:-12]


def test_unique_permutation_each_tuple_once_per_cycle_over_two_lanes():
    prog = program_of(UNIQUE)
    space = prog.unique_space  # 65,536 port pairs
    assert space == 65536
    seen = []
    for lane in range(2):
        b = LaneBuilder(prog, Lane(lane, 2, 1), max_batch=4096)
        for k in range(0, space // 2, 4096):
            buf, _ = b.build(k, 4096, 0)
            sp = column(buf, prog.l4_offset, 2)
            dp = column(buf, prog.l4_offset + 2, 2)
            seen.append(sp * np.uint64(65536) + dp)
    allv = np.concatenate(seen)
    assert len(allv) == space and len(np.unique(allv)) == space


def test_inc_flows_are_disjoint_between_lanes():
    prog = program_of(UDP_INC)
    ports = []
    for lane in range(2):
        buf, _ = LaneBuilder(prog, Lane(lane, 2, 1), max_batch=512).build(0, 512, 0)
        ports.append(set(column(buf, prog.l4_offset, 2).tolist()))
    assert ports[0].isdisjoint(ports[1]) and len(ports[0] | ports[1]) == 256


def test_lane_schedule_splits_rate_count_and_start():
    s = Schedule(pps=1000.0, count=11, start_s=0.5)
    a, b = (lane_schedule(s, Lane(i, 2, 1)) for i in range(2))
    assert (a.pps, b.pps) == (500.0, 500.0)
    assert (a.count, b.count) == (6, 5) and lane_count(11, Lane(0, 3, 1)) == 4
    assert a.start_s == 0.5 and b.start_s == pytest.approx(0.501)


def _rx_tables(receivers: int, rows: int) -> np.ndarray:
    """Receive tables as a worker starts them: no frame seen yet (highest seq -1), as
    worker/counters.reset_rx_gauges leaves them (zeros would read as "seq 0 seen")."""
    t = np.zeros((receivers, rows, C.RX_STRIDE), np.int64)
    t[:, :, C.R_MAX_SEQ] = -1
    t[:, :, C.R_LAT_MIN] = C.INT64_MAX
    t[:, :, C.R_LAT_MAX] = -1
    t[:, :, C.R_VLAN_LAST] = -1
    return t


class _Batch:
    def __init__(self, stream, seq):
        n = len(seq)
        self.magic = np.full(n, 0x7467, np.uint16)
        self.stream = np.asarray(stream, np.uint16)
        self.seq = np.asarray(seq, np.uint32)
        self.ts = np.zeros(n, np.uint32)
        self.rx_ns = np.full(n, 5000, np.int64)
        self.vlan = np.full(n, -1, np.int64)
        self.length = np.full(n, 60, np.int64)

    def __len__(self):
        return len(self.seq)


def test_duplicate_and_loss_on_one_lane_count_once_each():
    """Stream 1 of 4 names, 2 lanes (rows 1 and 5), 2 receivers (fanout). Lane 0 arrives
    whole, interleaved with lane 1's frames on the other receiver; lane 1's frame 7 is
    sent twice and its frame 12 is dropped: 1 duplicate, 1 lost, 0 out of order."""
    block, lanes, n = 4, 2, 20
    rxa, rxb = _rx_tables(1, block * lanes), _rx_tables(1, block * lanes)
    ra, rb = RxStats(rxa[0]), RxStats(rxb[0])
    lane0 = list(range(n))
    lane1 = [k for k in range(n) if k != 12]
    lane1.insert(lane1.index(7) + 1, 7)
    # receiver a: lane 0 frames and the even frames of lane 1 (flow hash), b the rest
    ra.add(_Batch([1] * n, lane0))
    even = [k for k in lane1 if k % 2 == 0]
    odd = [k for k in lane1 if k % 2 == 1]
    ra.add(_Batch([5] * len(even), even))
    rb.add(_Batch([5] * len(odd), odd))
    tot = F.RxTotals(block * lanes)
    tot.add(rxa)
    tot.add(rxb)
    rx = EL.merge_rx(tot, 1, block, lanes)
    sent = 2 * n
    urx = int(rx.row[C.R_FRAMES] - rx.row[C.R_DUP])
    assert int(rx.row[C.R_FRAMES]) == 2 * n  # 40 arrivals: 19 + 1 duplicate + 20
    assert int(rx.row[C.R_DUP]) == 1
    assert int(rx.row[C.R_OOO]) == 0
    assert F.lost_frames(sent, urx, rx.max_seq, 0, True) == 1
    # while sending, loss is a lower bound: a receiver's frames above the lowest highest-seq
    # of the receivers may still be on their way. Lane 0 is expected up to 19 (20 frames),
    # lane 1 up to 18 (receiver a's highest, below b's 19): 39 expected, 39 unique frames
    # received (lane 1's 19 among them), so no loss shows yet; frame 12 shows once settled
    assert F.lost_frames(sent, urx, rx.max_seq, 0, False) == 0
    assert rx.max_seq == 20 + 19 - 1  # the frames expected so far, minus one
    assert int(rx.row[C.R_HIST :].sum()) == int(rx.row[C.R_LAT_COUNT]) == 2 * n


def test_rx_rows_and_clear_rows():
    assert EL.rx_rows(2, 5, 3) == [2, 7, 12]
    assert lane_rows([1], 4, 8) == [1, 5]
    assert lane_rows(None, 4, 8) is None and lane_rows([1], 0, 8) == [1]


def test_plan_lanes_and_the_core_warning():
    plans, warn = EL.plan_lanes({"p0": ["up"], "p1": ["down"]}, {"p0": 2, "p1": 1}, [0, 1])
    assert [(p.id, p.core, p.ports, p.lane, p.lanes) for p in plans] == [
        (0, 0, ("p0",), 0, 2),
        (1, 1, ("p0",), 1, 2),
        (2, 0, ("p1",), 0, 1),
    ]
    assert any("3 workers share 2 core(s)" in w for w in warn)
    _, warn = EL.plan_lanes({"p0": ["up"]}, {"p0": 3}, [1])
    assert any("port p0 has 3 lanes but only 1 core(s)" in w for w in warn)
    assert EL.assignment_lines(plans)[1] == "worker 1: core 1: port p0 lane 1/2: streams up"


def test_a_lagging_receiver_makes_no_phantom_loss():
    """Two receivers share a lane's flows; one has read up to seq 999, the other (a busy
    core) only up to 499: the frames it has not read yet are not lost."""
    rx = _rx_tables(2, 2)
    a, b = RxStats(rx[0]), RxStats(rx[1])
    a.add(_Batch([1] * 500, list(range(0, 1000, 2))))
    b.add(_Batch([1] * 250, list(range(1, 500, 2))))
    tot = F.RxTotals(2)
    tot.add(rx[:1])
    tot.add(rx[1:])
    m = EL.merge_rx(tot, 0, 1, 2)  # stream 0, lanes rows 0 and 1 (lane 1 = row 1)
    urx = int(m.row[C.R_FRAMES])
    assert urx == 750
    assert F.lost_frames(1000, urx, m.max_seq, 0, False) == 0
    assert F.lost_frames(1000, urx, m.max_seq, 0, True) == 250  # settled: sent - received


def _lab_compiled(lanes_p0: int = 2):
    from pathlib import Path

    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile_text

    text = (Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml").read_text()
    text = text.replace("speed: 10G}", f"speed: 10G, lanes: {lanes_p0}}}", 1)
    return compile_profile(load_profile_text(text))


def test_setup_plans_lanes_rows_and_refuses_them_with_a_cluster():
    from tgen_tui.diagnostics import BadInput
    from tgen_tui.engine.options import EngineOptions, LearnSpec
    from tgen_tui.engine.setup import Setup

    s = Setup.build(_lab_compiled(2), EngineOptions(cores=[0, 1]))
    assert [(p.id, p.core, p.ports, p.lane, p.lanes) for p in s.plans] == [
        (0, 0, ("p0",), 0, 2),
        (1, 1, ("p0",), 1, 2),
        (2, 0, ("p1",), 0, 1),
    ]
    assert s.lanes == 2 and s.n_streams == 4  # 2 streams x 2 lanes: one rx row each
    assert s.ports["p0"].lanes == 2 and s.ports["p0"].worker == 0
    assert s.plan_text()[1] == "worker 1: core 1: port p0 lane 1/2: streams up"
    entries = [{"name": "p0"}]
    EL.lane_entries(entries, s.plans[1], s)
    assert entries[0]["lane"] == {"lane": 1, "lanes": 2, "block": 2}
    one = Setup.build(_lab_compiled(2), EngineOptions(cores=[0, 1], lanes=1))
    assert len(one.plans) == 2 and one.n_streams == 2 and one.lanes == 1
    with pytest.raises(BadInput, match="not supported with --cluster"):
        Setup.build(_lab_compiled(2), EngineOptions(cores=[0, 1], cluster="auto"))
    with pytest.raises(BadInput, match="a learning port has one lane"):
        Setup.build(
            _lab_compiled(2),
            EngineOptions(cores=[0, 1], learn={"p0": LearnSpec("/dev/null", (0,), 1)}),
        )
    learn = Setup.build(
        _lab_compiled(1),
        EngineOptions(cores=[0, 1], lanes=2, learn={"p1": LearnSpec("/dev/null", (0,), 1)}),
    )
    assert (learn.ports["p0"].lanes, learn.ports["p1"].lanes) == (2, 1)  # --lanes skips it


def test_lanes_option_is_checked():
    from tgen_tui.diagnostics import BadInput
    from tgen_tui.engine.cli_options import parse_lanes_option

    assert parse_lanes_option(None) is None and parse_lanes_option("2") == 2
    for bad in ("0", "65", "two"):
        with pytest.raises(BadInput, match="--lanes"):
            parse_lanes_option(bad)
