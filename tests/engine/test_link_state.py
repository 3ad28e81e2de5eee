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
