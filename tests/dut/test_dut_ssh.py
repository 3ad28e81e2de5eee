"""The ssh channel for real (root): an sshd started inside the lab's DUT namespace,
listening on that namespace's loopback, reached by ``ip netns exec NS ssh ... root@127.0.0.1``.
Skipped when openssh-server is not installed (``apt-get install openssh-server``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from tgen_tui.dut import conntrack
from tgen_tui.dut.channel import DutChannel
from tgen_tui.dut.control import DutControl
from tgen_tui.dut.probe import DutProbe

from .test_dut_lab import insert_entries

pytestmark = pytest.mark.root

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


def _keygen(path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="module")
def ssh_dut(make_lab, tmp_path_factory):
    """(DUT namespace, ssh prefix) with an sshd in the namespace; stopped afterwards."""
    if SSHD is None or shutil.which("ssh") is None:
        pytest.skip("openssh-server / ssh not installed")
    d = tmp_path_factory.mktemp("sshd")
    _keygen(d / "host")
    _keygen(d / "client")
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    port = 2200 + os.getpid() % 500
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
    )
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    with make_lab("nat", "s") as prefix:
        ns = f"{prefix}-dut"
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=open(d / "sshd.log", "w"),  # noqa: SIM115 - closed with the process
        )
        ssh = (
            f"ip netns exec {ns} ssh -p {port} -i {d}/client -o BatchMode=yes "
            "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
            "root@127.0.0.1"
        )
        try:
            ch = DutChannel(ssh=ssh)
            deadline = time.monotonic() + 10
            while not ch.run("true", timeout=5).ok:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"sshd did not answer: {(d / 'sshd.log').read_text()[-500:]}")
                time.sleep(0.1)
            yield ns, ssh
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_commands_and_reads_over_ssh(ssh_dut):
    ns, ssh = ssh_dut
    ch = DutChannel(ssh=ssh)
    assert ch.source == f"ssh:{ssh}"
    out = ch.run("ip -o link show d1; echo err >&2; exit 4")
    assert out.returncode == 4 and " d1" in out.stdout and out.stderr.strip() == "err"
    got = ch.read_files([conntrack.COUNT_PATH, "/no/such/file", conntrack.MAX_PATH])
    assert got["/no/such/file"] is None and int(got[conntrack.MAX_PATH]) > 0


def _udp_entries(ns: str) -> int:
    """The test's own entries (towards 198.19.0.9): ssh's loopback connections are tracked
    too, so the table's total moves with every command sent over the channel."""
    out = DutChannel(netns=ns).run(["conntrack", "-L", "-p", "udp", "-d", "198.19.0.9"]).stdout
    return out.count("dst=198.19.0.9")


def test_count_flush_probe_and_settings_over_ssh(ssh_dut):
    ns, ssh = ssh_dut
    ch = DutChannel(ssh=ssh)
    conntrack.flush(ch)
    assert _udp_entries(ns) == 0
    insert_entries(ns, 4, sport0=23000)
    assert _udp_entries(ns) == 4
    # the remote side is the DUT namespace: its table (4 entries + ssh's own on lo)
    assert conntrack.count(ch) >= 4
    reading = DutProbe(ssh=ssh).read()
    assert reading.error is None, reading.error
    assert reading.count >= 4 and reading.max == conntrack.maximum(DutChannel(netns=ns))
    control = DutControl(ssh=ssh)
    assert control.count() >= 4
    s = control.settings()
    assert "error" not in s, s
    assert s["kernel"] == os.uname().release and s["udp_timeout_s"] > 0
    control.reset()
    assert _udp_entries(ns) == 0
