"""The DUT counters over the ssh channel (root): an sshd in the lab's DUT namespace on its
loopback (the fixture of test_dut_ssh). The same counters as through the namespace, one
long-lived remote shell for every read, and `tgen run --dut-ssh` explains the loss of a
1 % drop rule as the netns channel does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tgen_tui.dut.channel import DutChannel
from tgen_tui.dut.counters import DutCounters
from tgen_tui.lab import topology as topo

from ..engine.engine_helpers import profile_yaml, stream_yaml
from .test_dut_ssh import ssh_dut  # noqa: F401 - the fixture

pytestmark = pytest.mark.root

STABLE = ("nft_rule_drop", "qdisc_drop", "conntrack_drop", "conntrack_insert_failed")


def test_ssh_reads_what_the_namespace_reads_through_one_shell(ssh_dut) -> None:  # noqa: F811
    ns, ssh = ssh_dut
    topo.set_dut(ns.removesuffix("-dut"), drop_percent=1.0, tbf="100mbit,20ms")
    over_ssh, local = DutCounters(DutChannel(ssh=ssh)), DutCounters(DutChannel(netns=ns))
    try:
        for _ in range(3):
            a = over_ssh.read()
        b = local.read()
        assert a.errors == () and b.errors == ()
        assert over_ssh.shell.starts == 1  # one ssh session for every read
        dut_keys = {k for k in b.values if k[2] != "host"}
        assert dut_keys <= set(a.values), dut_keys - set(a.values)
        for k in dut_keys:
            if k[0] in STABLE:  # no traffic: these do not move between the two reads
                assert a.values[k] == b.values[k], k
        assert any(k[0] == "nft_rule_drop" for k in a.values)
        assert any(k[1].startswith("qdisc tbf") and k[2] == "d1" for k in a.values)
        assert len(a.cpu) == len(b.cpu) > 0  # the same machine here
        assert a.host_wide == () and b.host_wide  # over ssh: the DUT's own
    finally:
        over_ssh.close()
        local.close()
        topo.set_dut(ns.removesuffix("-dut"), drop_percent=0.0, tbf=None)


def test_tgen_run_over_ssh_explains_the_loss(ssh_dut, tmp_path) -> None:  # noqa: F811
    ns, ssh = ssh_dut
    prefix = ns.removesuffix("-dut")
    topo.set_dut(prefix, drop_percent=1.0)
    try:
        streams = stream_yaml("up", "p0", rx_port="p1", pps=10000)
        prof = tmp_path / "p.yaml"
        prof.write_text(profile_yaml(prefix, streams, dut=False))
        out = tmp_path / "r.json"
        cp = subprocess.run(
            [sys.executable, "-m", "tgen_tui", "run", str(prof), "-d", "1"]
            + ["--dut-ssh", ssh, "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cp.returncode == 0, cp.stderr
    finally:
        topo.set_dut(prefix, drop_percent=0.0)
    doc = json.loads(out.read_text())
    up = doc["streams"]["up"]
    assert up["lost"] > 50
    rule = sum(c["frames"] for c in up["loss_causes"] if c["cause"] == "nft_rule_drop")
    assert rule >= 0.99 * up["lost"] and up["loss_unexplained"] <= 0.01 * up["lost"]
    assert doc["dut"]["source"] == f"ssh:{ssh}"
    assert doc["dut"]["cpu_note"] == "the DUT's own CPUs"
