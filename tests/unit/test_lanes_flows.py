"""Sender lanes split a stream by flow (tgen_tui.packets.flowsplit): with fixed, inc, dec
and unique fields every flow (5-tuple) is sent by one lane only, in the one sender's
order, also when the lane count does not divide the flow period; the lanes' frames
together are the one sender's frames. Random fields are split by frame, and said so."""

from __future__ import annotations

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tgen_tui.packets.flowsplit import LaneSplit, flow_period, split_warnings
from tgen_tui.packets.lanes import Lane, LaneBuilder, lane_schedule
from tgen_tui.packets.program import Schedule

from .tgen_unit_helpers import frames, program_of

ETH = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}


def _stream(ipv4: dict, udp: dict) -> dict:
    return {"eth": ETH, "ipv4": ipv4, "udp": udp, "size": 64}


ADDR = {"src": "198.18.0.2", "dst": "198.19.0.2"}
STREAMS = {
    # P = lcm(5, 3) = 15 flows: 2 and 4 lanes do not divide it
    "inc-dec": _stream(
        ADDR,
        {
            "src_port": {"min": 10000, "max": 10004, "mode": "inc"},
            "dst_port": {"min": 7, "max": 9, "mode": "dec"},
        },
    ),  # fmt: skip
    # an inc address range of 7 and ports stepping by 4 over 10 values (period 5): P = 35
    "ip-step": _stream(
        {"src": {"min": "198.18.0.10", "max": "198.18.0.16", "mode": "inc"}, "dst": "198.19.0.2"},
        {"src_port": {"min": 1000, "max": 1009, "mode": "inc", "step": 4}, "dst_port": 7},
    ),
    # a unique permutation of 7 x 3 = 21 port pairs
    "unique": _stream(
        ADDR,
        {
            "src_port": {"min": 1024, "max": 1030, "mode": "unique"},
            "dst_port": {"min": 2000, "max": 2002, "mode": "unique"},
        },
    ),  # fmt: skip
}
PERIODS = {"inc-dec": 15, "ip-step": 35, "unique": 21}


def _tuples(raw: list[bytes]) -> list[tuple]:
    out = []
    for f in raw:
        p = Ether(f)
        out.append((p[IP].src, p[IP].dst, p[IP].proto, p[UDP].sport, p[UDP].dport))
    return out


def _lane_raw(prog, lane: Lane, n: int, batch: int = 7) -> list[bytes]:
    b = LaneBuilder(prog, lane, max_batch=batch)
    out: list[bytes] = []
    for k in range(0, n, batch):
        m = min(batch, n - k)
        buf, lens = b.build(k, m, 0)
        out += [bytes(buf[i, : lens[i]]) for i in range(m)]
    return out


@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("n_lanes", [2, 3, 4])
def test_each_flow_on_one_lane_and_the_union_is_the_one_sender(name, n_lanes):
    prog = program_of(STREAMS[name])
    period = flow_period(prog)
    assert period == PERIODS[name]
    total = 3 * period + 4  # three cycles and a part
    one = _tuples(frames(prog, 0, total))
    assert len(set(one)) == period  # P distinct flows, each once per cycle
    by_index: dict[int, tuple] = {}
    owner: dict[tuple, int] = {}
    for lane in range(n_lanes):
        b = LaneBuilder(prog, Lane(lane, n_lanes, 1))
        count = b.split.count(total)
        idx = b.split.index(np.arange(count, dtype=np.uint64)).tolist()
        assert idx == sorted(idx)  # the lane sends in the one sender's order
        mine = _tuples(_lane_raw(prog, Lane(lane, n_lanes, 1), count))
        for i, t in zip(idx, mine, strict=True):
            assert owner.setdefault(t, lane) == lane, f"{t} on lanes {owner[t]} and {lane}"
            assert i not in by_index
            by_index[i] = t
    assert sorted(by_index) == list(range(total))
    assert [by_index[i] for i in range(total)] == one
    assert len(owner) == period


def test_lane_schedules_share_rate_and_count_by_flows():
    prog = program_of(STREAMS["inc-dec"])  # 15 flows over 2 lanes: 8 and 7
    s = Schedule(pps=1500.0, count=100, start_s=0.0)
    got = []
    for lane in range(2):
        b = LaneBuilder(prog, Lane(lane, 2, 1))
        got.append(lane_schedule(s, Lane(lane, 2, 1), b.split))
    assert [g.pps for g in got] == [800.0, 700.0]
    assert [g.count for g in got] == [53, 47] and sum(g.count for g in got) == 100
    # 256 flows over 2 lanes (lab.yaml): the plain frame split, as before
    even = LaneSplit(1, 2, 256)
    assert not even.by_flow and even.share == 0.5 and even.count(11) == 5
    assert even.index(np.arange(3, dtype=np.uint64)).tolist() == [1, 3, 5]


def test_random_fields_and_too_few_flows_are_said():
    rnd = program_of(
        _stream(ADDR, {"src_port": {"min": 1, "max": 999, "mode": "random"}, "dst_port": 7})
    )
    one = program_of(_stream(ADDR, {"src_port": 5, "dst_port": 7}))
    inc = program_of(STREAMS["inc-dec"])
    assert flow_period(rnd) is None and flow_period(one) == 1
    w = split_warnings([rnd, one, inc], {"p0": 2})
    assert len(w) == 2
    assert w[0].startswith("stream s: random fields over 2 lanes of port p0: split by frame")
    assert w[1] == (
        "stream s: 1 flow(s) over 2 lanes of port p0: each flow stays on one lane, so 1 "
        "lane(s) send none of it"
    )
    assert split_warnings([rnd, one], {"p0": 1}) == []
    # a one-flow stream's second lane sends nothing: count 0, and the first sends it all
    sch = Schedule(pps=1000.0, count=10)
    lanes = [LaneBuilder(one, Lane(i, 2, 1)).split for i in range(2)]
    a, b = (lane_schedule(sch, Lane(i, 2, 1), lanes[i]) for i in range(2))
    assert (a.pps, a.count, b.count) == (1000.0, 10, 0)
