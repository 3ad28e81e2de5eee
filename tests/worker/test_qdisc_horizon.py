"""The qdisc pacer's turn length: long for constant-rate ports, short for shaped ones."""

from types import SimpleNamespace as NS

from tgen_tui.worker.pacing import QDISC_LOOKAHEAD_NS, QDISC_WAKE_NS
from tgen_tui.worker.spaced import qdisc_horizon


def _port(pps, shapes):
    streams = [NS(dt=NS(shape=s)) for s in shapes]
    return NS(streams=streams, qdisc_steady=None, pacer=NS(pps=pps) if pps is not None else None)


def test_a_constant_rate_port_takes_about_1024_frames_a_turn():
    assert qdisc_horizon(_port(10_000, [None, None])) == (100_000_000, 50_000_000)  # capped
    look, wake = qdisc_horizon(_port(20_000, [None]))
    assert (look, wake) == (100_000_000, 50_000_000)  # 1024 frames: 51.2 ms, capped at 50
    look, wake = qdisc_horizon(_port(100_000, [None]))
    assert wake == 10_240_000 and look == 2 * wake
    assert qdisc_horizon(_port(10_000_000, [None])) == (2 * QDISC_WAKE_NS, QDISC_WAKE_NS)
    assert qdisc_horizon(_port(None, [None])) == (100_000_000, 50_000_000)  # before the TBF


def test_a_shaped_stream_keeps_the_short_horizon():
    p = _port(20_000, [None, "steps"])
    assert qdisc_horizon(p) == (QDISC_LOOKAHEAD_NS, QDISC_WAKE_NS)
    p.streams.pop()  # the cache follows the port's streams
    assert qdisc_horizon(p) == (100_000_000, 50_000_000)
