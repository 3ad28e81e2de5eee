"""The lab comes up, forwards and NATs, applies its impairments, and goes down cleanly.

Real namespaces, veths and nftables: root only. Each test uses its own prefix (fixture
``lab_prefix``) and the fixture takes the lab down even when the test fails.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import subprocess
import sys
from contextlib import redirect_stdout

import pytest

from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.dut.channel import DutChannel
from tgen_tui.dut.conntrack import read_sysctls
from tgen_tui.lab import cli, commands, nftables
from tgen_tui.lab import topology as lab
from tgen_tui.lab.naming import (
    D0_IP,
    D0_MAC,
    D1_IP,
    D1_MAC,
    P0_IP,
    P0_MAC,
    P1_IP,
    P1_MAC,
    state_path,
)
from tgen_tui.lab.topology import LabConfig

CONNTRACK_MAX = "/proc/sys/net/netfilter/nf_conntrack_max"
HASHSIZE = "/sys/module/nf_conntrack/parameters/hashsize"


def _frames(pio, n, *, flows=1, dst_mac=D0_MAC, first_port=20000):
    return [
        pio.udp_frame(P0_MAC, dst_mac, P0_IP, P1_IP, first_port + i % flows, 9, i) for i in range(n)
    ]


def _send_and_capture(pio, prefix, frames):
    """Send from p0, capture on p1; nothing but our frames may arrive (no ARP/ND/ICMP)."""
    t_ns = lab.tester_netns(prefix)
    rx = pio.packet_socket(t_ns, "p1", rcvbuf=64 << 20)
    tx = pio.packet_socket(t_ns, "p0")
    try:
        pio.send_frames(tx, frames)
        others: list[bytes] = []
        got = pio.drain(rx, others=others)
        assert others == [], f"unexpected frames on p1: {[o[:34].hex() for o in others]}"
        return got
    finally:
        rx.close()
        tx.close()


def _ns_of_prefix(prefix):
    return [n for n in commands.netns_list() if n.startswith(prefix + "-")]


def test_up_builds_the_topology(lab_prefix):
    st = lab.up(LabConfig(prefix=lab_prefix))
    t_ns, d_ns = lab.tester_netns(lab_prefix), lab.dut_netns(lab_prefix)
    assert st["up"] is True and st["topology"] == "nat"
    assert sorted(_ns_of_prefix(lab_prefix)) == sorted([t_ns, d_ns])

    t_ifs, d_ifs = st["interfaces"]["tester"], st["interfaces"]["dut"]
    assert {n: i["mac"] for n, i in t_ifs.items()} == {"p0": P0_MAC, "p1": P1_MAC}
    assert {n: i["mac"] for n, i in d_ifs.items()} == {"d0": D0_MAC, "d1": D1_MAC}
    assert t_ifs["p0"]["addresses"] == [] and t_ifs["p1"]["addresses"] == []
    assert d_ifs["d0"]["addresses"] == [f"{D0_IP}/24"]
    assert d_ifs["d1"]["addresses"] == [f"{D1_IP}/24"]
    assert all(i["state"] == "UP" for i in (*t_ifs.values(), *d_ifs.values()))
    # no IPv6 anywhere on the lab's ports (no ND/RS frames), tester does not forward
    v6 = read_sysctls(
        DutChannel(netns=t_ns), ["net.ipv6.conf.p0.disable_ipv6", "net.ipv6.conf.p1.disable_ipv6"]
    )
    assert set(v6.values()) == {"1"}
    v6 = read_sysctls(
        DutChannel(netns=d_ns), ["net.ipv6.conf.d0.disable_ipv6", "net.ipv6.conf.d1.disable_ipv6"]
    )
    assert set(v6.values()) == {"1"}
    # static neighbours stand in for ARP
    neigh = commands.ip_json(["neigh", "show"], netns=d_ns)
    got = {(n["dst"], n["dev"], n["lladdr"]) for n in neigh if "PERMANENT" in n.get("state", [])}
    assert {(P0_IP, "d0", P0_MAC), (P1_IP, "d1", P1_MAC)} <= got
    # DUT conntrack settings: raised UDP timeouts by default
    dut = st["dut"]
    assert dut["udp_timeout"] == 120 and dut["udp_stream_timeout"] == 180
    assert dut["ip_forward"] is True and dut["count"] == 0 and dut["nft"]["loaded"]
    # ports tell the engine where to send from and to
    assert st["ports"]["p0"]["gateway_mac"] == D0_MAC and st["ports"]["p0"]["ip"] == P0_IP
    assert st["ports"]["p1"]["gateway_mac"] == D1_MAC and st["ports"]["p1"]["netns"] == t_ns
    # RPS: CPU 0 only by default on a machine with 2+ CPUs
    want = "1" if (os.cpu_count() or 1) >= 2 else None
    for i in (*t_ifs.values(), *d_ifs.values()):
        if want:
            assert int(i["rps_cpus"].replace(",", ""), 16) == 1
    assert os.path.exists(state_path(lab_prefix))


def test_frames_are_natted_and_tracked(lab_prefix, pio):
    lab.up(LabConfig(prefix=lab_prefix))  # default RPS (CPU 0 on 2+ CPUs)
    d_ns = lab.dut_netns(lab_prefix)
    flows = 20
    got = _send_and_capture(pio, lab_prefix, _frames(pio, 2 * flows, flows=flows))
    assert len(got) == 2 * flows
    for p in got:
        assert (p["src"], p["dst"]) == (D1_IP, P1_IP)  # source NATed to the DUT's outside
        assert (p["src_mac"], p["dst_mac"]) == (D1_MAC, P1_MAC)
        assert p["ttl"] == 63 and p["ip_ok"]
    assert sorted(p["seq"] for p in got) == list(range(2 * flows))
    # the count rises by the number of unique flows, and the probe reads the same number
    assert lab.conntrack_count(d_ns) == flows
    assert lab.status(lab_prefix)["dut"]["count"] == flows
    cp = commands.run(["conntrack", "-L", "-p", "udp"], netns=d_ns)
    assert cp.stdout.count(f"src={P1_IP} dst={D1_IP}") == flows  # reply tuples to the NAT
    lab.flush_conntrack(lab_prefix)
    assert lab.conntrack_count(d_ns) == 0


def test_up_is_idempotent_and_reconfigures(lab_prefix):
    t_ns, d_ns = lab.tester_netns(lab_prefix), lab.dut_netns(lab_prefix)
    cfg = LabConfig(prefix=lab_prefix, ct_limit=1000, tbf="10mbit,40ms")

    def snapshot():
        rules = commands.run(["nft", "list", "ruleset"], netns=d_ns).stdout
        links = commands.ip_json(["link", "show"], netns=t_ns) + commands.ip_json(
            ["link", "show"], netns=d_ns
        )
        return rules, sorted((x["ifname"], x["ifindex"], x["address"]) for x in links)

    first = lab.up(cfg)
    before = snapshot()
    second = lab.up(cfg)
    assert snapshot() == before  # same interfaces (not re-created), same ruleset
    assert first["interfaces"] == second["interfaces"] and second["up"]
    assert second["dut"]["tbf"]["spec"] == "10mbit,40ms"
    assert second["dut"]["tbf"]["rate"] == 10_000_000 // 8  # tc reports bytes/s

    # a different config reconfigures in place
    third = lab.up(cfg.replace(ct_limit=None, tbf=None, drop_percent=2.5, udp_timeout=300))
    rules = commands.run(["nft", "list", "ruleset"], netns=d_ns).stdout
    assert "numgen random mod 10000 < 250" in rules and "ct count" not in rules
    assert third["dut"]["tbf"] is None and third["dut"]["udp_timeout"] == 300
    assert snapshot()[1] == before[1]

    # set_dut changes only what it is given, atomically
    fourth = lab.set_dut(lab_prefix, rate_limit_pps=1000, drop_percent=0)
    rules = commands.run(["nft", "list", "ruleset"], netns=d_ns).stdout
    assert "limit rate over 1000/second" in rules and "numgen" not in rules
    assert fourth["config"]["udp_timeout"] == 300 and fourth["dut"]["nft"]["rate_limit_pps"] == 1000
    with pytest.raises(BadInput):
        lab.set_dut(lab_prefix, topology="direct")
    with pytest.raises(BadInput):
        lab.set_dut(lab_prefix, drop_percent=0.001)

    # a topology change rebuilds
    fifth = lab.up(LabConfig(prefix=lab_prefix, topology="direct"))
    assert fifth["topology"] == "direct" and _ns_of_prefix(lab_prefix) == [t_ns]


def test_down_removes_everything_and_restores_globals(lab_prefix):
    old_max = commands.read_global(CONNTRACK_MAX)
    old_hash = commands.read_global(HASHSIZE)
    new_max = int(old_max) + 4096
    new_hash = int(old_hash) + 1024 if old_hash else None
    st = lab.up(LabConfig(prefix=lab_prefix, conntrack_max=new_max, conntrack_buckets=new_hash))
    assert st["dut"]["conntrack_max"] == new_max
    assert commands.read_global(CONNTRACK_MAX) == str(new_max)
    if new_hash and not st["warnings"]:
        assert st["dut"]["conntrack_buckets"] == new_hash
    saved = json.load(open(state_path(lab_prefix)))
    assert saved["globals"]["conntrack_max"]["original"] == old_max

    lab.down(lab_prefix)
    assert _ns_of_prefix(lab_prefix) == []
    assert not os.path.exists(state_path(lab_prefix))
    assert commands.read_global(CONNTRACK_MAX) == old_max
    assert commands.read_global(HASHSIZE) == old_hash
    assert lab.status(lab_prefix)["up"] is False
    lab.down(lab_prefix)  # safe when nothing is up


def test_parallel_labs_coexist_and_share_globals(lab_prefix, pio):
    """Two labs at once; both change nf_conntrack_max: the first one down must not restore
    it under the second, the last one down restores the machine's original value."""
    other = lab_prefix + "b"
    old_max = int(commands.read_global(CONNTRACK_MAX))
    try:
        lab.up(LabConfig(prefix=lab_prefix, conntrack_max=old_max + 4096, rps_cpus="0"))
        lab.up(LabConfig(prefix=other, conntrack_max=old_max + 8192, rps_cpus="0"))
        for prefix in (lab_prefix, other):
            assert len(_send_and_capture(pio, prefix, _frames(pio, 5, flows=5))) == 5
            assert lab.conntrack_count(lab.dut_netns(prefix)) == 5
        lab.down(lab_prefix)
        assert int(commands.read_global(CONNTRACK_MAX)) == old_max + 8192
        assert lab.status(other)["up"]
    finally:
        lab.down(other)
    assert int(commands.read_global(CONNTRACK_MAX)) == old_max


def test_drop_percent_is_applied(lab_prefix, pio):
    """10 % random drop over 20,000 frames of one flow.

    Drops are Binomial(20000, 0.1): mean 2000, sd sqrt(20000*0.1*0.9) = 42.4. A window of
    +/- 250 (5.9 sd) fails by chance with probability about 4e-9. With RPS off, veth and the
    DUT run synchronously on the sending CPU, so nothing else drops: every frame is either
    counted by the nftables drop rule or received.
    """
    n, p = 20_000, 0.10
    lab.up(LabConfig(prefix=lab_prefix, drop_percent=p * 100, rps_cpus="0"))
    got = _send_and_capture(pio, lab_prefix, _frames(pio, n))
    dropped = nftables.drop_counters(lab.dut_netns(lab_prefix))["random"]
    sd = math.sqrt(n * p * (1 - p))
    assert abs(dropped - n * p) < 250, (dropped, sd)
    assert len(got) + dropped == n


def test_ct_limit_caps_the_dut(lab_prefix, pio):
    lab.up(LabConfig(prefix=lab_prefix, ct_limit=50, rps_cpus="0"))
    got = _send_and_capture(pio, lab_prefix, _frames(pio, 150, flows=150))
    d_ns = lab.dut_netns(lab_prefix)
    assert len(got) == 50
    assert lab.conntrack_count(d_ns) == 50
    assert nftables.drop_counters(d_ns) == {"ct_limit": 100}


def test_rate_limit_drops_the_excess(lab_prefix, pio):
    """1,000 frames sent back to back (milliseconds) through a 100 pps limit: only the
    burst (5) and a few refills pass; no timing assumption beyond "well under 5 s"."""
    lab.up(LabConfig(prefix=lab_prefix, rate_limit_pps=100, rps_cpus="0"))
    got = _send_and_capture(pio, lab_prefix, _frames(pio, 1000))
    dropped = nftables.drop_counters(lab.dut_netns(lab_prefix))["rate_limit"]
    assert len(got) + dropped == 1000
    assert 5 <= len(got) < 500


def test_ten_thousand_filter_rules_load_and_traffic_passes(lab_prefix, pio):
    st = lab.up(LabConfig(prefix=lab_prefix, filter_rules=10_000, rps_cpus="0"))
    d_ns = lab.dut_netns(lab_prefix)
    chain = commands.run(["nft", "list", "chain", "ip", "tgen_lab", "fwd_filter"], netns=d_ns)
    body = chain.stdout.splitlines()
    assert sum(ln.strip().endswith("drop") for ln in body) == 10_000
    assert body[-3].strip() == "accept"  # the one matching rule comes last
    assert st["dut"]["nft"]["filter_rules"] == 10_000
    got = _send_and_capture(pio, lab_prefix, _frames(pio, 10, flows=10))
    assert len(got) == 10 and {p["src"] for p in got} == {D1_IP}


def test_direct_topology_passes_frames(lab_prefix, pio):
    st = lab.up(LabConfig(prefix=lab_prefix, topology="direct"))
    assert (
        st["up"] and "dut" not in st and _ns_of_prefix(lab_prefix) == [lab.tester_netns(lab_prefix)]
    )
    assert st["ports"]["p0"]["gateway_mac"] == P1_MAC
    got = _send_and_capture(pio, lab_prefix, _frames(pio, 20, dst_mac=P1_MAC))
    assert len(got) == 20
    assert all((p["src"], p["dst"], p["ttl"]) == (P0_IP, P1_IP, 64) for p in got)
    with pytest.raises(BadInput):
        lab.up(LabConfig(prefix=lab_prefix, topology="direct", drop_percent=1))


def _cli(argv):
    parser = argparse.ArgumentParser(prog="tgen")
    cli.register(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    with redirect_stdout(out):
        rc = args.func(args)
    return rc, out.getvalue()


def test_cli_verbs(lab_prefix):
    rc, out = _cli(["lab", "up", "--prefix", lab_prefix, "--drop-percent", "1", "--json"])
    assert rc == 0 and json.loads(out)["dut"]["nft"]["drop_percent"] == 1
    rc, out = _cli(["lab", "set", "--prefix", lab_prefix, "--tbf", "5mbit", "--ct-limit", "10"])
    assert rc == 0 and "tbf 5mbit" in out and "ct limit 10" in out
    rc, out = _cli(["lab", "status", "--prefix", lab_prefix])
    assert rc == 0 and "up, topology nat" in out and P0_MAC in out and "198.19.0.1/24" in out
    rc, out = _cli(["lab", "flush", "--prefix", lab_prefix])
    assert rc == 0
    with pytest.raises(BadInput):
        _cli(["lab", "set", "--prefix", lab_prefix])  # nothing to set
    with pytest.raises(BadInput):
        _cli(["lab", "up", "--prefix", lab_prefix, "--tbf", "fast"])
    rc, out = _cli(["lab", "down", "--prefix", lab_prefix])
    assert rc == 0 and _ns_of_prefix(lab_prefix) == []
    with pytest.raises(EnvironmentProblem):
        _cli(["lab", "flush", "--prefix", lab_prefix])


def test_environment_problems_are_reported(monkeypatch):
    """Not root, or a missing tool: EnvironmentProblem (exit 3), before anything is made."""
    with monkeypatch.context() as m:
        m.setattr(os, "geteuid", lambda: 1000)
        with pytest.raises(EnvironmentProblem, match="root"):
            lab.up(LabConfig(prefix="tnoroot"))
    if os.geteuid() == 0:
        monkeypatch.setenv("PATH", "/nonexistent")
        with pytest.raises(EnvironmentProblem, match="not installed"):
            lab.up(LabConfig(prefix="tnotools"))
    assert not os.path.exists(state_path("tnoroot"))


def test_bad_options_are_bad_input():
    for cfg in (
        LabConfig(prefix="a-b"),
        LabConfig(drop_percent=101),
        LabConfig(drop_percent=0.005),
        LabConfig(ct_limit=0),
        LabConfig(tbf="100mbit,soon"),
        LabConfig(rps_cpus="x1"),
        LabConfig(topology="ring"),
        LabConfig(topology="direct", filter_rules=5),
    ):
        with pytest.raises(BadInput):
            cfg.validated()
    assert LabConfig(drop_percent=12.34, tbf="1gbit").validated()


def test_lab_imports_stay_light():
    code = (
        "import sys, tgen_tui.lab.cli, tgen_tui.lab.topology;"
        "bad = [m for m in ('textual', 'trio', 'scapy') if m in sys.modules];"
        "print(*bad); sys.exit(1 if bad else 0)"
    )
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def _neigh_and_routes(d_ns: str) -> tuple[set, set]:
    neigh = {
        (n["dst"], n["dev"], n.get("lladdr"), tuple(n.get("state", [])))
        for n in commands.ip_json(["neigh", "show"], netns=d_ns)
    }
    routes = {
        (r["dst"], r.get("gateway"), r["dev"])
        for r in commands.ip_json(["route", "show"], netns=d_ns)
        if r.get("gateway")
    }
    return neigh, routes


def test_a_link_flap_on_the_dut_keeps_its_neighbours_and_routes(lab_prefix):
    """``ip link set d1 down`` flushes the DUT's permanent neighbours and the routes via
    them; the lab's keeper puts them back within a fraction of a second of the ``up``
    (issue 36: else the DUT never reaches p1 again), and ``down`` stops it."""
    import time

    from tgen_tui.lab import keeper

    st = lab.up(LabConfig(prefix=lab_prefix))
    d_ns = lab.dut_netns(lab_prefix)
    assert st["keeper"]["running"] is True
    want_neigh = {
        ("198.18.0.2", "d0", P0_MAC, ("PERMANENT",)),
        ("198.19.0.2", "d1", P1_MAC, ("PERMANENT",)),
    }
    want_routes = {("198.18.0.0/16", P0_IP, "d0"), ("default", P1_IP, "d1")}
    assert _neigh_and_routes(d_ns) == (want_neigh, want_routes)
    for dev in ("d1", "d0"):
        commands.run(["ip", "-n", d_ns, "link", "set", dev, "down"])
        neigh, routes = _neigh_and_routes(d_ns)
        assert not any(n[1] == dev for n in neigh) and not any(r[2] == dev for r in routes)
        t_up = time.monotonic()
        commands.run(["ip", "-n", d_ns, "link", "set", dev, "up"])
        while _neigh_and_routes(d_ns) != (want_neigh, want_routes):
            assert time.monotonic() - t_up < 1.0, _neigh_and_routes(d_ns)
            time.sleep(0.01)
    again = lab.up(LabConfig(prefix=lab_prefix))  # idempotent: the same keeper
    assert again["keeper"]["pid"] == st["keeper"]["pid"]
    assert again["keeper"]["restores"] >= 4 and again["keeper"]["last"]["errors"] == []
    lab.down(lab_prefix)
    assert keeper.running(lab_prefix) == []
    assert not os.path.exists(keeper.stats_path(lab_prefix))


def test_the_router_lab_keeps_its_routes_only():
    from tgen_tui.lab.topology import _kept

    assert set(_kept("nat")) == {"route", "neigh"}
    assert set(_kept("router")) == {"route", "route6"}  # the ports answer ARP and ND there
