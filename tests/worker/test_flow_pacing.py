"""The flow worker's UDP pacer on loopback (no root): datagrams are sent when the schedule
makes them due, on/off phases from the port's start, and a rate changed live keeps those
phases (the send decision, ``is_on``, follows them too). Times are given, not waited for."""

from __future__ import annotations

import socket

import pytest

from tgen_tui.packets.flowprogram import FlowProgram, udp_pps
from tgen_tui.packets.program import Schedule
from tgen_tui.worker import flowcounters as FC
from tgen_tui.worker.flows import Flow

MSG = 1000
T0 = 10**12  # the port's start, CLOCK_MONOTONIC ns


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def flow():
    bps = 100 * MSG * 8.0  # 100 datagrams/s
    sched = Schedule(pps=udp_pps(bps, MSG), on_s=1.0, off_s=1.0)
    prog = FlowProgram(0, "u", "u", "p0", "p1", "udp", None, _free_port(), MSG, bps,
                       None, None, "127.0.0.1", "127.0.0.1", sched)  # fmt: skip
    view = FC.FlowCounterView.anonymous([0])
    f = Flow(prog, view.rows[0])
    f.open_receiver()
    f.begin(T0)
    yield f
    f.close()
    view.close()


def _at(s: float) -> int:
    return T0 + round(s * 1e9)


def _sent(f: Flow) -> int:
    return int(f.row[FC.FC_TX_PACKETS])


def test_datagrams_go_out_as_they_become_due(flow):
    assert flow.is_on(_at(0.0)) and not flow.is_on(_at(1.5)) and flow.is_on(_at(2.2))
    flow.send_udp(_at(0.5))
    assert _sent(flow) == 51  # due at 0, 10 ms, ..., 500 ms
    flow.send_udp(_at(0.999))
    assert _sent(flow) == 100  # one on phase: 100 datagrams
    flow.send_udp(_at(2.0))
    assert _sent(flow) == 101  # the next on phase's first


def test_a_live_rate_change_keeps_the_on_off_phases(flow):
    flow.send_udp(_at(0.5))
    assert _sent(flow) == 51
    flow.set_rate(200 * MSG * 8.0, _at(0.5))  # twice the rate, from 0.5 s
    flow.send_udp(_at(0.999))
    assert _sent(flow) == 51 + 99  # the rest of this on phase at 200/s, no burst
    # 1-2 s is off by the port's schedule; the next on phase starts at 2 s, at 200/s: its
    # first datagram then, not the whole phase's (the pacer's phases are the schedule's)
    flow.send_udp(_at(2.0))
    assert _sent(flow) == 151
    flow.send_udp(_at(2.5))
    assert _sent(flow) == 151 + 100
    assert int(flow.row[FC.FC_RATE_BPS]) == 200 * MSG * 8
