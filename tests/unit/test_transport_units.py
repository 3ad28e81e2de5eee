"""Socket flows without a lab: profile rules, the compiled flows, schedules, and every
figure of a flow from a counter row (tgen_tui.engine.flowfigures, flowsample, flowresult)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine import flowfigures as FF
from tgen_tui.engine.flowresult import flow_result, run_metrics
from tgen_tui.engine.flowsample import FlowCtx, FlowSampler, flow_stats
from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.program import Schedule
from tgen_tui.packets.schedule import is_on
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.worker import flowcounters as FC
from tgen_tui.worker import flows as WF

BASE = """\
name: t
ports: {p0: {interface: p0}, p1: {interface: p1}}
streams: []
hosts:
  p0: {netns: a-h0, ipv4: 198.18.100.2}
  p1: {netns: a-h1, ipv4: 198.19.100.2}
transport:
"""


def test_tcp_info_layout_is_232_bytes():
    assert WF.TCP_INFO_LEN == 232 == struct.calcsize(WF.TCP_INFO_FMT)
    assert len(WF._TI) == len(struct.unpack(WF.TCP_INFO_FMT, bytes(232)))
    assert WF._TI["total_retrans"] == 31 and WF._TI["delivery_rate"] == 42  # linux/tcp.h order


def test_compiled_flows_expand_parallel_flows_with_their_own_ports():
    prof = load_profile_text(
        BASE
        + "  - {name: bulk, port: p0, rx_port: p1, cc: reno, parallel: 3}\n"
        + "  - {name: bg, port: p1, rx_port: p0, protocol: udp, rate: 2M, schedule: {on: 1s, off: 2s}}\n"
    )
    flows = compile_profile(prof, rate_scale=0.5).flows
    assert [f.name for f in flows] == ["bulk.1", "bulk.2", "bulk.3", "bg"]
    assert [f.dst_port for f in flows] == [5201, 5202, 5203, 5204]
    assert flows[0].cc == "reno" and flows[0].message == 131072 and flows[0].rate_bps is None
    bg = flows[3]
    assert (bg.src_netns, bg.dst_ip, bg.port) == ("a-h1", "198.18.100.2", "p1")
    assert bg.rate_bps == 1e6 and bg.message == 1400  # 2M x --rate-scale 0.5
    assert bg.schedule.pps == pytest.approx(1e6 / (8 * 1400))
    assert (bg.schedule.on_s, bg.schedule.off_s) == (1.0, 2.0)


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("{name: u, port: p0, rx_port: p1, protocol: udp}", "needs a rate"),
        ("{name: u, port: p0, rx_port: p1, rate: 1M}", "TCP sends as fast"),
        ("{name: u, port: p0, rx_port: p2}", "unknown port"),
        ("{name: u, port: p0, rx_port: p0}", "must differ"),
        ("{name: u, port: p0, rx_port: p1, cc: 'Cubic!'}", "congestion control"),
    ],
)
def test_bad_transport_entries_name_the_field(entry, words):
    with pytest.raises(BadInput) as e:
        load_profile_text(BASE + f"  - {entry}\n")
    assert words in "\n".join(e.value.lines())


def test_a_port_without_a_host_address_is_an_error():
    text = BASE.replace("  p1: {netns: a-h1, ipv4: 198.19.100.2}\n", "")
    with pytest.raises(BadInput) as e:
        load_profile_text(text + "  - {name: u, port: p0, rx_port: p1}\n")
    assert "has no address" in "\n".join(e.value.lines())


def test_empty_streams_need_transport():
    with pytest.raises(BadInput):
        load_profile_text(BASE.replace("transport:\n", ""))


def test_on_off_schedule_from_packets_schedule():
    sched = Schedule(pps=0.0, start_s=1.0, stop_s=10.0, on_s=2.0, off_s=3.0)
    assert [is_on(sched, t) for t in (0.5, 1.0, 2.9, 3.0, 5.9, 6.0, 7.9, 9.9, 10.0)] == [
        False, True, True, False, False, True, True, False, False,
    ]  # fmt: skip
    assert is_on(Schedule(pps=0.0), 123.0)


def test_jain_fairness_and_mathis():
    assert FF.jain([5, 5, 5]) == pytest.approx(1.0)
    assert FF.jain([9, 0, 0]) == pytest.approx(1 / 3)
    assert FF.jain([]) is None and FF.jain([0, 0]) is None
    # a starved TCP flow that is due counts with 0; one its schedule has off does not
    live = [("tcp", True, 10.0), ("tcp", True, 0.0), ("tcp", False, 0.0), ("udp", True, 99.0)]
    assert FF.fairness(live) == pytest.approx(0.5)
    assert FF.fairness([("udp", True, 4.0), ("udp", True, 4.0)]) == pytest.approx(1.0)
    # MSS 1448 B, RTT 40 ms, p = 1 %: 1448 x 8 / 0.04 x 1.2247 / 0.1
    assert FF.mathis_bps(1448, 0.040, 0.01) == pytest.approx(1448 * 8 / 0.04 * math.sqrt(1.5) / 0.1)
    assert FF.mathis_bps(1448, 0.04, 0.0) is None


def test_udp_loss_is_expected_minus_received():
    assert FF.udp_loss(100, 90) == (10, 10.0)
    assert FF.udp_loss(0, 0) == (0, None)
    assert FF.udp_loss(5, 7) == (0, 0.0)  # duplicates never make a negative loss


def _row(**slots) -> np.ndarray:
    row = np.zeros(FC.FLOW_STRIDE, dtype=np.int64)
    for k, v in slots.items():
        row[getattr(FC, "FC_" + k.upper())] = v
    return row


RENO = FlowCtx(0, "r", "r", "p0", "p1", "tcp", "reno", worker=2, core=1)
UDP = FlowCtx(1, "u", "u", "p0", "p1", "udp", None, worker=3, core=1)


def test_a_tcp_flows_figures_from_its_row():
    row = _row(state=FC.STATE_SENDING, on=1, tx_bytes=5_000_000, rx_bytes=4_000_000,
               rx_bytes_due=2_500_000, active_ns=2_000_000_000, rtt_us=40_500, min_rtt_us=40_000,
               cwnd=20, mss=1448, retrans=10, data_segs_out=1000, rtt_sum_us=82_000,
               rtt_samples=2, ti_reads=5, delivery_rate=125_000, connections=1)  # fmt: skip
    f = flow_stats(RENO, row, (8e6, 9e6), alive=True)
    assert (f.state, f.on, f.goodput_bps, f.tx_bps) == ("sending", True, 8e6, 9e6)
    assert f.goodput_run_bps == 2_500_000 * 8 / 2.0  # read while due / time due
    assert (f.rtt_ms, f.min_rtt_ms, f.rtt_mean_ms, f.cwnd) == (40.5, 40.0, 41.0, 20)
    assert f.retransmit_pct == 1.0 and f.delivery_rate_bps == 1_000_000
    assert f.mathis_bps == pytest.approx(FF.mathis_bps(1448, 0.041, 0.01))
    assert f.mathis_ratio == pytest.approx(f.goodput_run_bps / f.mathis_bps)
    r = flow_result(f)  # the result's names: goodput over the run, mean RTT, final cwnd
    assert (r["goodput_bps"], r["rtt_ms"], r["cwnd_final"], r["span_s"]) == (1e7, 41.0, 20, 2.0)
    dead = flow_stats(RENO, row, (0.0, 0.0), alive=False)
    assert (dead.state, dead.on) == ("failed", False)


def test_a_udp_flows_figures_from_its_row():
    row = _row(on=1, tx_packets=100, rx_packets=90, expected=100, jitter_ns=2_000_000,
               rate_bps=1_000_000, tx_bytes=140_000, rx_bytes=126_000)  # fmt: skip
    f = flow_stats(UDP, row, (0.0, 0.0), alive=True)
    assert (f.lost, f.loss_pct, f.jitter_ms, f.requested_bps) == (10, 10.0, 2.0, 1e6)
    assert f.rtt_ms is None and f.retransmits is None


def test_the_sampler_rates_baselines_and_fairness():
    view = FC.FlowCounterView.anonymous([0])
    ctx = (RENO,)
    fs = FlowSampler(ctx)
    fs.attach(2, view)
    view.rows[0, FC.FC_RX_BYTES] = 1_000_000
    view.rows[0, FC.FC_ON] = 1
    flows, live, _, cur = fs.sample(fs.read(), None, 0.0, {2: True})
    assert flows[0].goodput_bps == 0.0 and cur[0] == (1_000_000, 0)
    view.rows[0, FC.FC_RX_BYTES] = 1_500_000
    flows, live, _, cur = fs.sample(fs.read(), cur, 0.5, {2: True})
    assert flows[0].goodput_bps == 500_000 * 8 / 0.5 and live == pytest.approx(1.0)
    fs.clear()  # a clear: the monotonic slots restart from 0
    assert fs.read()[0][FC.FC_RX_BYTES] == 0
    view.rows[0, FC.FC_RX_BYTES] = 1_600_000
    assert fs.read()[0][FC.FC_RX_BYTES] == 100_000
    fs.close()


def test_run_metrics_leave_out_a_flow_that_never_ran():
    ran = flow_result(flow_stats(RENO, _row(rx_bytes_due=1000, active_ns=10**9, ti_reads=1,
                                            rtt_us=40_000, data_segs_out=10), (0, 0), True))  # fmt: skip
    late = flow_result(flow_stats(RENO, _row(), (0, 0), True))
    assert (ran["span_s"], late["span_s"], late["goodput_bps"]) == (1.0, 0.0, 0.0)
    m = run_metrics({"a": ran, "b": late}, fairness=None)
    assert m["goodput_bps"] == ran["goodput_bps"] == 8000.0 and m["rtt_ms"] == 40.0


def test_a_mixed_profile_validates_and_hosts_of_an_unknown_port_do_not(capsys, tmp_path):
    """streams: and transport: in one profile run together; hosts: of a port that does
    not exist fail `tgen validate` with a file:line: field line, as `tgen run` would."""
    from tgen_tui.cli import main

    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED.replace("  p7: {netns: x, ipv4: 198.18.100.9}\n", ""))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    prof = compile_profile(load_profile_text(path.read_text()))
    assert [s.name for s in prof.streams] == ["s"] and [f.name for f in prof.flows] == ["t"]
    path.write_text(MIXED)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any(":9:3: hosts.p7: unknown port 'p7'" in ln for ln in err), err


MIXED = """\
name: mixed
duration: 5s
ports:
  p0: {interface: p0, netns: tgen-tester}
  p1: {interface: p1, netns: tgen-tester}
hosts:
  p0: {netns: tgen-h0, ipv4: 198.18.100.2}
  p1: {netns: tgen-h1, ipv4: 198.19.100.2}
  p7: {netns: x, ipv4: 198.18.100.9}
streams:
  - {name: s, port: p0, rx_port: p1, ipv4: {src: 198.18.0.2, dst: 198.19.0.2}, udp: {src_port: 1, dst_port: 7}, rate: 10pps}
transport:
  - {name: t, port: p0, rx_port: p1, protocol: tcp}
"""
