"""Link state from rtnetlink (no `ip` process per read), checked against iproute2 on a real
veth pair: up, down at the near end, no carrier when the far end is down, missing."""

from __future__ import annotations

import subprocess

from tgen_tui.engine.probes import (
    IF_OPER_UNKNOWN,
    IF_OPER_UP,
    IFF_LOWER_UP,
    IFF_UP,
    InterfaceProbe,
    link_state_of,
)


def test_operstate_rules():
    assert link_state_of(0, IF_OPER_UP) == "up"
    assert link_state_of(IFF_UP | IFF_LOWER_UP, IF_OPER_UNKNOWN) == "up"  # e.g. lo
    assert link_state_of(IFF_UP, IF_OPER_UNKNOWN) == "down"  # up, but no carrier
    assert link_state_of(IFF_UP, 3) == "down"  # lower layer down: the peer is down
    assert link_state_of(IFF_UP | IFF_LOWER_UP, 2) == "down"


def iproute2_state(netns: str, interface: str) -> str:
    """The independent reading: ``ip -o link show`` (what iproute2 prints)."""
    out = subprocess.run(
        ["ip", "-n", netns, "-o", "link", "show", "dev", interface],
        capture_output=True,
        text=True,
        timeout=5,
    ).stdout
    if not out:
        return "missing"
    if "NO-CARRIER" in out or "state LOWERLAYERDOWN" in out or "state DOWN" in out:
        return "down"
    return "up" if "state UP" in out or ("LOWER_UP" in out and ",UP" in out) else "down"


def _both(ns: str, ifname: str) -> tuple[str, str]:
    return InterfaceProbe.link_state(ns, ifname), iproute2_state(ns, ifname)


def test_netlink_and_iproute2_agree_on_a_real_veth(direct_lab):
    ns = f"{direct_lab}-tester"
    assert _both(ns, "p0") == ("up", "up")
    subprocess.run(["ip", "-n", ns, "link", "set", "p1", "down"], check=True)
    try:
        assert _both(ns, "p1") == ("down", "down")  # the near end is down
        assert _both(ns, "p0") == ("down", "down")  # its peer is down: no carrier
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "p1", "up"], check=True)
    assert InterfaceProbe.link_state(ns, "nope0") == "missing" == iproute2_state(ns, "nope0")


def test_link_info_reads_mtu_and_flags_as_iproute2(direct_lab):
    from tgen_tui.engine.probes import link_info

    ns = f"{direct_lab}-tester"
    subprocess.run(["ip", "-n", ns, "link", "set", "p0", "mtu", "1400"], check=True)
    try:
        info = link_info(ns, "p0")
        assert info is not None and info["mtu"] == 1400 and info["operstate"] == "UP"
        assert "LOWER_UP" in info["flags"] and "UP" in info["flags"]
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "p0", "mtu", "1500"], check=True)


# ---------------------------------------------------------------------- link changes as events
class _Spec:
    def __init__(self, netns, interface, host=None):
        self.netns, self.interface, self.host = netns, interface, host


class _Port:
    def __init__(self, netns, interface):
        self.spec = _Spec(netns, interface)
        self.link = "unknown"


def _watch(ports):
    from tgen_tui.engine.events import EventLog
    from tgen_tui.engine.linkwatch import LinkWatch

    log = EventLog()
    return LinkWatch(lambda: ports, log), log


def test_a_carrier_loss_and_its_return_are_two_events_with_the_time_away():
    from tgen_tui.engine.api import LinkChanged

    ports = {"p1": _Port("ns", "p1")}
    w, log = _watch(ports)
    t0 = log.t_open
    assert w.observe("p1", "up", t0 + 1.0) is None  # the first reading, up: nothing said
    ev = w.observe("p1", "no carrier", t0 + 2.0)
    assert isinstance(ev, LinkChanged) and ev.kind == "link"
    assert ev.text() == "p1: carrier lost" and abs(ev.t - 2.0) < 1e-9
    assert ports["p1"].link == "down"  # PortStats.link keeps the coarse word
    assert w.observe("p1", "no carrier", t0 + 2.5) is None  # no change, no event
    back = w.observe("p1", "up", t0 + 3.02)
    assert back is not None and back.away_s == 1.02
    assert back.text() == "p1: carrier back after 1.02 s" and ports["p1"].link == "up"
    assert [e.kind for e in log.all()] == ["link", "link"]
    assert back.to_dict()["event"] == "link" and back.to_dict()["new"] == "up"


def test_other_changes_say_what_happened():
    ports = {"p0": _Port("ns", "p0")}
    w, log = _watch(ports)
    t = log.t_open
    assert w.observe("p0", "no carrier", t).text() == "p0: no carrier at open"
    assert w.observe("p0", "down", t + 1).text() == "p0: link down (the interface is set down)"
    up = w.observe("p0", "up", t + 4)
    assert up.text() == "p0: link up again after 4.00 s"  # away since it first left up
    assert w.observe("p0", "missing", t + 5).text() == "p0: interface gone"
    assert w.observe("p0", "up", t + 6).text() == "p0: interface back after 1.00 s"
    assert w.observe("p0", "unknown", t + 7) is None  # netlink failed: nothing known
    assert ports["p0"].link == "unknown" and w.observe("p0", "up", t + 8) is None


def test_a_carrier_lost_and_back_between_two_readings_is_seen_by_its_down_count():
    ports = {"p1": _Port("ns", "p1")}
    w, log = _watch(ports)
    t = log.t_open
    assert w.observe("p1", "up", t + 1.0, downs=4) is None
    assert w.observe("p1", "up", t + 1.1, downs=4) is None
    ev = w.observe("p1", "up", t + 1.2, downs=5)
    assert ev is not None and ev.flaps == 1 and ev.away_s == 0.1
    assert ev.text() == "p1: carrier lost and back within 0.10 s"
    assert "p1" in w.ever_lost
    two = w.observe("p1", "up", t + 1.3, downs=7)
    assert two.text() == "p1: carrier lost and back 2 times within 0.10 s"
    lost = w.observe("p1", "no carrier", t + 1.4, downs=8)  # a change: the usual event
    assert lost.text() == "p1: carrier lost" and lost.flaps == 0


def test_a_message_older_than_the_last_reading_is_left_out():
    """The listener read a "no carrier" message after the sampler had already read the
    carrier back: its change count is lower, so it is stale (no second flap)."""
    ports = {"p1": _Port("ns", "p1")}
    w, log = _watch(ports)
    t = log.t_open
    w.observe("p1", "up", t + 1.0, downs=0, changes=2)
    assert w.observe("p1", "no carrier", t + 2.0, downs=1, changes=3).text() == "p1: carrier lost"
    assert w.observe("p1", "up", t + 3.0, downs=1, changes=4).text().startswith("p1: carrier back")
    assert w.observe("p1", "no carrier", t + 3.01, downs=1, changes=3) is None  # stale
    assert ports["p1"].link == "up" and len(log.all()) == 2


def test_netlink_messages_are_read_as_link_states():
    import socket
    import struct

    from tgen_tui.dut.netlink import NLMSG, attr
    from tgen_tui.engine.linkwatch import RTM_DELLINK, parse_link_messages
    from tgen_tui.engine.probes import (
        IFF_LOWER_UP,
        IFINFO,
        IFLA_CARRIER,
        IFLA_CARRIER_CHANGES,
        IFLA_CARRIER_DOWN_COUNT,
        IFLA_IFNAME,
        IFLA_OPERSTATE,
    )

    def msg(typ, name, flags, oper):
        body = IFINFO.pack(socket.AF_UNSPEC, 1, 7, flags, 0) + attr(IFLA_IFNAME, name + b"\0")
        body += attr(IFLA_OPERSTATE, bytes([oper]))
        return NLMSG.pack(NLMSG.size + len(body), typ, 0, 0, 0) + body

    data = msg(16, b"p1", IFF_UP, 2) + msg(16, b"p0", IFF_UP | IFF_LOWER_UP, 6)
    data += msg(16, b"p2", 0, 2) + msg(RTM_DELLINK, b"p3", 0, 2)
    assert parse_link_messages(data) == [
        ("p1", ("no carrier", None, None)), ("p0", ("up", None, None)),
        ("p2", ("down", None, None)), ("p3", ("missing", None, None)),
    ]  # fmt: skip
    # the carrier bit (and its down count) when given: operstate lags it (linkwatch)
    body = IFINFO.pack(socket.AF_UNSPEC, 1, 7, IFF_UP | IFF_LOWER_UP, 0)
    body += attr(IFLA_IFNAME, b"p1\0") + attr(IFLA_OPERSTATE, bytes([6]))
    body += attr(IFLA_CARRIER, b"\0") + attr(IFLA_CARRIER_DOWN_COUNT, struct.pack("=I", 3))
    body += attr(IFLA_CARRIER_CHANGES, struct.pack("=I", 7))
    one = NLMSG.pack(NLMSG.size + len(body), 16, 0, 0, 0) + body
    assert parse_link_messages(one) == [("p1", ("no carrier", 3, 7))]
    assert struct.calcsize("=BxHiII") == IFINFO.size


def test_the_watcher_hears_a_peer_go_down_at_once(direct_lab):
    """On a real veth pair: the far end set down is "no carrier" on the near end, heard on
    the namespace's rtnetlink socket within a fraction of a second (no poll)."""
    import time

    import trio

    ns = f"{direct_lab}-tester"
    ports = {"p0": _Port(ns, "p0")}
    w, log = _watch(ports)
    from tgen_tui.engine.linkwatch import read_local

    ((state, downs, changes),) = read_local({ns: ["p0"]}).values()
    assert state == "up" and isinstance(downs, int) and changes >= downs  # carrier counts
    assert read_local({ns: ["nope0"]}) == {(ns, "nope0"): ("missing", None, None)}

    async def main():
        async with trio.open_nursery() as n:
            await w.poll()
            n.start_soon(w.run, lambda: False)
            await trio.sleep(0.2)  # the listener's socket is open
            t_down = time.monotonic()
            await trio.to_thread.run_sync(
                lambda: subprocess.run(["ip", "-n", ns, "link", "set", "p1", "down"], check=True)
            )
            with trio.fail_after(1.0):
                while not log.all():
                    await trio.sleep(0.005)
            lost = log.all()[0]
            t_up = time.monotonic()
            await trio.to_thread.run_sync(
                lambda: subprocess.run(["ip", "-n", ns, "link", "set", "p1", "up"], check=True)
            )
            with trio.fail_after(1.0):
                while len(log.all()) < 2:
                    await trio.sleep(0.005)
            n.cancel_scope.cancel()
        return t_down, lost, t_up, log.all()[1]

    try:
        t_down, lost, t_up, back = trio.run(main)
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "p1", "up"], check=False)
    assert lost.text() == "p0: carrier lost"
    assert 0 <= lost.t + log.t_open - t_down < 0.5  # heard, not polled (the poll is 1 s)
    assert back.text().startswith("p0: carrier back after ")
    assert abs(back.away_s - (t_up - t_down)) < 0.5
