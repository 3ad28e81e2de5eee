"""The DUT channel on a real lab namespace (root): conntrack count/max, flush, settings,
the engine's probe and methodology's control, through the namespace and through a command
prefix (``ip netns exec NS sh -c``, the code path ``ssh root@dut`` takes)."""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from tgen_tui.dut import conntrack, settings
from tgen_tui.dut.channel import DutChannel
from tgen_tui.dut.control import DutControl
from tgen_tui.dut.probe import DutProbe

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def dut_ns(make_lab):
    with make_lab("nat", "u", tbf="10mbit,40ms", drop_percent=0.01) as prefix:
        yield f"{prefix}-dut"


def _channels(ns: str) -> list[DutChannel]:
    return [DutChannel(netns=ns), DutChannel(ssh=f"ip netns exec {ns} sh -c")]


def insert_entries(ns: str, n: int, sport0: int = 20000) -> None:
    """``n`` UDP conntrack entries in the DUT's table (``conntrack -I``), no traffic needed."""
    ch = DutChannel(netns=ns)
    for i in range(n):
        ch.check(
            ["conntrack", "-I", "-p", "udp", "-s", "198.18.0.2", "-d", "198.19.0.9"]
            + ["--sport", str(sport0 + i), "--dport", "7", "-t", "120"]
        )


@pytest.mark.parametrize("kind", ["netns", "prefix"])
def test_count_max_and_flush(dut_ns, kind):
    ch = _channels(dut_ns)[kind == "prefix"]
    conntrack.flush(ch)
    assert conntrack.count(ch) == 0
    insert_entries(dut_ns, 7)
    assert conntrack.count(ch) == 7
    assert conntrack.maximum(ch) > 0
    reading = DutProbe(netns=ch.netns, ssh=ch.ssh).read()
    assert reading.error is None, reading.error
    assert (reading.count, reading.max) == (7, conntrack.maximum(ch))
    assert reading.mem_available > 0
    control = DutControl(netns=ch.netns, ssh=ch.ssh)
    assert control.count() == 7 and control.describe() == ch.source
    assert control.reset() >= 0
    assert conntrack.count(ch) == 0


def _frame(sport: int) -> bytes:
    """A 60-byte UDP frame from p0 (198.18.0.2) to 198.19.0.2 via the DUT's d0."""
    from tgen_tui.lab.naming import D0_MAC, P0_MAC

    payload = bytes(18)
    udp = struct.pack("!HHHH", sport, 7, 8 + len(payload), 0) + payload
    hdr = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
        socket.inet_aton("198.18.0.2"), socket.inet_aton("198.19.0.2"),
    )  # fmt: skip
    s = sum(struct.unpack("!10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    hdr = hdr[:10] + struct.pack("!H", ~s & 0xFFFF) + hdr[12:]
    eth = bytes.fromhex(D0_MAC.replace(":", "") + P0_MAC.replace(":", "")) + b"\x08\x00"
    return eth + hdr + udp


def test_flush_empties_the_table_after_traffic(dut_ns):
    """Frames from the tester through the NAT make entries; a flush over the channel
    (here the prefix) removes them."""
    from tgen_tui.worker.netns import in_thread_netns

    ch = DutChannel(ssh=f"ip netns exec {dut_ns} sh -c")
    conntrack.flush(ch)
    tester = dut_ns[: -len("-dut")] + "-tester"

    def send() -> None:
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind(("p0", 0))
            for sport in range(30000, 30005):
                sock.send(_frame(sport))

    in_thread_netns(tester, send)
    deadline = time.monotonic() + 5
    while conntrack.count(ch) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert conntrack.count(ch) == 5  # drop_percent=0.01: a loss is rare
    conntrack.flush(ch)
    assert conntrack.count(ch) == 0


def test_cached_count_follows_a_recreated_namespace(dut_ns):
    """The cached fd belongs to one namespace: a new namespace of the same name is read
    afresh, although the old one (with entries) still lives."""
    name = dut_ns.replace("-dut", "-re")
    other = DutChannel(netns=name)
    os.system(f"ip netns add {name}")
    keep = None
    try:
        insert_entries(name, 3, sport0=21000)
        assert conntrack.count(other) == 3  # the fd is cached now
        keep = os.open(f"/run/netns/{name}", os.O_RDONLY)  # the old namespace stays alive
        os.system(f"ip netns delete {name}; ip netns add {name}")
        assert conntrack.count(other) == 0  # a stale fd would still read the old 3
    finally:
        if keep is not None:
            os.close(keep)
        os.system(f"ip netns delete {name}")


@pytest.mark.parametrize("kind", ["netns", "prefix"])
def test_settings(dut_ns, kind):
    ch = _channels(dut_ns)[kind == "prefix"]
    got = conntrack.read_sysctls(ch, list(conntrack.SYSCTLS.values()))
    assert int(got["net.netfilter.nf_conntrack_udp_timeout"]) > 0
    control = DutControl(netns=ch.netns, ssh=ch.ssh).settings()
    assert control["source"] == ch.source and control["kernel"] == os.uname().release
    assert control["conntrack_max"] > 0 and control["udp_timeout_s"] > 0
    assert control["tcp_established_timeout_s"] > 0 and "error" not in control
    if kind == "netns":  # the lab's impairments come from its description file
        assert control["lab"]["drop_percent"] == 0.01 and control["lab"]["tbf"] == "10mbit,40ms"


def test_result_settings_match_the_lab_status(dut_ns):
    from tgen_tui.engine.result import dut_settings
    from tgen_tui.lab import topology

    got = dut_settings(DutChannel(netns=dut_ns))
    assert list(got) == list(settings.RESULT_KEYS)
    assert got["topology"] == "nat" and got["udp_timeout"] > 0
    assert got["nft"]["loaded"] and got["nft"]["drop_percent"] == 0.01
    assert got["nft"]["dropped"] == {"random": 0}
    assert got["tbf"]["spec"] == "10mbit,40ms" and got["tbf"]["rate"] == 10_000_000 // 8
    status = topology.status(dut_ns[: -len("-dut")])["dut"]
    assert {k: status[k] for k in settings.RESULT_KEYS if k != "topology"} == {
        k: got[k] for k in settings.RESULT_KEYS if k != "topology"
    }


def test_lab_down_removes_the_description(make_lab):
    with make_lab("nat", "v") as prefix:
        path = settings.description_path(f"{prefix}-dut")
        assert os.path.exists(path)
        assert settings.read_description(f"{prefix}-dut").topology == "nat"
    assert not os.path.exists(path)
