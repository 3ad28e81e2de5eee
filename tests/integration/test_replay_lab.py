"""A captured mix replayed through the lab's NAT44 DUT (issue 34, Must show 1 and 3), root only.

A scapy-made capture (DNS, HTTP over TCP, an ICMP echo, a fragmented UDP datagram, a
VLAN-tagged UDP frame; 10.0.0.0/8 addresses) is sent by ``tgen run`` as a ``pcap:``
stream: rewritten onto the lab (198.18.1.0/24 inside, 198.19.1.0/24 beyond the DUT, the
tag stripped), at 10 kpps, 5 loops, unique per loop. tshark, in the DUT's namespace on
its outside interface d1, is the independent decoder: every frame leaves translated to
the DUT's public address with valid checksums (the fragmented datagram's UDP checksum
after reassembly), each flow 5 times with 5 distinct translated source ports or echo
ids; the DUT's conntrack count rises by flows x 5; the run counts every frame at p1
(those without a signature by their flow) and loses none, per flow too.

With ``tgen lab set --drop-percent 1`` (Must show 3), the run's loss is what the DUT's nft
drop counter counted, and the flows that lost frames say how many. (Must show 2, the
recorded times at the wire, is timing: benchmarks/replay_timing.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tgen_tui.lab.conntrack import conntrack_count
from tgen_tui.lab.naming import D0_MAC, P0_MAC, dut_netns

from ..unit.replay_helpers import MIX_FLOWS, make_mix

TGEN = [sys.executable, "-m", "tgen_tui"]
LOOPS = 5
#: frames per loop of each flow on d1, by (IP protocol, destination)
PER_LOOP = {
    ("17", "198.19.1.53"): 1,  # DNS
    ("6", "198.19.1.80"): 1,  # the HTTP GET
    ("1", "198.19.1.1"): 1,  # the ICMP echo
    ("17", "198.19.1.9"): 3,  # the UDP datagram in 3 fragments
    ("17", "198.19.1.7"): 1,  # the frame that was VLAN-tagged
}


@pytest.fixture(scope="module")
def lab(make_lab):
    with make_lab("nat", "r") as prefix:
        yield prefix


def _profile(prefix: str, tmp: Path, loops: int = LOOPS, pcap: str = "") -> Path:
    make_mix(tmp / "mix.pcap", syn=False)
    p = tmp / "replay.yaml"
    p.write_text(f"""
name: replay
duration: 2s
ports:
  p0: {{interface: p0, netns: {prefix}-tester}}
  p1: {{interface: p1, netns: {prefix}-tester}}
dut: {{netns: {prefix}-dut}}
streams:
  - name: mix
    port: p0
    rx_port: p1
    eth: {{src: "{P0_MAC}", dst: "{D0_MAC}"}}
    pcap: {{file: mix.pcap, loops: {loops}, unique: true{pcap}}}
    rewrite:
      ipv4: {{"10.0.0.0/24": "198.18.1.0/24", "10.1.0.0/24": "198.19.1.0/24"}}
      vlan: strip
    rate: {{pps: 10000}}
""")
    return p


def _tshark_on_d1(prefix: str, out: Path) -> subprocess.Popen:
    """tshark capturing on the DUT's d1 (in its namespace), once it says it is capturing."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", dut_netns(prefix), "tshark", "-i", "d1", "-w", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    end = time.monotonic() + 20
    for line in proc.stderr:
        if "Capturing on" in line or time.monotonic() > end:
            break
    return proc


def _fields(pcap: Path, *fields: str) -> list[list[str]]:
    opts = ["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
            "-o", "tcp.check_checksum:TRUE"]  # fmt: skip
    cp = subprocess.run(
        ["tshark", "-r", str(pcap), *opts, "-T", "fields", *[a for f in fields for a in ("-e", f)]],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [ln.split("\t") for ln in cp.stdout.splitlines()]


def test_replay_through_the_nat_is_translated_counted_and_unique(lab, tmp_path):
    prof = _profile(lab, tmp_path)
    subprocess.run(["ip", "netns", "exec", dut_netns(lab), "conntrack", "-F"],
                   capture_output=True, check=False)  # fmt: skip
    before = conntrack_count(dut_netns(lab))
    cap, out = tmp_path / "d1.pcap", tmp_path / "r.json"
    sniff = _tshark_on_d1(lab, cap)
    try:
        cp = subprocess.run(TGEN + ["run", str(prof), "--json", str(out), "--no-store", "--quiet"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
        time.sleep(1.5)  # the capture hands its last ring block over after 1 s
    finally:
        sniff.terminate()
        sniff.wait(timeout=20)
    assert cp.returncode == 0, cp.stderr
    after = conntrack_count(dut_netns(lab))
    assert after - before == MIX_FLOWS * LOOPS

    doc = json.loads(out.read_text())
    s = doc["streams"]["mix"]
    sent = sum(PER_LOOP.values()) * LOOPS
    assert (s["tx_frames"], s["rx_frames"], s["lost"]) == (sent, sent, 0)
    # per destination flow (the datagram's later fragments count with its flow)
    assert (s["flows"], s["flows_verified"]) == (MIX_FLOWS, MIX_FLOWS)
    assert all(f["lost"] == 0 and f["rx"] == f["sent"] > 0 for f in s["flow_loss"])
    assert {f["flow"]: f["sent"] for f in s["flow_loss"]} == {
        "udp 198.19.1.53:53": 5, "tcp 198.19.1.80:80": 5, "icmp 198.19.1.1": 5,
        "udp 198.19.1.9:9": 15, "udp 198.19.1.7:7": 5,
    }  # fmt: skip

    rows = _fields(cap, "eth.src", "ip.src", "ip.dst", "ip.proto", "udp.srcport",
                   "tcp.srcport", "icmp.ident", "ip.checksum.status", "udp.checksum.status",
                   "tcp.checksum.status", "icmp.checksum.status")  # fmt: skip
    out_rows = [r for r in rows if r[0] == "02:74:67:00:01:fe"]  # leaving the DUT on d1
    assert len(out_rows) == sent
    per_flow: Counter = Counter()
    sources = defaultdict(set)
    for _, src, dst, proto, usrc, tsrc, ident, ipc, udpc, tcpc, icmpc in out_rows:
        assert src == "198.19.0.1", (src, dst)  # translated to the DUT's public address
        assert ipc == "1"  # 0 bad, 1 good, 2 not checked
        l4 = [c for c in (udpc, tcpc, icmpc) if c]
        # the first two fragments carry no whole L4 segment: the last one shows the
        # reassembled datagram and its checksum
        assert l4 == ["1"] or (not l4 and dst == "198.19.1.9"), (dst, proto, l4)
        per_flow[(proto, dst)] += 1
        if l4:
            sources[(proto, dst)].add(usrc or tsrc or ident)
    assert per_flow == {k: n * LOOPS for k, n in PER_LOOP.items()}  # no flow lost a frame
    assert {k: len(v) for k, v in sources.items()} == {k: LOOPS for k in PER_LOOP}


def test_replay_with_the_dut_dropping_one_percent(lab, tmp_path):
    """Must show 3: ``tgen lab set --drop-percent 1``; every lost frame is named by the
    DUT's nft drop counter (the fragments are filtered out: the DUT drops a reassembled
    datagram as one packet, three frames), and the flows that lost frames say so."""
    prof = _profile(lab, tmp_path, loops=600, pcap=', filter: "not ip[6:2] & 0x3fff != 0"')
    out = tmp_path / "r.json"
    set_drop = TGEN + ["lab", "set", "--prefix", lab, "--drop-percent"]
    subprocess.run(set_drop + ["1"], check=True, capture_output=True)
    try:
        cp = subprocess.run(TGEN + ["run", str(prof), "--json", str(out), "--no-store", "--quiet"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    finally:
        subprocess.run(set_drop + ["0"], check=True, capture_output=True)
    assert cp.returncode in (0, 1), cp.stderr
    s = json.loads(out.read_text())["streams"]["mix"]
    assert s["tx_frames"] == 4 * 600  # DNS, the GET, the echo, the tagged frame
    assert s["lost"] == s["tx_frames"] - s["rx_frames"] > 5  # about 24
    # the DUT's nft drop explains the loss, less what a loaded host adds (its rx ring or
    # queues, each named as a cause of its own)
    (cause,) = [c for c in s["loss_causes"] if c["cause"] == "nft_rule_drop"]
    host = sum(c["frames"] for c in s["loss_causes"] if c["cause"].startswith("tester_"))
    assert s["loss_unexplained"] == 0, s["loss_causes"]
    assert abs(cause["frames"] - (s["lost"] - host)) <= 0.01 * s["lost"] + 1, s["loss_causes"]
    assert sum(f["lost"] for f in s["flow_loss"]) == s["lost"]
    assert s["flows"] == 4 and s["flows_verified"] == sum(f["lost"] == 0 for f in s["flow_loss"])


def test_a_frame_over_the_interfaces_mtu_stops_the_run_in_one_line(lab, tmp_path):
    """pcap.mtu raised past the lab's veth MTU (1500): the worker refuses the stream at
    configure, naming the frame, the file and the interface."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.utils import wrpcap

    big = Ether() / IP(src="10.0.0.1", dst="10.1.0.1") / UDP(sport=1, dport=7) / Raw(b"j" * 1700)
    small = Ether() / IP(src="10.0.0.1", dst="10.1.0.1") / UDP(sport=1, dport=7) / Raw(b"s" * 40)
    wrpcap(str(tmp_path / "jumbo.pcap"), [small, big])
    prof = tmp_path / "jumbo.yaml"
    prof.write_text(f"""
ports:
  p0: {{interface: p0, netns: {lab}-tester}}
  p1: {{interface: p1, netns: {lab}-tester}}
streams:
  - name: jumbo
    port: p0
    rx_port: p1
    pcap: {{file: jumbo.pcap, mtu: 9000}}
    rewrite: {{ipv4: {{"10.0.0.0/24": "198.18.1.0/24", "10.1.0.0/24": "198.19.1.0/24"}}}}
""")
    cp = subprocess.run(TGEN + ["run", str(prof), "--no-store", "--quiet"],
                        capture_output=True, text=True, timeout=120)  # fmt: skip
    assert cp.returncode != 0
    assert "Traceback" not in cp.stderr
    line = next(ln for ln in cp.stderr.splitlines() if "over the MTU" in ln)
    assert "frame 2 of" in line and "jumbo.pcap is 1728 B of IP" in line and "(1500 B)" in line
