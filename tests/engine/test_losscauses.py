"""The sampler's loss attribution on synthetic snapshots (engine/losscauses.py): tester
counters from the snapshot, DUT counters from a reading, the table, CPU and notes."""

from __future__ import annotations

from tgen_tui.dut.attribution import StreamPath
from tgen_tui.dut.counters import CounterReading
from tgen_tui.engine.losscauses import (
    FAKE_RULE,
    LossCauses,
    counters_note,
    loss_fields,
    simulated_reading,
)
from tgen_tui.engine.snapshot import DutStats, PortStats, StatsSnapshot, StreamStats

TBF = ("qdisc_drop", "qdisc tbf 1: drops", "d1")


def _snap(p1_ring_drops: int, up_lost: int, down_lost: int, dut: bool = True) -> StatsSnapshot:
    ports = (
        PortStats("p0", "p0", "t", "running"),
        PortStats("p1", "p1", "t", "running", rx_drops=p1_ring_drops, backlog=7, tx_errors=3),
    )
    streams = (
        StreamStats("up", 0, "p0", "p1", lost=up_lost),
        StreamStats("down", 1, "p1", "p0", lost=down_lost),
    )
    return StatsSnapshot(1.0, 1, ports, streams, (), DutStats("netns:x") if dut else None)


class _Prog:
    def __init__(self, name: str, port: str, rx_port: str) -> None:
        self.name, self.port, self.rx_port = name, port, rx_port
        self.l3 = 4


def _causes() -> LossCauses:
    progs = (_Prog("up", "p0", "p1"), _Prog("down", "p1", "p0"))
    lc = LossCauses(progs, [], None, through_dut=True)  # type: ignore[arg-type]
    lc.base = lc.prev = CounterReading(0.0, {TBF: 100, FAKE_RULE: 0}, ((0,) * 8,))
    lc.paths = {  # what prime learns from the lab's veth pairs
        "up": StreamPath("up", dut_in="d0", dut_out="d1", rx_port="p1"),
        "down": StreamPath("down", dut_in="d1", dut_out="d0", rx_port="p0"),
    }
    return lc


def test_tester_ring_drops_and_dut_counters_are_matched_and_tabled() -> None:
    lc = _causes()
    cpu = ((50, 0, 20, 100, 0, 0, 30, 0),)  # 200 ticks over 1 s
    lc.apply(_snap(0, 0, 0), lc.base)  # the first sample: CPU needs a span of >= 0.5 s
    reading = CounterReading(1.0, {TBF: 100 + 40, FAKE_RULE: 25}, cpu)
    snap = lc.apply(_snap(p1_ring_drops=10, up_lost=60, down_lost=20), reading)
    up, down = snap.stream("up"), snap.stream("down")
    assert {(c.cause, c.where): c.frames for c in up.loss_causes} == {
        ("tester_ring_drop", "tester p1"): 10,  # received on p1: up's alone, first
        ("qdisc_drop", "d1"): 40,
        ("nft_rule_drop", "dut"): 8,  # the rule's 25 split 10:20 by what is left
    }
    assert up.loss_unexplained == 2
    assert [(c.cause, c.frames) for c in down.loss_causes] == [("nft_rule_drop", 17)]
    assert down.loss_unexplained == 3
    rows = {(r.cause, r.where): r for r in snap.dut.counters}
    assert rows[("tester_backlog", "tester p1")].frames == 7  # shown, never a cause
    assert rows[("tester_backlog", "tester p1")].loss_cause is False
    assert (
        rows[("nft_rule_drop", "dut")].matched == 25 and rows[("nft_rule_drop", "dut")].excess == 0
    )
    assert rows[("qdisc_drop", "d1")].per_s == 40.0
    assert snap.dut.cpu[0].softirq_pct == 15.0 and snap.dut.cpu[0].idle_pct == 50.0
    assert snap.dut.counters_excess == 0 and counters_note(snap.dut) is None
    doc = loss_fields(snap)
    assert {r["cause"] for r in doc["counters"]} >= {"nft_rule_drop", "qdisc_drop"}
    assert doc["attribution_rule"].startswith("counters on fewer stream paths")


def test_counts_beyond_the_loss_are_said() -> None:
    lc = _causes()
    snap = lc.apply(_snap(0, 5, 0), CounterReading(1.0, {TBF: 100, FAKE_RULE: 9}, ()))
    assert snap.dut.counters_excess == 4
    assert "counters exceed the loss by 4 frames" in (counters_note(snap.dut) or "")


def test_without_a_dut_only_the_testers_counters_explain() -> None:
    progs = (_Prog("up", "p0", "p1"), _Prog("down", "p1", "p0"))
    lc = LossCauses(progs, [], None)  # type: ignore[arg-type]
    snap = lc.apply(_snap(8, 10, 0, dut=False), CounterReading(0.0))
    assert [(c.cause, c.frames) for c in snap.stream("up").loss_causes] == [("tester_ring_drop", 8)]
    assert snap.stream("up").loss_unexplained == 2 and snap.dut is None


def test_the_fake_reading() -> None:
    r = simulated_reading(2.0, 42, [25.0, 100.0])
    assert r.values == {FAKE_RULE: 42} and r.cpu_note and "simulated" in r.cpu_note
    assert r.cpu[0][3] == 150 and r.cpu[1][3] == 0  # idle ticks over 2 s at 100 Hz


def test_a_rule_made_after_the_baseline_counts_from_zero() -> None:
    # `tgen lab set --drop-percent 1` during a session: the rule is new, its counter
    # starts at 0 (it counted nothing before: all of it is since the start); a counter
    # of another kind missing from the baseline counts from its first value seen
    lc = _causes()
    rule = ("nft_rule_drop", "nft ip tgen_lab fwd_drop handle 9 drop", "dut")
    ip = ("ip_in_discard", "IpInDiscards", "dut")
    lc.apply(_snap(0, 0, 0), CounterReading(1.0, {TBF: 100, rule: 30, ip: 1000}, ()))
    snap = lc.apply(_snap(0, 0, 50), CounterReading(2.0, {TBF: 100, rule: 45, ip: 1005}, ()))
    assert {(c.counter, c.frames) for c in snap.stream("down").loss_causes} == {
        (rule[1], 45),
        ("IpInDiscards", 5),
    }
