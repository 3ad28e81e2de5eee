"""Figures under faults (issue 36), as pure functions: a receive gap that lasts to the end
is the outage, "not recovered"; frames a tester port could not put on the wire are the
tester's loss cause; a stream is counted only on its rx_port."""

from __future__ import annotations

import numpy as np

from tgen_tui.engine import flowstats as FS
from tgen_tui.engine.snapshot import StreamStats
from tgen_tui.engine.stats import StreamCtx
from tgen_tui.worker import counters as C

S = 1_000_000_000


class _Prog:
    """The fields of a stream program that LossCauses reads."""

    def __init__(self, name: str, port: str, rx_port: str) -> None:
        self.name, self.port, self.rx_port, self.l3 = name, port, rx_port, 4


def _up_down_causes():
    """LossCauses of two streams through the DUT: up p0 -> p1, down p1 -> p0."""
    from tgen_tui.engine.losscauses import LossCauses

    return LossCauses(
        (_Prog("up", "p0", "p1"), _Prog("down", "p1", "p0")), [], None, through_dut=True
    )  # type: ignore[arg-type]


def _tx(first_s: float, last_s: float) -> np.ndarray:
    row = np.zeros(C.TX_STRIDE, dtype=np.int64)
    row[C.T_FIRST_TX_NS], row[C.T_LAST_TX_NS] = int(first_s * S), int(last_s * S)
    return row


def _rx_table(gap_s: float, gap_at_s: float, last_s: float) -> np.ndarray:
    t = np.zeros((1, 1, C.RX_STRIDE), dtype=np.int64)
    t[0, 0, C.R_MAX_GAP] = int(gap_s * S)
    t[0, 0, C.R_GAP_START] = int(gap_at_s * S)
    t[0, 0, C.R_LAST_RX_NS] = int(last_s * S)
    return t


def _read(gap_s: float, gap_at_s: float, last_s: float) -> FS.FlowRead:
    fr = FS.FlowRead(1)
    fr.add(
        np.zeros((0, C.FLOW_STRIDE), dtype=np.int64), (), _rx_table(gap_s, gap_at_s, last_s)[0:1]
    )
    return fr


SC = StreamCtx("up", 0, "p0", "p1")


def _st(rx: int, lost: int) -> StreamStats:
    return StreamStats("up", 0, "p0", "p1", rx_frames=rx, lost=lost, tx_frames=rx + lost)


def test_a_gap_that_lasts_to_the_end_is_the_outage_not_recovered():
    # sent from t=100 s to 110 s; the last frame arrived at 103 s; a 12 ms gap before
    fr = _read(0.012, 101.0, 103.0)
    st = fr.apply(_st(300, 700), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 7000.0 and st.outage_at_s == 3.0 and st.outage_recovered is False
    assert FS.outage_note(st.outage_recovered) == " (not recovered)"


def test_a_gap_that_ended_stays_the_outage_and_recovered():
    fr = _read(1.02, 102.0, 109.999)  # frames came back after 1.02 s, to the end
    st = fr.apply(_st(9000, 1000), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 1020.0 and st.outage_at_s == 2.0 and st.outage_recovered is True


def test_no_loss_no_tail_and_live_tails_need_a_quarter_second():
    fr = _read(0.001, 101.0, 109.9)  # the last 0.1 s of frames lost at the end, settled
    st = fr.apply(_st(9990, 10), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 100.0 and st.outage_recovered is False
    st = fr.apply(_st(10000, 0), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 1.0 and st.outage_recovered is True  # nothing lost: no tail
    live = fr.apply(_st(10000, 0), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=False)
    assert live.outage_ms == 1.0  # live, 0.1 s behind: frames still on the way
    fr = _read(0.001, 101.0, 109.5)
    live = fr.apply(_st(10000, 0), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=False)
    assert live.outage_ms == 500.0 and live.outage_recovered is False  # an outage going on


def test_a_stream_that_never_arrived_was_out_all_the_time():
    fr = _read(0, 0, 0)
    st = fr.apply(_st(0, 5000), SC, 1, 1, 100.0, _tx(100.5, 110.0), settled=True)
    assert st.outage_ms == 9500.0 and st.outage_at_s == 0.5 and st.outage_recovered is False
    none = fr.apply(_st(0, 5000), StreamCtx("x", 0, "p0", None), 1, 1, 100.0, _tx(100, 110), True)
    assert none.outage_ms is None  # not expected anywhere: no outage


def test_the_dut_event_line_says_not_recovered():
    from tgen_tui.engine.dut_events import attach_outages, event_line

    recs = [
        {"command": "ip link set d1 down", "at_s": 2.0, "end_s": 2.02, "took_ms": 20, "ok": True}
    ]
    attach_outages(
        recs, {"up": {"outage_ms": 7000.0, "outage_at_s": 2.01, "outage_recovered": False}}
    )
    assert recs[0]["outage_recovered"] is False
    assert event_line(recs[0]).endswith("outage 7000.0 ms (up, not recovered)")


# ---------------------------------------------------------------------- tester-side loss
def test_frames_sent_without_carrier_are_the_sending_ports_cause_never_the_duts():
    """The issue's soak: p1 sent 101,712 frames with no carrier (its interface never
    counted them) and the DUT's arp_cache discards were blamed; they are down's
    (sent by p1), matched first; the DUT's neighbour discards go to up."""
    from tgen_tui.dut.attribution import CAUSE_WORDS, StreamPath, attribute, why_line
    from tgen_tui.dut.counters import CounterReading
    from tgen_tui.engine.snapshot import DutStats, PortStats, StatsSnapshot

    arp = ("neighbour_unresolved", "arp_cache unresolved_discards", "host")
    paths = {
        "up": StreamPath("up", dut_in="d0", dut_out="d1", rx_port="p1", tx_port="p0"),
        "down": StreamPath("down", dut_in="d1", dut_out="d0", rx_port="p0", tx_port="p1"),
    }
    unsent = ("tester_tx_unsent", "sent, not transmitted by the interface", "tester p1")
    att = attribute({"up": 17_777_322, "down": 101_712}, {arp: 17_879_034, unsent: 101_712}, paths)
    assert {c.cause: c.frames for c in att.causes["down"]} == {"tester_tx_unsent": 101_712}
    assert {c.cause: c.frames for c in att.causes["up"]} == {"neighbour_unresolved": 17_777_322}
    assert att.unexplained == {"up": 0, "down": 0} and att.excess[arp] == 101_712
    assert "not put on the wire by the tester" in CAUSE_WORDS["tester_tx_unsent"]
    line = why_line(101_712, att.causes["down"], 0)
    assert line.startswith("lost 101,712: 101,712 not put on the wire by the tester")

    lc = _up_down_causes()
    assert lc.paths["down"].tx_port == "p1"
    lc.base = lc.prev = CounterReading(0.0, {}, ())
    ports = (
        PortStats("p0", "p0", "t", "stopped"),
        PortStats("p1", "p1", "t", "stopped", tx_frames=500, if_tx_frames=300, tx_unsent=200),
    )
    streams = (
        StreamStats("up", 0, "p0", "p1", lost=0),
        StreamStats("down", 1, "p1", "p0", lost=250),
    )
    snap = lc.apply(StatsSnapshot(1.0, 1, ports, streams, (), DutStats("netns:x")), lc.base)
    down = snap.stream("down")
    assert [(c.cause, c.where, c.frames) for c in down.loss_causes] == [
        ("tester_tx_unsent", "tester p1", 200)
    ]
    assert down.loss_unexplained == 50 and snap.stream("up").loss_causes == ()


def test_unsent_is_sent_minus_the_interfaces_tx_once_it_is_known():
    from tgen_tui.engine.figures import IfDelta, if_delta, tx_unsent
    from tgen_tui.engine.probes import IfCounters

    ifd = if_delta(IfCounters(0, 0, 0, 0, 900, 50), (100, 0, 0, 0, 0, 0))
    assert ifd.tx == 800 and ifd.tx_dropped == 50 and ifd.known
    assert tx_unsent(1000, ifd, settled=False, link_lost=False) == 200  # tx_dropped rose
    calm = if_delta(IfCounters(0, 0, 0, 0, 990, 0), None)
    assert tx_unsent(1000, calm, settled=False, link_lost=False) == 0  # queued, maybe
    assert tx_unsent(1000, calm, settled=True, link_lost=False) == 10
    assert tx_unsent(1000, calm, settled=False, link_lost=True) == 10
    assert tx_unsent(1000, IfDelta(), settled=True, link_lost=True) == 0  # not read: unknown
    assert tx_unsent(900, if_delta(IfCounters(0, 0, 0, 0, 990, 0), None), True, True) == 0


def test_a_drop_between_the_two_ends_of_a_veth_is_the_receivers():
    """The lab's veth counts a frame dropped on its way at both ends (the sender's
    tx_dropped, the receiver's rx_dropped): it is explained once, by the receiver."""
    from tgen_tui.dut.attribution import StreamPath, attribute
    from tgen_tui.engine.losscauses import UNSENT_COUNTER, once_on_veth

    unsent_p0 = ("tester_tx_unsent", UNSENT_COUNTER, "tester p0")
    d0_rx = ("dut_rx_drop", "rx_dropped", "d0")
    d1_tx = ("dut_tx_drop", "tx_dropped", "d1")
    p1_rx = ("tester_if_drop", "rx_dropped", "tester p1")
    raw = {unsent_p0: 806, d0_rx: 806, d1_tx: 611, p1_rx: 611}
    once = once_on_veth(raw, {"p0": "d0", "p1": "d1"})
    assert once == {unsent_p0: 0, d0_rx: 806, d1_tx: 0, p1_rx: 611} and raw[unsent_p0] == 806
    up = StreamPath("up", dut_in="d0", dut_out="d1", rx_port="p1", tx_port="p0")
    att = attribute({"up": 1417 + 100}, once, {"up": up})
    assert {c.cause: c.frames for c in att.causes["up"]} == {
        "dut_rx_drop": 806,
        "tester_if_drop": 611,
    }
    assert att.unexplained["up"] == 100  # counted twice, it would have hidden these
    # no carrier on p1 (d1 set down): most never reached d1; what d1 counted is its own
    p1_unsent = ("tester_tx_unsent", UNSENT_COUNTER, "tester p1")
    d1_rx = ("dut_rx_drop", "rx_dropped", "d1")
    assert once_on_veth({p1_unsent: 49_464, d1_rx: 378}, {"p1": "d1"})[p1_unsent] == 49_086
    assert once_on_veth({p1_unsent: 49_464, d1_rx: 378}, {}) == {p1_unsent: 49_464, d1_rx: 378}


def test_frames_that_reached_a_failed_port_are_its_cause_not_unexplained():
    """The issue's soak with a kill -9 of p1's worker: up's frames kept arriving at p1's
    interface (64,835 of them) with nothing counting them, and were "unexplained". They
    are the receiving port's cause: its interface rx less the ring's signed, unsigned and
    dropped frames, once the port failed; a port that did not fail has none."""
    from tgen_tui.dut.attribution import CAUSE_WORDS, why_line
    from tgen_tui.dut.counters import CounterReading
    from tgen_tui.engine.losscauses import uncounted_rx
    from tgen_tui.engine.snapshot import DutStats, PortStats, StatsSnapshot

    dead = PortStats(
        "p1", "p1", "t", "failed", rx_frames=234_864, rx_other=0, rx_drops=0, if_rx_frames=299_699
    )
    assert uncounted_rx(dead) == 64_835
    live = PortStats("p0", "p0", "t", "stopped", rx_frames=900, rx_other=3, if_rx_frames=1000)
    assert uncounted_rx(live) == 0  # p0's 97 are the ring's business (tp_drops), not this
    assert uncounted_rx(PortStats("p2", "p2", "t", "failed", rx_frames=9, if_rx_frames=5)) == 0

    lc = _up_down_causes()
    lc.base = lc.prev = CounterReading(0.0, {}, ())
    streams = (
        StreamStats("up", 0, "p0", "p1", lost=64_835 + 20),
        StreamStats("down", 1, "p1", "p0", lost=0),
    )
    snap = lc.apply(StatsSnapshot(1.0, 1, (live, dead), streams, (), DutStats("x")), lc.base)
    up = snap.stream("up")
    assert [(c.cause, c.where, c.frames) for c in up.loss_causes] == [
        ("tester_rx_failed", "tester p1", 64_835)
    ]
    assert up.loss_unexplained == 20 and snap.stream("down").loss_causes == ()
    assert "worker died" in CAUSE_WORDS["tester_rx_failed"]
    assert "not counted by the tester" in why_line(64_855, up.loss_causes, 20)


def test_dut_events_are_named_in_the_log_as_they_begin_and_end():
    """A --dut-event was in the result only, after the run: the log (and so the NDJSON)
    now names each as it begins, before its record exists, and as it ends, with its
    status. The channel is a real one: ``sh -c`` as the command prefix (as --dut-ssh
    would be ``ssh root@dut``), running on this host."""
    import re
    import time

    import trio

    from tgen_tui.dut.channel import DutChannel
    from tgen_tui.engine.dut_events import DutEvent, run_events

    ch = DutChannel.of(None, "sh -c")
    records: list[dict] = []
    notes: list[tuple[str, int]] = []
    events = [DutEvent(0.3, "echo two"), DutEvent(0.0, "exit 3")]
    trio.run(
        run_events,
        ch,
        events,
        time.monotonic(),
        records,
        None,
        lambda m: notes.append((m, len(records))),
    )
    assert [r["command"] for r in records] == ["exit 3", "echo two"]
    assert [n for _, n in notes] == [0, 1, 1, 2]  # each began before its record, ended after
    texts = [m for m, _ in notes]
    assert re.fullmatch(r"DUT event at 0\.\d\d s: exit 3", texts[0]), texts
    assert re.fullmatch(r"DUT event done in \d+ ms \(FAILED rc=3\): exit 3", texts[1]), texts
    assert re.fullmatch(r"DUT event at 0\.[3-9]\d s: echo two", texts[2]), texts
    assert re.fullmatch(r"DUT event done in \d+ ms \(ok\): echo two", texts[3]), texts
