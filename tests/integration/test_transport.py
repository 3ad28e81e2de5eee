"""Transport streams through a real lab: kernel TCP and UDP between the transport hosts,
across the DUT and the delay line. Root only; a few seconds of flows.

Asserts bytes and counts (TCP: every byte sent is received; TCP_INFO fields are present;
UDP: received <= sent), never rates or times, except that the delay line never forwards
a frame early (the smallest RTT is at least twice the delay each way).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tgen_tui.lab import commands, hosts, middlebox
from tgen_tui.lab import topology as lab

DELAY_MS = 5


def _profile(prefix: str, tmp: Path) -> Path:
    text = f"""\
name: transport-test
duration: 2s
ports:
  p0: {{interface: p0, netns: {prefix}-tester}}
  p1: {{interface: p1, netns: {prefix}-tester}}
streams: []
hosts:
  p0: {{netns: {prefix}-h0, ipv4: {hosts.H0_IP}}}
  p1: {{netns: {prefix}-h1, ipv4: {hosts.H1_IP}}}
transport:
  - {{name: bulk, port: p0, rx_port: p1, protocol: tcp, cc: reno, parallel: 2}}
  - {{name: back, port: p1, rx_port: p0, protocol: udp, rate: 1M, message: 1000,
      schedule: {{on: 500ms, off: 500ms}}}}
"""
    path = tmp / "t.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def mb_lab(make_lab):
    with make_lab("nat", "m", delay=f"{DELAY_MS}ms", tbf="50mbit", rps_cpus=None) as prefix:
        yield prefix


def _tbf_drops(prefix: str) -> int:
    """Packets the lab's TBF on e1 (the TCP flows' bottleneck) dropped so far: the kernel's count."""
    out = subprocess.run(
        ["tc", "-n", hosts.dut_netns(prefix), "-s", "-j", "qdisc", "show", "dev", hosts.E1],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sum(q.get("drops", 0) for q in json.loads(out) if q.get("kind") == "tbf")


def test_tcp_and_udp_flows_through_the_dut_and_delay_line(mb_lab, tmp_path):
    prof = _profile(mb_lab, tmp_path)
    drops_before = _tbf_drops(mb_lab)
    out, nd = tmp_path / "r.json", tmp_path / "r.ndjson"
    r = subprocess.run(
        [sys.executable, "-m", "tgen_tui", "run", str(prof), "--interval", "500ms",
         "--json", str(out), "--ndjson", str(nd), "--build", "t1", "-q"],
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    drops = _tbf_drops(mb_lab) - drops_before
    res = json.loads(out.read_text())
    st = res["transport"]["streams"]
    assert set(st) == {"bulk.1", "bulk.2", "back"}
    for name in ("bulk.1", "bulk.2"):
        s = st[name]
        assert s["tx_bytes"] > 0 and s["rx_bytes"] == s["tx_bytes"]
        assert s["goodput_bps"] > 0 and s["cc"] == "reno"
        # retransmits and their share are the same count, of the data segments sent
        assert 0 < s["data_segs_out"] and isinstance(s["retransmits"], int)
        assert s["retransmit_pct"] == pytest.approx(100 * s["retransmits"] / s["data_segs_out"])
        assert s["min_rtt_ms"] >= 2 * DELAY_MS  # the delay line never forwards early
        assert s["rtt_ms"] >= 2 * DELAY_MS
    # two reno flows overrun the 50 Mbit/s TBF, which drops their data segments; every byte
    # arrived (above), so each dropped segment was sent again: TCP_INFO's retransmits cover
    # the kernel's drop count (spurious retransmits may add to it, never take from it)
    assert drops > 0
    assert st["bulk.1"]["retransmits"] + st["bulk.2"]["retransmits"] >= drops
    u = st["back"]
    assert 0 < u["rx_packets"] <= u["tx_packets"] and u["lost"] == u["tx_packets"] - u["rx_packets"]
    assert res["metrics"]["goodput_bps"] > 0 and res["metrics"]["fairness_jain"] is not None
    lines = [json.loads(x) for x in nd.read_text().splitlines()]
    snaps = [x for x in lines if "flows" in x]  # the engine's snapshots carry the flows
    assert len(snaps) >= 3 and snaps[-1]["seq"] == max(x["seq"] for x in snaps)
    for key in ("goodput_bps", "rtt_ms", "cwnd", "retransmits", "delivery_rate_bps"):
        assert key in snaps[-1]["flows"]["bulk.1"]
    assert {"loss_pct", "jitter_ms", "on"} <= set(snaps[-1]["flows"]["back"])
    # the on/off flow is off in some intervals and on in others
    assert {s["flows"]["back"]["on"] for s in snaps} == {True, False}
    # the result copies the last snapshot's figures (one definition)
    last = snaps[-1]["flows"]["bulk.1"]
    assert st["bulk.1"]["rx_bytes"] == last["rx_bytes"]
    assert st["bulk.1"]["goodput_bps"] == pytest.approx(last["goodput_run_bps"])


def test_no_transport_hosts_unless_asked(make_lab):
    with make_lab("nat", "o", rps_cpus=None) as prefix:
        assert not commands.netns_exists(hosts.host_netns(prefix, 0))
        assert lab.status(prefix)["transport_hosts"] is None
        lab.set_dut(prefix, transport_hosts=True)
        assert lab.status(prefix)["transport_hosts"]["p0"]["netns"] == f"{prefix}-h0"


def test_middlebox_set_and_down(make_lab):
    # a delay implies the hosts, and removing the delay keeps them (bridged)
    with make_lab("nat", "n", delay="3ms", loss=1.0, rps_cpus=None) as prefix:
        st = lab.status(prefix)
        dl = st["delay_line"]
        assert dl["running"] and st["transport_hosts"]["p1"]["ipv4"] == hosts.H1_IP
        pid = dl["pid"]
        lab.set_dut(prefix, delay=None, loss=0.0)  # back to the kernel bridge
        st = lab.status(prefix)
        assert st["delay_line"] is None and not middlebox._ours(pid, prefix)
        assert st["transport_hosts"]["p1"]["netns"] == f"{prefix}-h1"
        links = {x["ifname"]: x for x in commands.ip_json(["link", "show"], netns=f"{prefix}-mb")}
        assert links["x1"].get("master") == hosts.B1 and links["y1"].get("master") == hosts.B1
        lab.set_dut(prefix, delay="2ms")
        pid = lab.status(prefix)["delay_line"]["pid"]
        lab.set_dut(prefix, transport_hosts=False)  # the delay still needs them
        assert commands.netns_exists(hosts.host_netns(prefix, 1))
    assert not commands.netns_exists(hosts.host_netns(prefix, 0))
    assert not commands.netns_exists(hosts.host_netns(prefix, 1))
    assert not commands.netns_exists(hosts.mb_netns(prefix))
    assert not middlebox._ours(pid, prefix)
