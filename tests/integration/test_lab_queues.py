"""The lab's veths have one queue per CPU (at least 2), RPS on every rx queue, and a pair
made by an older ``up`` with one queue is made again (addresses and neighbours restored)."""

from __future__ import annotations

import pytest

from tgen_tui.lab import commands, naming
from tgen_tui.lab import topology as lab
from tgen_tui.lab.naming import D0_MAC, P0_IP, P0_MAC

pytestmark = pytest.mark.root


def _queues(netns: str, ifname: str) -> dict[str, str]:
    """rx queue name -> its rps_cpus mask."""
    cp = commands.run(
        [
            "sh",
            "-c",
            f"for q in /sys/class/net/{ifname}/queues/rx-*; do "
            "echo ${q##*/} $(cat $q/rps_cpus); done",
        ],  # fmt: skip
        netns=netns,
    )
    return dict(line.split() for line in cp.stdout.splitlines())


def _tx_queues(netns: str, ifname: str) -> int:
    cp = commands.run(["sh", "-c", f"ls -d /sys/class/net/{ifname}/queues/tx-*"], netns=netns)
    return len(cp.stdout.split())


def test_nat_lab_veths_have_a_queue_per_cpu_and_rps_on_each(make_lab):
    n = lab.LAB_QUEUES
    assert n >= 2
    with make_lab("nat", "q", rps_cpus="1") as prefix:
        t_ns, d_ns = naming.tester_netns(prefix), naming.dut_netns(prefix)
        for ns, ifn in ((t_ns, "p0"), (t_ns, "p1"), (d_ns, "d0"), (d_ns, "d1")):
            assert _queues(ns, ifn) == {f"rx-{q}": "1" for q in range(n)}, ifn
            assert _tx_queues(ns, ifn) == n, ifn
        # an older lab's one-queue pair: up makes it again with n queues
        commands.run(["ip", "-n", t_ns, "link", "del", "p0"])
        commands.run(["ip", "-n", t_ns, "link", "add", "p0", "type", "veth", "peer", "name",
                      "d0", "netns", d_ns])  # fmt: skip
        assert len(_queues(t_ns, "p0")) == 1
        lab.up(lab.LabConfig(prefix=prefix, topology="nat", rps_cpus="1"))
        assert _queues(t_ns, "p0") == {f"rx-{q}": "1" for q in range(n)}
        assert _queues(d_ns, "d0") == {f"rx-{q}": "1" for q in range(n)}
        ports = lab.status(prefix)
        assert "02:74" in str(ports)  # status still reads the lab
        link = commands.ip_json(["link", "show", "dev", "p0"], netns=t_ns)[0]
        assert link["address"] == P0_MAC and link["operstate"] == "UP"
        neigh = commands.ip_json(["neigh", "show", "dev", "d0"], netns=d_ns)
        assert [(x["dst"], x["lladdr"]) for x in neigh] == [(P0_IP, P0_MAC)]
        d0 = commands.ip_json(["link", "show", "dev", "d0"], netns=d_ns)[0]
        assert d0["address"] == D0_MAC


def test_direct_lab_veths_have_a_queue_per_cpu(make_lab):
    with make_lab("direct", "q", rps_cpus="1") as prefix:
        for ifn in ("p0", "p1"):
            assert len(_queues(naming.tester_netns(prefix), ifn)) == lab.LAB_QUEUES
            assert _tx_queues(naming.tester_netns(prefix), ifn) == lab.LAB_QUEUES
