"""Transport streams without a lab: profile rules, schedules and the per-run figures."""

from __future__ import annotations

import math
import struct

import pytest

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine import transport_stats as ts
from tgen_tui.engine.transport_run import plan_flows
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.worker import transport_flow as tf

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
    assert tf.TCP_INFO_LEN == 232 == struct.calcsize(tf.TCP_INFO_FMT)
    assert len(tf._TI_NAMES) == len(struct.unpack(tf.TCP_INFO_FMT, bytes(232)))


def test_plan_expands_parallel_flows_with_their_own_ports():
    prof = load_profile_text(
        BASE
        + "  - {name: bulk, port: p0, rx_port: p1, cc: reno, parallel: 3}\n"
        + "  - {name: bg, port: p1, rx_port: p0, protocol: udp, rate: 2M, schedule: {on: 1s, off: 2s}}\n"
    )
    groups = plan_flows(prof)
    assert [[f["name"] for f in g] for g in groups] == [["bulk.1", "bulk.2", "bulk.3"], ["bg"]]
    flows = [f for g in groups for f in g]
    assert len({f["port"] for f in flows}) == 4
    assert flows[0]["cc"] == "reno" and flows[0]["msg"] == 131072
    assert flows[3]["src_ns"] == "a-h1" and flows[3]["dst_ip"] == "198.18.100.2"
    assert flows[3]["rate_bps"] == 2e6 and flows[3]["msg"] == 1400


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


def test_on_off_schedule():
    sched = (1.0, 10.0, 2.0, 3.0)  # start 1 s, stop 10 s, on 2 s / off 3 s
    assert [tf.is_on(t, *sched) for t in (0.5, 1.0, 2.9, 3.0, 5.9, 6.0, 7.9, 9.9)] == [
        False, True, True, False, False, True, True, False,
    ]  # fmt: skip
    assert tf.active_time(0.5, *sched) == 0
    assert tf.active_time(6.0, *sched) == 2.0  # one full on period
    assert tf.active_time(20.0, *sched) == 2.0 + 2.0  # on 1-3, 6-8; stop at 10


def test_jain_and_mathis():
    assert ts.jain([5, 5, 5]) == pytest.approx(1.0)
    assert ts.jain([9, 0, 0]) == pytest.approx(1 / 3)
    assert ts.jain([]) is None
    # MSS 1448 B, RTT 40 ms, p = 1 %: 1448 x 8 / 0.04 x 1.2247 / 0.1
    assert ts.mathis_bps(1448, 0.040, 0.01) == pytest.approx(1448 * 8 / 0.04 * math.sqrt(1.5) / 0.1)
    assert ts.mathis_bps(1448, 0.04, 0.0) is None


def _ti(**kw) -> dict:
    base = dict.fromkeys(tf.TI_REPORTED, 0)
    return base | kw


def test_interval_and_run_figures():
    prev = {"id": 0, "tx_bytes": 1000, "rx_bytes": 500, "tcp_info": _ti(total_retrans=2)}
    cur = {
        "id": 0, "tx_bytes": 3000, "rx_bytes": 2500,
        "tcp_info": _ti(rtt=40500, rttvar=1000, snd_cwnd=20, total_retrans=5, delivery_rate=125000),
    }  # fmt: skip
    f = ts.interval_figures(prev, cur, 0.5)
    assert f["goodput_bps"] == 2000 * 8 / 0.5
    assert (f["rtt_ms"], f["cwnd"], f["retransmits"]) == (40.5, 20, 3)
    assert f["delivery_rate_bps"] == 1_000_000
    udp = {"id": 1, "tx_bytes": 0, "rx_bytes": 0, "rx_packets": 90, "expected": 100,
           "tx_packets": 100, "jitter_ns": 2_000_000}  # fmt: skip
    assert ts.interval_figures(None, udp, 1.0)["loss_pct"] == 10.0
    spec = {"proto": "tcp", "cc": "reno", "start": 0.0, "stop": None}
    final = cur | {"tcp_info": _ti(rtt=40000, min_rtt=40000, snd_mss=1448, total_retrans=10,
                                   data_segs_out=1000)}  # fmt: skip
    s = ts.flow_summary(spec, final, [40.0, 42.0], run_s=2.0)
    assert s["goodput_bps"] == 2500 * 8 / 2.0 and s["retransmits"] == 10 and s["rtt_ms"] == 41.0
    assert s["mathis_bps"] == pytest.approx(ts.mathis_bps(1448, 0.041, 0.01))
    assert s["mathis_ratio"] == pytest.approx(s["goodput_bps"] / s["mathis_bps"])
    m = ts.run_metrics({"a": s})
    assert m["goodput_bps"] == s["goodput_bps"] and m["retransmits"] == 10


def test_a_flow_that_never_started_does_not_count():
    early = {"proto": "tcp", "cc": "cubic", "start": 0.0, "stop": None}
    late = {"proto": "tcp", "cc": "cubic", "start": 5.0, "stop": None}
    ti = _ti(rtt=40000, snd_mss=1448, data_segs_out=100)
    a = ts.flow_summary(early, {"rx_bytes": 1000, "tx_bytes": 1000, "tcp_info": ti}, [], 2.0)
    b = ts.flow_summary(late, {"rx_bytes": 0, "tx_bytes": 0, "tcp_info": ti}, [], 2.0)
    assert (a["span_s"], b["span_s"], b["goodput_bps"]) == (2.0, 0.0, 0.0)
    m = ts.run_metrics({"a": a, "b": b})
    assert m["fairness_jain"] == pytest.approx(1.0) and m["goodput_bps"] == a["goodput_bps"]


def test_a_flow_without_reports_still_summarises():
    """A worker that died sent no final: its flows have bytes only, and the run goes on."""
    spec = {"proto": "tcp", "cc": "reno", "start": 0.0, "stop": None}
    s = ts.flow_summary(spec, {}, [], 2.0)
    assert s["goodput_bps"] == 0 and "rtt_ms" not in s
    assert ts.run_metrics({"x": s})["goodput_bps"] == 0


@pytest.mark.parametrize(
    "extra", [["--fail-on", "loss>0"], ["--rate-scale", "2"], ["--ports", "p0"], ["--lanes", "2"]]
)
def test_run_options_a_transport_run_cannot_honour_are_refused(extra, capsys):
    from tgen_tui.cli import main

    assert main(["run", "profiles/tcp-rules.yaml", "-d", "1", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and extra[0] in err and "transport" in err, err


def test_the_transport_console_refuses_options_it_cannot_honour(capsys):
    from tgen_tui.cli import main

    assert main(["tui", "profiles/tcp-rules.yaml", "--lanes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--lanes" in err and "transport" in err, err
    assert main(["run", "profiles/tcp-rules.yaml", "-d", "1", "--interval", "50ms"]) == 2
    assert "--interval" in capsys.readouterr().err


def test_validate_refuses_what_run_would_refuse(capsys, tmp_path):
    """A profile with both streams: and transport:, and hosts: of a port that does not
    exist, fail `tgen validate` with file:line: field lines, as `tgen run` would."""
    from tgen_tui.cli import main

    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any(":9:3: hosts.p7: unknown port 'p7'" in ln for ln in err), err
    assert any(":12:1: transport: streams: and transport:" in ln for ln in err), err


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
