"""A quiet tester kernel (issue 36, must-show 3), against a router built by hand (no tgen
lab): tester ports with the kernel's IPv6 on (link-local addresses, DAD, router
solicitations, MLD), a DUT namespace that routes IPv4 (with NAT44 from tgen dut config's
ruleset) and IPv6. During a run of profiles/router-dual-stack.yaml the tester namespace's
ICMP and ICMPv6 output counters do not move, and a tcpdump on the DUT's interfaces sees no
frame from the tester's kernel: only tgen's test frames and its responder's ARP/ND."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]
pytestmark = pytest.mark.root


def sh(*cmd: str) -> str:
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True).stdout


def icmp6_lines(ns: str) -> dict[str, int]:
    rows = sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp6").splitlines()
    return {r.split()[0]: int(r.split()[1]) for r in rows if r.startswith("Icmp6Out")}


def icmp_out(ns: str) -> tuple[int, int]:
    """(Icmp OutMsgs, Icmp6OutMsgs) of the namespace's kernel."""
    snmp = sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").splitlines()
    head, vals = [ln.split() for ln in snmp if ln.startswith("Icmp:")][:2]
    v4 = int(vals[head.index("OutMsgs")])
    v6 = next(int(ln.split()[1]) for ln in sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp6").splitlines()
              if ln.startswith("Icmp6OutMsgs"))  # fmt: skip
    return v4, v6


def kernel_frames(pcap: Path, tester_macs: set[str]) -> list[str]:
    """Frames from a tester MAC that tgen does not send: router solicitations, MLD, DAD
    (from ::), ICMP(v6) errors, anything from a link-local address."""
    from scapy.layers.inet import ICMP, IP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapReader

    bad = []
    for pkt in PcapReader(str(pcap)):
        e = pkt if isinstance(pkt, Ether) else Ether(bytes(pkt))
        if e.src.lower() not in tester_macs:
            continue
        if IPv6 in e:
            ip6 = e[IPv6]
            nh = bytes(ip6.payload)[:1]
            t = nh[0] if ip6.nh == 58 and nh else None
            if (
                ip6.src == "::"
                or ip6.src.startswith("fe80")
                or t in (1, 2, 3, 4, 130, 131, 132, 133, 143)
            ):
                bad.append(e.summary())
        elif IP in e and ICMP in e and e[ICMP].type in (3, 5, 11, 12):
            bad.append(e.summary())
    return bad


def test_the_tester_kernel_says_nothing_on_a_hand_built_router(tmp_path):
    tag = "q" + secrets.token_hex(3)[:5]
    t, d = f"{tag}-tester", f"{tag}-dut"
    dumps: list[subprocess.Popen] = []
    try:
        sh("ip", "netns", "add", t)
        sh("ip", "netns", "add", d)
        for a, b in (("p0", "d0"), ("p1", "d1")):
            sh("ip", "link", "add", f"{tag}{a}", "type", "veth", "peer", "name", f"{tag}{b}")
            sh("ip", "link", "set", f"{tag}{a}", "netns", t, "name", a)
            sh("ip", "link", "set", f"{tag}{b}", "netns", d, "name", b)
        for k, v in (("net.ipv4.ip_forward", 1), ("net.ipv6.conf.all.forwarding", 1)):
            sh("ip", "netns", "exec", d, "sysctl", "-qw", f"{k}={v}")
        for ifc, v4, v6 in (
            ("d0", "198.18.0.1/24", "2001:2::1/64"),
            ("d1", "198.19.0.1/24", "2001:2:0:1::1/64"),
        ):
            sh("ip", "-n", d, "addr", "add", v4, "dev", ifc)
            sh("ip", "-n", d, "addr", "add", v6, "dev", ifc, "nodad")
            sh("ip", "-n", d, "link", "set", ifc, "up")
        for a in ("p0", "p1"):  # the kernel's IPv6 on: link-local, DAD, RS, MLD
            sh("ip", "netns", "exec", t, "sysctl", "-qw", f"net.ipv6.conf.{a}.disable_ipv6=0")
            sh("ip", "-n", t, "link", "set", a, "up")
        prof = tmp_path / "r.yaml"
        prof.write_text((ROOT / "profiles/router-dual-stack.yaml").read_text()
                        .replace("tgen-", f"{tag}-").replace("10kpps", "2kpps"))  # fmt: skip
        # 5 s as the issue asks, not shorter: the kernel's router-solicitation timer
        # (4 s apart) armed before tgen took the ports fires while tgen owns them and
        # stops there; a 2 s run gave the ports back with it still pending, and it sent
        # its RS once the sysctls were put back (1 in 5 runs)
        nft = subprocess.run(TGEN + ["dut", "config", str(prof), "--kind", "nftables-nat44", "--format", "nft"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        subprocess.run(
            ["ip", "netns", "exec", d, "nft", "-f", "-"], input=nft, check=True, text=True
        )
        time.sleep(1.5)  # the interfaces' own start-up (DAD, the first RS) is under way
        macs = {
            sh("ip", "netns", "exec", t, "cat", f"/sys/class/net/{a}/address").strip()
            for a in ("p0", "p1")
        }
        macs = {m.lower() for m in macs}
        out = tmp_path / "r.json"
        run = subprocess.Popen(TGEN + ["run", str(prof), "--json", str(out), "--no-store", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 30  # from the moment tgen owns the ports
        while "tgen_quiet_p1" not in sh("ip", "netns", "exec", t, "nft", "list", "tables"):
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.02)
        before, b6 = icmp_out(t), icmp6_lines(t)
        for ifc in ("d0", "d1"):
            dumps.append(subprocess.Popen(["ip", "netns", "exec", d, "tcpdump", "-i", ifc, "-w",
                                           str(tmp_path / f"{ifc}.pcap"), "-U", "-q"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        # at the end of the run (its drain included): a frame the DUT forwards after tgen
        # has given the ports back is the kernel's again, as the user's own port
        after, a6 = icmp_out(t), icmp6_lines(t)
        for p in dumps:
            p.terminate()
            p.wait(5)
        doc = json.loads(out.read_text())
        assert all(s["lost"] == 0 and s["rx_frames"] > 0 for s in doc["streams"].values())
        moved = {k: a6[k] - b6.get(k, 0) for k in a6 if a6[k] != b6.get(k, 0)}
        assert after == before, f"tester kernel sent ICMP/ICMPv6: {before} -> {after}: {moved}"
        for ifc in ("d0", "d1"):
            bad = kernel_frames(tmp_path / f"{ifc}.pcap", macs)
            assert not bad, f"{ifc}: {bad[:5]}"
        tables = sh("ip", "netns", "exec", t, "nft", "list", "tables")
        assert "tgen_quiet" not in tables  # given back after the run
    finally:
        for p in dumps:
            if p.poll() is None:
                p.kill()
        for ns in (t, d):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
