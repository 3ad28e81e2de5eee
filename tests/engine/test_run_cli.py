"""`tgen run` end to end in a real lab: NDJSON + JSON output, --fail-on, SIGINT, schedules,
conntrack fill. Assertions are on counts and documents, never on timing or throughput."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tgen_tui.worker.txstamps import sample_every

from .engine_helpers import profile_yaml, stream_yaml

TGEN = [sys.executable, "-m", "tgen_tui"]


@pytest.fixture(scope="module")
def nat_lab(make_lab):
    """One NAT lab for this module: its tests only send through the DUT and read counts
    that start at each run (the DUT's settings are never changed here; a test that
    changes them brings up a lab of its own)."""
    with make_lab("nat", "e") as prefix:
        yield prefix


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*TGEN, *args], capture_output=True, text=True, timeout=timeout)


def _workers_alive(parent: int) -> list[int]:
    """Worker processes spawned by ``parent`` (matched on their --parent-pid argument)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if "tgen_tui.worker" in cmd and str(parent) in cmd:
            out.append(p.pid)
    return out


def _sending(ndjson, stream: str) -> bool:
    """A snapshot in ``ndjson`` (tgen run --ndjson, being written) shows ``stream`` sent frames."""
    try:
        lines = ndjson.read_text().splitlines()
    except FileNotFoundError:
        return False
    for line in reversed(lines):
        try:
            d = json.loads(line)
        except ValueError:
            continue  # the line being written
        if "streams" in d:
            return d["streams"][stream]["tx_frames"] > 0
    return False


def test_run_writes_ndjson_and_json_matching_interface_counters(nat_lab, write_profile, tmp_path):
    streams = stream_yaml("up", "p0", rx_port="p1", pps=4000) + stream_yaml(
        "down", "p1", rx_port="p0", pps=1000, src_ports="7", extra="    schedule: {start: 300ms}\n"
    )
    prof = write_profile(profile_yaml(nat_lab, streams))
    out_json, out_nd = tmp_path / "out.json", tmp_path / "snap.ndjson"
    cp = _run(
        [
            "run",
            str(prof),
            "--duration",
            "2",
            "--json",
            str(out_json),
            "--ndjson",
            str(out_nd),
            "--quiet",
        ]
    )
    assert cp.returncode == 0, cp.stderr
    assert "Traceback" not in cp.stderr
    res = json.loads(out_json.read_text())
    assert res["partial"] is False and res["seed"] == 5 and len(res["profile_hash"]) == 64
    assert res["schema_version"] == 1 and "cluster" not in res  # no --cluster: no section
    for name in ("p0", "p1"):
        p = res["ports"][name]
        assert p["tx_frames"] == p["if_tx_frames"]
        assert p["rx_frames"] == p["if_rx_frames"]
        assert p["requested_pps"] > 0 and p["achieved_pps"] > 0
    up = res["streams"]["up"]
    assert up["tx_frames"] > 4000
    assert up["rx_frames"] == up["tx_frames"] and up["lost"] == 0
    assert set(up["latency_ns"]) >= {"min", "avg", "p50", "p99", "max"}
    assert up["latency_ns"]["p99"] is not None
    # sendmmsg (the default path): latency from the kernel's transmit timestamps, sampled
    assert res["latency_source"] == "kernel" and "SO_TIMESTAMPING" in res["latency_source_detail"]
    # 4 kfps: every 4th frame (tgen_tui.worker.txstamps.sample_every)
    assert up["latency_source"] == "kernel" and up["latency_every"] == sample_every(4000) == 4
    assert up["latency_unstamped"] == 0
    assert res["dut"]["conntrack_peak"] >= 64
    assert res["environment"]["kernel"] and res["environment"]["cpu_count"]
    every = [json.loads(x) for x in out_nd.read_text().splitlines()]
    events = [x for x in every if "event" in x]
    lines = [x for x in every if "event" not in x]
    # typed events between the snapshots: both ports went idle -> starting -> running -> ...
    states = [(e["port"], e["new"]) for e in events if e["event"] == "port_state"]
    for p in ("p0", "p1"):
        assert [n for q, n in states if q == p] == ["starting", "running", "stopping", "stopped"]
    assert len(lines) >= 10
    ts = [x["t"] for x in lines]
    assert ts == sorted(ts)
    assert {"ports", "streams", "dut", "t"} <= set(lines[0])
    assert "tx_pps" in lines[len(lines) // 2]["ports"]["p0"]


@pytest.mark.root
def test_fail_on_loss_exits_1_with_drop_and_0_without(write_profile, tmp_path):
    import secrets

    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig

    prefix = "f" + secrets.token_hex(3)[:5]
    try:
        topology.up(LabConfig(prefix=prefix, topology="nat"))
        prof = write_profile(profile_yaml(prefix, stream_yaml("up", "p0", rx_port="p1", pps=5000)))
        ok = _run(
            [
                "run",
                str(prof),
                "--duration",
                "1.5",
                "--fail-on",
                "loss>0%",
                "--quiet",
                "--json",
                "-",
            ]
        )
        assert ok.returncode == 0, ok.stderr + ok.stdout[-2000:]
        assert json.loads(ok.stdout)["breached"] == []
        topology.set_dut(prefix, drop_percent=1.0)
        bad = _run(["run", str(prof), "--duration", "1.5", "--fail-on", "loss>0%", "--json", "-"])
        assert bad.returncode == 1, bad.stderr
        res = json.loads(bad.stdout)
        assert res["breached"] and res["breached"][0]["threshold"] == "loss>0%"
        assert "FAIL loss>0%" in bad.stderr
        loss = res["streams"]["up"]["loss_pct"]
        assert 0.3 < loss < 2.5  # 1 % random drop over ~7,500 frames
    finally:
        topology.down(prefix)


def test_sigint_stops_cleanly_with_partial_json(nat_lab, write_profile, tmp_path):
    prof = write_profile(profile_yaml(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=2000)))
    out_json, nd = tmp_path / "partial.json", tmp_path / "live.ndjson"
    proc = subprocess.Popen(
        [*TGEN, "run", str(prof), "--duration", "30", "--json", str(out_json), "--quiet"]
        + ["--ndjson", str(nd)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the signal comes once frames are on the wire (a fixed sleep raced a loaded host)
        deadline = time.monotonic() + 20
        while not _sending(nd, "up") and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    res = json.loads(out_json.read_text())
    assert res["partial"] is True and res["signal"] == "SIGINT"
    assert res["duration_s"] < 20
    assert res["streams"]["up"]["tx_frames"] > 0
    assert res["ports"]["p0"]["tx_frames"] == res["ports"]["p0"]["if_tx_frames"]
    assert _workers_alive(proc.pid) == []


def test_scheduled_stream_sends_only_in_its_window(nat_lab, write_profile, tmp_path):
    streams = stream_yaml(
        "late", "p0", rx_port="p1", pps=1000, extra="    schedule: {start: 1s, stop: 2s}\n"
    )
    prof = write_profile(profile_yaml(nat_lab, streams))
    nd = tmp_path / "s.ndjson"
    cp = _run(["run", str(prof), "--duration", "3", "--ndjson", str(nd), "--quiet"])
    assert cp.returncode == 0, cp.stderr
    snaps = [json.loads(x) for x in nd.read_text().splitlines()]
    snaps = [s for s in snaps if "event" not in s]
    early = [s["streams"]["late"]["tx_frames"] for s in snaps if s["t"] < 0.9]
    late = [s["streams"]["late"]["tx_frames"] for s in snaps if s["t"] > 2.2]
    assert early and all(x == 0 for x in early)
    assert late and all(x == 1000 for x in late)  # exactly rate x window, then nothing more


@pytest.mark.root
def test_unique_flows_fill_conntrack_and_full_time_is_reported(write_profile, tmp_path):
    import secrets

    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig

    prefix = "c" + secrets.token_hex(3)[:5]
    try:
        topology.up(LabConfig(prefix=prefix, topology="nat", conntrack_max=10000))
        streams = stream_yaml(
            "init",
            "p0",
            rx_port="p1",
            pps=20000,
            src_ports="{min: 10000, max: 10199, mode: unique}",
        ).replace("dst_port: 7", "dst_port: {min: 1000, max: 1099, mode: unique}")
        prof = write_profile(profile_yaml(prefix, streams))
        cp = _run(["run", str(prof), "--duration", "2", "--json", "-", "--quiet"])
        assert cp.returncode == 0, cp.stderr
        res = json.loads(cp.stdout)
        dut = res["dut"]
        assert dut["conntrack_max"] == 10000
        # 20,000 unique flows offered, the table holds 10,000: the kernel counts a new entry
        # before it checks the limit (atomic_inc_return, then early drop), so a sample can
        # read one over it for a moment (ci66: 10,001)
        assert dut["conntrack_peak"] in (10000, 10001)
        assert dut["full_at_s"] is not None and dut["full_at_s"] > 0
    finally:
        topology.down(prefix)


@pytest.mark.root
def test_missing_lab_is_an_environment_error(write_profile):
    prof = write_profile(profile_yaml("nolab9", stream_yaml("up", "p0", rx_port="p1")))
    cp = _run(["run", str(prof), "--duration", "1"])
    assert cp.returncode == 3
    assert "tgen lab up" in cp.stderr and "Traceback" not in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1


def test_dut_probe_through_a_command_prefix(nat_lab, write_profile):
    """--dut-ssh takes any command prefix that runs a shell snippet on the DUT; here
    `ip netns exec NS sh -c` stands in for `ssh root@dut` (tests/dut/test_dut_ssh.py runs a
    real sshd)."""
    streams = stream_yaml("up", "p0", rx_port="p1", pps=2000)
    prof = write_profile(profile_yaml(nat_lab, streams, dut=False))
    cp = _run(
        [
            "run",
            str(prof),
            "--duration",
            "1",
            "--quiet",
            "--json",
            "-",
            "--dut-ssh",
            f"ip netns exec {nat_lab}-dut sh -c",
            "--flush-dut",
        ]
    )
    assert cp.returncode == 0, cp.stderr
    dut = json.loads(cp.stdout)["dut"]
    assert dut["source"].startswith("ssh:")
    assert dut["error"] is None
    assert dut["conntrack_start"] == 0  # flushed through the same prefix
    assert dut["conntrack_peak"] == 64  # the 64 source ports of the stream
    assert dut["mem_available_bytes"] > 0
    # the settings are read over the prefix too (the lab sets the UDP timeout to 120 s)
    assert dut["settings"]["udp_timeout"] == 120 and dut["settings"]["conntrack_max"] > 0
    assert dut["settings"]["topology"] is None  # a remote DUT has no builder's description


def test_missing_interface_is_one_line_exit_3(nat_lab, write_profile):
    text = profile_yaml(nat_lab, stream_yaml("up", "p0", rx_port="p1")).replace(
        "interface: p1,", "interface: p7,"
    )
    cp = _run(["run", str(write_profile(text)), "--duration", "1"])
    assert cp.returncode == 3
    lines = cp.stderr.strip().splitlines()
    assert lines == [
        f"tgen: error: port p1: no interface 'p7' in network namespace '{nat_lab}-tester' (it has: lo, p0, p1)"
    ]


def test_bursts_end_the_run_without_a_duration(nat_lab, write_profile):
    extra = "    mode: {type: multi_burst, frames: 500, bursts: 4, gap: 100ms}\n"
    prof = write_profile(
        profile_yaml(nat_lab, stream_yaml("b", "p0", rx_port="p1", pps=20000, extra=extra))
    )
    cp = _run(["run", str(prof), "--quiet", "--json", "-"], timeout=30)
    assert cp.returncode == 0, cp.stderr
    r = json.loads(cp.stdout)
    s = r["streams"]["b"]
    assert s["tx_frames"] == 2000 and s["rx_frames"] == 2000 and s["lost"] == 0
    assert r["partial"] is False
