"""Which DUT interface each tester port is cabled to, and the DUT's own addresses: what
loss attribution needs to know which counters lie on a stream's path.

In the netns lab a tester port and its DUT interface are the two ends of one veth pair:
each end's ``link_index`` is the other's ``ifindex`` (``ip -j link``). Over ssh nothing
here can see the cabling: the map is empty and interface counters count for every stream
(said in :mod:`tgen_tui.dut.attribution`). Read once per set-up (one ``ip`` process per
namespace).
"""

from __future__ import annotations

import json
import subprocess

from tgen_tui.dut.channel import DutChannel


def _links(netns: str | None) -> list[dict]:
    cmd = ["ip", "-j", "link"] if not netns else ["ip", "-n", netns, "-j", "link"]
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=False)
        return json.loads(cp.stdout or "[]") if cp.returncode == 0 else []
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return []


def peer_interfaces(
    ports: list[tuple[str, str | None, str]], dut_netns: str | None
) -> dict[str, str]:
    """``{port name: DUT interface}`` for tester ports ``(name, netns, interface)`` whose
    veth peer is in ``dut_netns``; ports without one are left out."""
    if not dut_netns:
        return {}
    dut = {ln.get("ifindex"): ln for ln in _links(dut_netns)}
    out: dict[str, str] = {}
    cache: dict[str | None, list[dict]] = {}
    for name, netns, ifname in ports:
        links = cache.setdefault(netns, _links(netns))
        me = next((ln for ln in links if ln.get("ifname") == ifname), None)
        if me is None or me.get("link_index") is None:
            continue
        peer = dut.get(me["link_index"])
        if peer is not None and peer.get("link_index") == me.get("ifindex"):
            out[name] = peer["ifname"]
    return out


def dut_addresses(channel: DutChannel) -> set[str]:
    """The DUT's own IP addresses (``ip -j addr`` there); empty when unreadable."""
    try:
        out = channel.run(["ip", "-j", "addr"], timeout=5)
        doc = json.loads(out.stdout or "[]") if out.ok else []
    except (OSError, ValueError, Exception):  # noqa: BLE001 - unknown: attribution says so
        return set()
    return {a.get("local") for ln in doc for a in ln.get("addr_info", []) if a.get("local")}
