"""tx_path xdp on the real lab (root): profiles/lab.yaml through the NAT44 DUT with both
ports on the kernel's live-frames sender (the lab's d0/d1 with native XDP_PASS: ``tgen
lab up --xdp``): every frame counted sent is on the tester's interface counters, every
one arrives, none lost; and a lab without it refuses the run in one line instead of a
silent 100 % loss."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]

pytest.importorskip("tgen_tui.worker.xdplive")


def _profile(prefix: str, tmp: Path) -> Path:
    text = (ROOT / "profiles" / "lab.yaml").read_text()
    text = text.replace("netns: tgen-tester,", f"netns: {prefix}-tester, tx_path: xdp,")
    text = text.replace("netns: tgen-dut", f"netns: {prefix}-dut")
    text = text.replace("duration: 10s", "duration: 2s")
    assert text.count("tx_path: xdp") == 2
    p = tmp / "lab-xdp.yaml"
    p.write_text(text)
    return p


def _link_stats(ns: str, ifn: str) -> dict:
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", ifn],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return json.loads(out)[0]["stats64"]


@pytest.fixture(scope="module")
def xlab(make_lab):
    with make_lab("nat", "x", xdp_peers=True, conntrack_max=262144) as prefix:
        yield prefix


def test_lab_yaml_through_the_nat_on_tx_path_xdp(xlab, tmp_path):
    t_ns = f"{xlab}-tester"
    before = {p: _link_stats(t_ns, p) for p in ("p0", "p1")}
    out = tmp_path / "r.json"
    cp = subprocess.run([*TGEN, "run", str(_profile(xlab, tmp_path)), "--json", str(out),
                         "-q", "--no-store"], capture_output=True, text=True, timeout=60)  # fmt: skip
    after = {p: _link_stats(t_ns, p) for p in ("p0", "p1")}
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    up, down = doc["streams"]["up"], doc["streams"]["down"]
    assert up["tx_frames"] > 30_000 and down["tx_frames"] > 20_000
    for s in (up, down):
        # every frame sent arrives; on a loaded 2-core host a catch-up burst after a stall
        # can overflow a veth's 256-frame XDP ring (d0's, or p1's backlog): then the loss
        # is named (the receiving end's rx_dropped), never unexplained
        why = {
            k: s[k] for k in ("tx_frames", "rx_frames", "lost", "loss_causes", "loss_unexplained")
        }
        assert s["rx_frames"] + s["lost"] == s["tx_frames"] and s["loss_unexplained"] == 0, why
        named = sum(c["frames"] for c in s["loss_causes"])
        assert named == s["lost"], why
        assert {c["cause"] for c in s["loss_causes"]} <= {"dut_rx_drop", "tester_if_drop"}, why
        assert s["lost"] <= s["tx_frames"] // 20, why
    # the interface counters moved by exactly what tgen counts sent (the probe at
    # configure is refused for its size before the driver: no counter moves)
    sent = {"p0": up["tx_frames"], "p1": down["tx_frames"]}
    for p in ("p0", "p1"):
        d_tx = after[p]["tx"]["packets"] - before[p]["tx"]["packets"]
        assert d_tx == sent[p], (p, d_tx, sent[p])
        assert after[p]["tx"]["dropped"] == before[p]["tx"]["dropped"]


def test_a_peer_without_napi_refuses_the_run_in_one_line(make_lab, tmp_path):
    with make_lab("nat", "y") as prefix:
        t_ns = f"{prefix}-tester"
        before = _link_stats(t_ns, "p0")
        out = tmp_path / "r.json"
        cp = subprocess.run([*TGEN, "run", str(_profile(prefix, tmp_path)), "--json", str(out),
                             "-q", "--no-store"], capture_output=True, text=True, timeout=60)  # fmt: skip
        after = _link_stats(t_ns, "p0")
    assert cp.returncode != 0
    lines = [ln for ln in cp.stderr.splitlines() if "no NAPI" in ln]
    assert lines, cp.stderr
    assert "tgen lab up --xdp" in lines[0]
    assert "Traceback" not in cp.stderr
    assert after["tx"]["packets"] == before["tx"]["packets"]


FLOWS = """name: flows
seed: 7
duration: 10s
ports:
  p0: {{interface: p0, netns: {prefix}-tester, tx_path: xdp}}
  p1: {{interface: p1, netns: {prefix}-tester}}
dut: {{netns: {prefix}-dut}}
streams:
  - name: up
    port: p0
    rx_port: p1
    eth: {{src: "02:74:67:00:00:01", dst: "02:74:67:00:00:fe"}}
    ipv4:
      src: {{min: 198.18.0.2, max: 198.18.0.9, mode: random}}
      dst: 198.19.0.2
    udp:
      src_port: {{min: 1024, max: 1279, mode: unique}}
      dst_port: {{min: 5000, max: 5255, mode: unique}}
    size: 64
    rate: {{pps: 20000}}
    mode: {{type: burst, count: 65536}}
"""


def _ct(prefix: str, *args: str) -> str:
    return subprocess.run(["ip", "netns", "exec", f"{prefix}-dut", "conntrack", *args],
                          capture_output=True, text=True).stdout  # fmt: skip


def test_65536_flows_on_tx_path_xdp_are_the_pcaps_and_conntrack_holds_each(xlab, tmp_path):
    """A random source address (the RFC 4814 generator in the BPF program) and a unique
    port permutation (256 x 256) over 65,536 frames: the DUT's conntrack gets exactly the
    65,536 tuples ``tgen pcap`` writes for the profile (inc, random, unique and table are
    compared byte for byte with the batch builder in tests/worker/test_xdplive.py)."""
    import re

    prof = tmp_path / "flows.yaml"
    prof.write_text(FLOWS.format(prefix=xlab))
    pcap = tmp_path / "flows.pcap"
    cp = subprocess.run([*TGEN, "pcap", str(prof), "--count", "65536", "-o", str(pcap)],
                        capture_output=True, text=True)  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    rows = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "ip.src", "-e",
                           "udp.srcport", "-e", "udp.dstport"],
                          capture_output=True, text=True, check=True).stdout.split("\n")  # fmt: skip
    want = {tuple(r.split("\t")) for r in rows if r}
    assert len(want) == 65536
    _ct(xlab, "-F")
    out = tmp_path / "r.json"
    cp = subprocess.run([*TGEN, "run", str(prof), "--json", str(out), "-q", "--no-store"],
                        capture_output=True, text=True, timeout=90)  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    up = json.loads(out.read_text())["streams"]["up"]
    assert up["tx_frames"] == up["rx_frames"] == 65536 and up["lost"] == 0
    lst = _ct(xlab, "-L", "-p", "udp")
    got = set(re.findall(r"src=(198\.18\.0\.\d+) dst=198\.19\.0\.2 sport=(\d+) dport=(\d+)", lst))
    assert got == want
