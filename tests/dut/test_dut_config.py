"""``tgen dut config``: the DUT configuration generated from a profile.

Offline: the plan of profiles/nat44-stateful.yaml (addresses, the conntrack size at
1.342 x its 40,000 connections to a power of two, neighbours, the SNAT) and the lab's
own ruleset coming from the same generator. As root: a fresh pair of namespaces joined by
veths, no tgen lab, the generated script applied in the DUT namespace, and ``tgen run``
of the profile passes with nothing lost, the frames translated (conntrack rises by the
profile's flows)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tgen_tui.dut.config import conntrack_size, plan_from_profile, shell_script
from tgen_tui.lab.nftables import ruleset
from tgen_tui.profiles.loader import load_profile

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]


def test_plan_of_the_nat44_profile():
    plan = plan_from_profile(load_profile(ROOT / "profiles/nat44-stateful.yaml"))
    assert (plan.inside.address, plan.outside.address) == ("198.18.0.1/24", "198.19.0.1/24")
    assert plan.public_ip == "198.19.0.1" and plan.connections == 40_000
    assert plan.conntrack_max == plan.conntrack_buckets == 65536 == conntrack_size(40_000)
    assert conntrack_size(1_560_000) == 1 << 21 and conntrack_size(6_250_000) == 1 << 23  # USERS §1
    assert plan.inside.tester_hosts == ["198.18.0.2"] and plan.inside.dut_mac == "02:74:67:00:00:fe"
    sh = shell_script(plan, "nftables-nat44")
    assert 'oifname "d1" snat to 198.19.0.1' in sh and "nf_conntrack_max=65536" in sh
    assert "ip neigh replace 198.18.0.2 lladdr 02:74:67:00:00:01 dev d0" in sh


def test_the_lab_uses_the_same_generator():
    text = ruleset(drop_percent=1.5, filter_rules=2, nat_ports="random")
    assert "numgen random mod 10000 < 150 counter drop" in text
    assert 'oifname "d1" snat to 198.19.0.1 fully-random' in text and text.count(" drop") == 3


def test_bad_options_are_one_line():
    for args, words in ((["--mac", "p1=zz"], "PORT=MAC"), (["--nat-port-range", "9-1"], "LO <= HI"),
                        (["--format", "iptables"], "does not fit")):  # fmt: skip
        cp = subprocess.run(TGEN + ["dut", "config", str(ROOT / "profiles/nat44-stateful.yaml"),
                                    "--kind", "nftables-nat44", *args], capture_output=True, text=True)  # fmt: skip
        assert cp.returncode == 2 and words in cp.stderr and len(cp.stderr.splitlines()) == 1, (
            cp.stderr
        )


def _sh(*cmd: str) -> None:
    subprocess.run(list(cmd), check=True, capture_output=True)


@pytest.mark.root
def test_generated_config_makes_a_fresh_namespace_router_pass(tmp_path):
    tag = "g" + secrets.token_hex(3)[:5]
    t, d = f"{tag}-tester", f"{tag}-dut"
    try:
        _sh("ip", "netns", "add", t)
        _sh("ip", "netns", "add", d)
        for a, b in (("p0", "d0"), ("p1", "d1")):
            _sh("ip", "link", "add", f"{tag}{a}", "type", "veth", "peer", "name", f"{tag}{b}")
            _sh("ip", "link", "set", f"{tag}{a}", "netns", t, "name", a)
            _sh("ip", "link", "set", f"{tag}{b}", "netns", d, "name", b)
            _sh("ip", "-n", t, "link", "set", a, "up")
            _sh("ip", "netns", "exec", t, "sysctl", "-qw", f"net.ipv6.conf.{a}.disable_ipv6=1")
        prof = tmp_path / "nat.yaml"
        text = (ROOT / "profiles/nat44-stateful.yaml").read_text()
        prof.write_text(
            text.replace("tgen-tester", t)
            .replace("tgen-dut", d)
            .replace("duration: 10s", "duration: 1s")
        )
        script = tmp_path / "dut.sh"
        cp = subprocess.run(TGEN + ["dut", "config", str(prof), "--kind", "nftables-nat44", "--no-sizing",
                                    "-o", str(script)], capture_output=True, text=True)  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        _sh("ip", "netns", "exec", d, "sh", str(script))
        out = tmp_path / "r.json"
        cp = subprocess.run(TGEN + ["run", str(prof), "--json", str(out), "--no-store", "--quiet",
                                    "--flush-dut", "--fail-on", "lost>0"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(out.read_text())
        s = doc["streams"]["initiator"]
        assert s["tx_frames"] > 30_000 and s["lost"] == 0 and s["rx_frames"] == s["tx_frames"]
        assert doc["dut"]["conntrack_rise"] == s["tx_frames"]  # each unique tuple through the NAT
    finally:
        for ns in (t, d):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
