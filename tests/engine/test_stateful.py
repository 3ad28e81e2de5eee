"""Stateful traffic in an ordinary `tgen run`: a `learn: true` reply stream through a NAT
that rewrites every source port, per-flow verification, and a DUT event's outage."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .engine_helpers import profile_yaml, stream_yaml

TGEN = [sys.executable, "-m", "tgen_tui"]
FLOWS = 64  # stream_yaml's source ports 10000..10063
UNIQUE = "{min: 10000, max: 10199, mode: unique}"


@pytest.fixture(scope="module")
def random_nat_lab(make_lab):
    with make_lab("nat", "s", nat_ports="random") as prefix:
        yield prefix


def _profile(prefix: str, write_profile) -> str:
    streams = stream_yaml("up", "p0", rx_port="p1", pps=5000) + stream_yaml(
        "down", "p1", rx_port="p0", pps=5000, src_ports="7", extra="    learn: true\n"
    )
    return str(write_profile(profile_yaml(prefix, streams)))


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([*TGEN, *args], capture_output=True, text=True, timeout=90)


def test_learn_reply_stream_through_random_nat_ports(random_nat_lab, write_profile, tmp_path):
    out, nd = tmp_path / "r.json", tmp_path / "r.ndjson"
    cp = _run(
        ["run", _profile(random_nat_lab, write_profile), "-d", "2", "--flush-dut"]
        + ["--json", str(out), "--ndjson", str(nd), "--quiet"]
    )
    assert cp.returncode == 0, cp.stderr
    res = json.loads(out.read_text())
    up, down = res["streams"]["up"], res["streams"]["down"]
    # the NAT chose its own ports: only replies to the learned tuples come back
    for s in (up, down):
        assert s["tx_frames"] > 1000 and s["rx_frames"] == s["tx_frames"] and s["lost"] == 0
    assert down["learned"] == FLOWS
    assert len(down["learned_samples"]) == 5
    assert all(x.startswith("198.19.0.1:") for x in down["learned_samples"])
    assert up["flows"] == FLOWS and up["flows_verified"] == FLOWS
    lat = up["setup_latency_ns"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]
    for s in (up, down):  # frames arrived all along: the longest gap is one interval or more
        assert s["outage_ms"] > 0 and s["outage_at_s"] is not None
    assert res["dut"]["conntrack_rise"] == FLOWS
    _live_figures_rise_to_n(nd, res)


def _live_figures_rise_to_n(nd, res) -> None:
    """The NDJSON snapshots carry learned and flows_verified while the run goes on: never
    falling, reaching N before the end, and the result's figures are the last snapshot's."""
    snaps = [d for d in map(json.loads, nd.read_text().splitlines()) if "streams" in d]
    learned = [d["streams"]["down"]["learned"] for d in snaps]
    verified = [d["streams"]["up"]["flows_verified"] for d in snaps]
    assert all(x is not None for x in learned + verified), (learned, verified)
    assert learned == sorted(learned) and verified == sorted(verified)
    assert learned[-1] == FLOWS and verified[-1] == FLOWS
    assert FLOWS in verified[:-2] and FLOWS in learned[:-2]  # live: before the final ones
    flows = [d["streams"]["up"]["flows"] for d in snaps]
    assert flows == sorted(flows) and flows[-1] == FLOWS
    last = snaps[-1]["streams"]
    for name, keys in (
        ("up", ("flows", "flows_verified", "setup_latency_ns", "outage_ms", "outage_at_s")),
        ("down", ("learned", "learned_samples", "outage_ms", "outage_at_s")),
    ):
        for k in keys:
            assert res["streams"][name][k] == last[name][k], (name, k)


DROP = (
    "nft 'add table inet tgenev; add chain inet tgenev block "
    "{ type filter hook forward priority -300; policy drop; }' "
    "&& sleep 0.5 && nft delete table inet tgenev"
)


def test_dut_event_outage_is_reported_next_to_it(random_nat_lab, write_profile, tmp_path):
    out = tmp_path / "r.json"
    cp = _run(
        ["run", _profile(random_nat_lab, write_profile), "-d", "2.5", "--flush-dut"]
        + ["--dut-event", f"1s: {DROP}", "--json", str(out)]
    )
    assert cp.returncode == 0, cp.stderr
    res = json.loads(out.read_text())
    (ev,) = res["dut_events"]
    assert ev["ok"] and ev["rc"] == 0 and ev["scheduled_s"] == 1.0
    assert ev["outage_stream"] in ("up", "down")
    assert "DUT event at" in cp.stdout and "outage" in cp.stdout
    for name in ("up", "down"):
        s = res["streams"][name]
        # frames sent while forwarding was off are lost, and counted as lost
        assert s["lost"] > 0 and s["rx_frames"] + s["lost"] == s["tx_frames"]
        assert s["outage_ms"] > 0 and s["outage_at_s"] is not None
    assert ev["outage_ms"] == max(res["streams"][n]["outage_ms"] for n in ("up", "down"))
    # the DUT is left as it was: no table of the event remains
    ls = subprocess.run(
        ["ip", "netns", "exec", f"{random_nat_lab}-dut", "nft", "list", "tables"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "tgenev" not in ls.stdout


def test_run_opens_tcp_connections_carries_data_and_resets_them(
    random_nat_lab, write_profile, tmp_path
):
    """tcp.handshake in an ordinary run: 64 connections ESTABLISHED through the NAT with
    tcp_loose=0, data both ways with no loss, then RST: every entry CLOSE."""
    from tgen_tui.dut.channel import DutChannel

    DutChannel(netns=f"{random_nat_lab}-dut").check(
        "sysctl -qw net.netfilter.nf_conntrack_tcp_loose=0"
    )
    tcp_up = "    tcp:\n      src_port: {min: 10000, max: 10063, mode: inc}\n      dst_port: 80\n"
    tcp_up += "      handshake: true\n      teardown: rst\n"
    up = stream_yaml("up", "p0", rx_port="p1", pps=2000)
    down = stream_yaml(
        "down", "p1", rx_port="p0", pps=2000, src_ports="7", extra="    learn: true\n"
    )
    up = up.replace(
        "    udp:\n      src_port: {min: 10000, max: 10063, mode: inc}\n      dst_port: 7\n", tcp_up
    )
    down = down.replace("    udp:\n", "    tcp:\n")
    text = profile_yaml(random_nat_lab, up + down).replace("size: 64", "size: 70")
    out = tmp_path / "r.json"
    cp = _run(["run", str(write_profile(text)), "-d", "1", "--flush-dut", "--json", str(out)])
    assert cp.returncode == 0, cp.stderr
    res = json.loads(out.read_text())
    tcp = res["tcp"]
    assert tcp["connections"] == FLOWS and tcp["established"] == FLOWS
    for ph in ("syn", "synack", "ack"):
        assert tcp["handshake"][ph]["tx"] == tcp["handshake"][ph]["rx"] == FLOWS
    assert tcp["teardown_batches"]["rst"]["rx"] == FLOWS
    assert tcp["states_after_teardown"] == {"CLOSE": FLOWS}
    for name in ("up", "down"):
        s = res["streams"][name]
        assert s["tx_frames"] > 500 and s["rx_frames"] == s["tx_frames"] and s["lost"] == 0
    assert res["streams"]["down"]["learned"] == FLOWS
    assert res["streams"]["up"]["flows_verified"] == FLOWS
    assert "ESTABLISHED after the handshakes" in cp.stdout


def test_dut_event_text_is_time_colon_command():
    from tgen_tui.diagnostics import BadInput
    from tgen_tui.engine.dut_events import parse_dut_event

    ev = parse_dut_event("1.5s: nft -f /etc/nft.conf")
    assert ev.at_s == 1.5 and ev.command == "nft -f /etc/nft.conf"
    for bad in ("5s", "5s:", "soon: x", "-1s: x"):
        with pytest.raises(BadInput):
            parse_dut_event(bad)


def test_rfc9693_cps_tcp_handshakes_then_fin_teardown(random_nat_lab, tmp_path):
    """TCP connections through the random-port NAT with tcp_loose=0: N ESTABLISHED after
    the handshakes, all in TIME_WAIT after the FIN teardown."""
    from tgen_tui.dut.channel import DutChannel
    from tgen_tui.session.tcpsegments import tcp_states

    n = 200
    dut = DutChannel(netns=f"{random_nat_lab}-dut")
    dut.check("sysctl -qw net.netfilter.nf_conntrack_tcp_loose=0")
    prof = tmp_path / "st.yaml"
    prof.write_text(
        profile_yaml(
            random_nat_lab, stream_yaml("initiator", "p0", rx_port="p1", pps=5000, src_ports=UNIQUE)
        )
    )
    out = tmp_path / "cps.json"
    cp = subprocess.run(
        [*TGEN, "rfc9693", "cps", str(prof), "--quick", "--max-rate", "2k", "--error", "2k"]
        + ["-N", str(n), "--repeats", "1", "--proto", "tcp", "--json", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 0, cp.stderr
    trials = json.loads(out.read_text())["searches"][0]["trials"]
    # a trial whose batches the loaded host could not pace is invalid (the search goes
    # lower), but its connections still complete: judge the DUT's states, not the timing
    done = [x for x in trials if "tcp_states_after_teardown" in x["extra"]]
    assert done, [x["reason"] for x in trials]
    ex = done[-1]["extra"]
    assert ex["tcp_established"] == n
    assert ex["tcp"]["packets_per_connection"] == 7
    for ph in ("syn", "synack", "ack", "fin", "ack_r", "fin_r", "last"):
        assert ex["tcp"]["phases"][ph]["tx"] == ex["tcp"]["phases"][ph]["rx"] == n
    assert ex["tcp_states_after_teardown"] == {"TIME_WAIT": n}
    if done[-1] is trials[-1]:
        assert tcp_states(dut) == {"TIME_WAIT": n}
