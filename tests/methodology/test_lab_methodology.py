"""The methodology verbs against lab DUTs of known capacity (root, real kernel data path).

The DUT's own limits are the reference: an nftables rate limit of 5,000 frames/s must be
found by the throughput search, and a ct count cap of 3,000 flows must fail the
connection-rate trials that need more. Numbers are counts, never timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .lab_profiles import cps_until_phase2, forward_profile, unique_profile

pytestmark = pytest.mark.root

FAST = ["--duration", "1s", "--timeout", "200ms", "--settle", "100ms", "--no-store", "--quiet"]


def tgen(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tgen_tui", *args], capture_output=True, text=True, timeout=timeout
    )


def _tx_packets(netns: str, ifname: str) -> int:
    cp = subprocess.run(
        ["ip", "netns", "exec", netns, "cat", f"/sys/class/net/{ifname}/statistics/tx_packets"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(cp.stdout)


def test_throughput_search_finds_the_rate_limit(limited_lab, tmp_path: Path):
    prof = tmp_path / "p.yaml"
    prof.write_text(forward_profile(limited_lab))
    out = tmp_path / "r.json"
    nd = tmp_path / "t.ndjson"
    cp = tgen(
        "rfc2544", "throughput", str(prof), "--max-rate", "20000", "--error", "1000",
        "--repeats", "1", "--json", str(out), "--ndjson", str(nd), "--md", str(tmp_path / "t.md"),
        "--plots", str(tmp_path / "plots"), *FAST,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    assert doc["test"] == "rfc2544-throughput" and doc["partial"] is False
    assert doc["seed"] == 11 and doc["dut"]["lab"]["rate_limit_pps"] == 5000
    assert doc["dut"]["conntrack_max"] > 0 and doc["dut"]["kernel"]
    (s,) = doc["searches"]
    assert s["l_pps"] <= 5000 <= s["h_pps"] and s["h_pps"] - s["l_pps"] <= 1000
    assert doc["summary"]["median"] == s["l_pps"] and doc["summary"]["n"] == 1
    kinds = [t["kind"] for t in s["trials"]]
    assert kinds[0] == "upper_bound" and kinds[-1] == "confirm"
    assert s["trials"][-1]["rate_pps"] == s["l_pps"]
    for t in s["trials"]:
        assert t["tx_frames"] > 0 and t["rx_frames"] + t["lost"] == t["tx_frames"]
        assert t["achieved_pps"] > 0
        p1 = t["extra"]["ports"]["p1"]
        assert p1["rx_frames"] == t["rx_frames"]
        # every frame the interface took is on the ring: signed, unsigned (ARP), or dropped
        # by the ring itself (a trial with ring drops and loss is invalid, not the DUT's);
        # but a frame that reached the interface after the trial's timeout is not on the
        # ring: it is one of the trial's lost frames
        ring = p1["rx_frames"] + p1["rx_other"] + p1["rx_drops"]
        assert ring <= p1["if_rx_frames"] <= ring + t["lost"], (p1, t["lost"])
        if p1["rx_drops"] and t["lost"]:
            assert t["valid"] is False and "RX ring dropped" in t["reason"]
        if t["verdict"] == "pass":
            assert t["lost"] == 0 and t["tx_frames"] == round(t["rate_pps"] * 1.0)
    assert s["trials"][0]["verdict"] in ("fail", "invalid")  # 20,000 fps cannot pass
    lines = [json.loads(x) for x in nd.read_text().splitlines()]
    assert len(lines) == len(s["trials"]) and all(x["event"] == "trial" for x in lines)
    assert "| frame size (B) | 64 |" in (tmp_path / "t.md").read_text()
    assert (tmp_path / "plots" / "throughput_vs_frame_size.svg").stat().st_size > 1000


def test_loss_steps_down_to_two_clean_trials(limited_lab, tmp_path: Path):
    prof = tmp_path / "p.yaml"
    prof.write_text(forward_profile(limited_lab))
    out = tmp_path / "r.json"
    cp = tgen(
        "rfc2544", "loss", str(prof), "--max-rate", "6000", "--json", str(out), *FAST,
        "--duration", "500ms",
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    (curve,) = json.loads(out.read_text())["frame_loss"]
    pts = curve["points"]
    loads = [p["load_pct"] for p in pts]
    assert loads[:2] == [100.0, 90.0] and all(
        a - b == 10 for a, b in zip(loads[:-1], loads[1:], strict=True)
    )
    assert pts[0]["flr_pct"] > 8  # 6,000 offered, 5,000 forwarded (+ the limiter's burst)
    assert [p["rate_pps"] for p in pts] == [6000, 5400, 4800, 4200]  # two lossy, two clean
    assert [p["trial"]["lost"] for p in pts[-2:]] == [0, 0]
    assert all(p["trial"]["lost"] > 0 for p in pts[:-2])
    assert pts[-1]["rate_pps"] <= 5000


def test_cps_fails_when_the_state_table_cannot_hold_n(ct_limited_lab, tmp_path: Path):
    """5,000 unique tuples through a DUT that tracks at most 3,000: no rate passes; with
    -N 2000 the search passes and conntrack rises by exactly N in passing trials."""
    prof = tmp_path / "p.yaml"
    prof.write_text(unique_profile(ct_limited_lab))
    out = tmp_path / "r.json"
    cp = tgen(
        "rfc9693", "cps", str(prof), "--max-rate", "40000", "--error", "10000",
        "--repeats", "1", "-N", "2000", "--json", str(out), *FAST,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    (s,) = doc["searches"]
    assert s["l_pps"] > 0 and doc["connections"] == 2000 and doc["unique_space"] == 5000
    for t in s["trials"]:
        if t["verdict"] == "pass":
            assert t["extra"]["conntrack"]["rise"] == 2000 and t["rx_frames"] == 2000
    cp = tgen(
        "rfc9693", "cps", str(prof), "--max-rate", "40000", "--error", "10000",
        "--repeats", "1", "--json", str(out), *FAST,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    (s,) = doc["searches"]
    assert s["status"] == "no passing rate" and s["l_pps"] == 0
    assert all(t["verdict"] != "pass" for t in s["trials"])
    assert any(t["lost"] > 0 for t in s["trials"])  # the ct count cap drops new flows


def test_bad_input_is_one_line_exit_2(tmp_path: Path):
    prof = tmp_path / "p.yaml"
    prof.write_text(forward_profile("nolab"))
    cp = tgen("rfc2544", "throughput", str(prof), "--max-rate", "fast")
    assert cp.returncode == 2
    assert cp.stderr.strip().count("\n") == 0 and "--max-rate" in cp.stderr
    cp = tgen("rfc2544", "throughput", str(prof), "--loss-tolerance", "x%")
    assert cp.returncode == 2 and "--loss-tolerance" in cp.stderr


def test_capacity_finds_conntrack_max(small_table_lab, tmp_path: Path):
    """nf_conntrack_max = 3,000 is a state table of known size: the capacity search must
    land within 5 % of it, and a trial above it fails for the table, not the rate."""
    prof = tmp_path / "p.yaml"
    prof.write_text(
        forward_profile(small_table_lab, ports="{min: 1024, max: 65535, mode: unique}").replace(
            "dst_port: 7", "dst_port: {min: 1, max: 10, mode: unique}"
        )
    )
    out = tmp_path / "r.json"
    cp = tgen(
        "rfc9693", "capacity", str(prof), "--c0", "1000", "--max-rate", "20000",
        "--error", "5000", "-E", "100", "--json", str(out), *FAST,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    cap = doc["capacity"]
    assert doc["dut"]["conntrack_max"] == 3000
    assert cap["status"] == "ok" and cap["r0"] > 0
    assert abs(cap["capacity"] - 3000) <= 150, cap
    assert cap["h_connections"] - cap["capacity"] <= 100
    passed = [s for s in cap["steps"] if s["phase"] != "R0" and s["passed"]]
    assert passed and all(
        s["trial"]["extra"]["conntrack"]["rise"] == s["connections"] for s in passed
    )


def test_sigint_writes_a_partial_report(limited_lab, tmp_path: Path):
    import signal
    import time

    prof = tmp_path / "p.yaml"
    prof.write_text(forward_profile(limited_lab))
    out = tmp_path / "r.json"
    p = subprocess.Popen(
        [sys.executable, "-m", "tgen_tui", "rfc2544", "throughput", str(prof), "--max-rate",
         "4000", "--duration", "30s", "--json", str(out), "--no-store", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # the signal comes once the upper-bound trial sends (p0's kernel counter rises): a
    # fixed sleep could land while the workers were still starting on a loaded host
    base = _tx_packets(f"{limited_lab}-tester", "p0")
    deadline = time.monotonic() + 60
    while _tx_packets(f"{limited_lab}-tester", "p0") < base + 100:
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()[1]
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    doc = json.loads(out.read_text())
    assert doc["partial"] is True and doc["signal"] == "SIGINT"
    (s,) = doc["searches"]
    assert s["status"] == "running"  # interrupted inside the upper-bound trial
    assert not list(Path("/dev/shm").glob(f"tgen-{p.pid}-*"))  # workers reaped, files gone


def test_latency_reports_tl_and_wcl_of_tagged_frames(limited_lab, tmp_path: Path):
    prof = tmp_path / "p.yaml"
    prof.write_text(forward_profile(limited_lab))
    out = tmp_path / "r.json"
    cp = tgen(
        "rfc2544", "latency", str(prof), "--rate", "2000", "--delay", "300ms", "--repeats",
        "2", "--json", str(out), *FAST,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    (fs,) = json.loads(out.read_text())["by_frame_size"]
    assert fs["rate_pps"] == 2000 and fs["delay_s"] == 0.3 and len(fs["trials"]) == 2
    for tr in fs["trials"]:
        f, t = tr["figures"], tr["trial"]
        # tagged = frames counted after the delay (the counters are cleared then)
        assert 1000 <= f["tagged"] <= 2000 - 300 * 2 + 100 and f["lost_tagged"] == t["lost"]
        assert f["penalty_ns"] == pytest.approx((1.0 - 0.3 + 0.2) * 1e9)  # (d - delay) + timeout
        if f["lost_tagged"] == 0:
            assert 0 < f["tl_ns"] <= f["wcl_ns"] < f["penalty_ns"]
        c = t["extra"]["clear"]  # frames sent between the reading and the clear are in neither
        if t["valid"]:
            assert 2000 - c["unobserved_frames_max"] <= t["tx_frames"] + c["sent_before"] <= 2000
    s = fs["summary"]
    assert s["tl_ns"]["n"] == 2 and s["wcl_ns"]["median"] >= s["tl_ns"]["median"]


def test_cps_phase2_replies_come_back_through_the_nat(plain_lab, tmp_path: Path):
    """After the search, phase 1 at l fills the table with all 5,000 tuples, then the
    Responder sends a reply to each (random order) and every one comes back to p0.
    Phase 1 itself is not under test here: on a loaded machine it can lose a few frames
    and then phase 2 is not run, so the run is repeated once in that case."""
    prof = tmp_path / "p.yaml"
    prof.write_text(unique_profile(plain_lab))
    out = tmp_path / "r.json"
    cp, doc, s, final = cps_until_phase2(tgen, prof, out, *FAST)
    assert final["kind"] == "confirm" and final["rate_pps"] == s["l_pps"] > 0
    assert final["extra"]["conntrack"]["rise"] == 5000
    p2 = final["extra"]["phase2"]
    assert p2["order"] == "random" and p2["tx_frames"] == 5000
    assert p2["rx_frames"] == 5000 and p2["lost"] == 0 and p2["verdict"] == "pass"
    assert p2["extra"]["ports"]["p0"]["if_rx_frames"] == 5000  # back on the Initiator's port
    assert s["confirmed"] is True


def test_sigint_at_any_moment_of_the_start_is_a_clean_interruption(limited_lab, tmp_path: Path):
    """A Ctrl-C while the profile loads, the owner begins or a trial's workers start
    is exit 130 (never 3: "worker could not start: cancelled"), with nothing left; once
    the run owner's signal receiver is in, the report is written, marked partial."""
    import signal
    import time

    prof = tmp_path / "p.yaml"
    prof.write_text(forward_profile(limited_lab))
    out = tmp_path / "r.json"
    for delay in (0.4, 0.9, 1.3, 1.7):
        out.unlink(missing_ok=True)
        p = subprocess.Popen(
            [sys.executable, "-m", "tgen_tui", "rfc2544", "throughput", str(prof), "--max-rate",
             "4000", "--duration", "30s", "--json", str(out), "--no-store", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 130, f"SIGINT at {delay} s: rc {p.returncode}: {err}"
        assert "could not start" not in err and "Traceback" not in err, err
        if out.exists():
            doc = json.loads(out.read_text())
            assert doc["partial"] is True and doc["signal"] == "SIGINT"
        assert not list(Path("/dev/shm").glob(f"tgen-{p.pid}-*"))
