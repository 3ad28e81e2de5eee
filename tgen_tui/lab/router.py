"""The lab's ``router`` topology (issue 19): a plain Linux router as the DUT.

The namespaces, veths and the NAT44 ruleset are those of the ``nat`` topology, but the
DUT has no static neighbours: it learns the tester's MACs by ARP and IPv6 Neighbour
Discovery, which the tester ports answer from user space (worker/responder.py). IPv6 is
on in the DUT (off in the tester namespace, so the tester's kernel never answers), with
plain forwarding in the benchmarking range 2001:2::/48::

    p0 (198.18.0.2/24, 2001:2::2/64)  <-->  d0 198.18.0.1/24, 2001:2::1/64
    p1 (198.19.0.2/24, 2001:2:0:1::2/64) <-> d1 198.19.0.1/24, 2001:2:0:1::1/64

IPv4 from p0 is masqueraded to 198.19.0.1 out of d1 (as in ``nat``); IPv6 is routed.
"""

from __future__ import annotations

from tgen_tui.lab import commands
from tgen_tui.lab.naming import D0, D0_IP, D1, D1_IP, P0_IP, P1_IP, PREFIX_LEN

#: Topologies with a DUT namespace (the ruleset, RPS and the DUT view apply to both).
DUT_TOPOLOGIES = ("nat", "router")

D0_IP6 = "2001:2::1"
P0_IP6 = "2001:2::2"
D1_IP6 = "2001:2:0:1::1"
P1_IP6 = "2001:2:0:1::2"
PREFIX6_LEN = 64
RANGE6 = "2001:2::/48"
#: the routes of both DUT topologies (destination, via, dev): the inside may use any source
#: in 198.18.0.0/16; anything else lies beyond p1 (the lab's keeper puts them back after a
#: link flap: lab/keeper.py)
ROUTES = (("198.18.0.0/16", P0_IP, D0), ("default", P1_IP, D1))
ROUTES6 = ((RANGE6, P1_IP6, D1),)


def build_dut(d_ns: str) -> None:
    """Addresses, IPv6 and routes of the router DUT; no static neighbours (any left by a
    ``nat`` lab of the same prefix are flushed)."""
    ip = ["ip", "-n", d_ns]
    commands.run([*ip, "addr", "replace", f"{D0_IP}/{PREFIX_LEN}", "dev", D0])
    commands.run([*ip, "addr", "replace", f"{D1_IP}/{PREFIX_LEN}", "dev", D1])
    six = {
        "net.ipv6.conf.all.disable_ipv6": 0,
        "net.ipv6.conf.default.disable_ipv6": 0,
        f"net.ipv6.conf.{D0}.disable_ipv6": 0,
        f"net.ipv6.conf.{D1}.disable_ipv6": 0,
        "net.ipv6.conf.all.forwarding": 1,
        f"net.ipv6.conf.{D0}.accept_dad": 0,
        f"net.ipv6.conf.{D1}.accept_dad": 0,
        f"net.ipv6.conf.{D0}.keep_addr_on_down": 1,  # a link down/up keeps the addresses
        f"net.ipv6.conf.{D1}.keep_addr_on_down": 1,
    }
    commands.sysctl_set(d_ns, six)
    for dev, addr in ((D0, D0_IP6), (D1, D1_IP6)):
        commands.run([*ip, "-6", "addr", "replace", f"{addr}/{PREFIX6_LEN}", "dev", dev, "nodad"])
    for dev in (D0, D1):
        commands.run([*ip, "neigh", "flush", "dev", dev, "nud", "permanent"], check=False)
    for dst, via, dev in ROUTES:
        commands.run([*ip, "route", "replace", dst, "via", via, "dev", dev])
    for dst, via, dev in ROUTES6:
        commands.run([*ip, "-6", "route", "replace", dst, "via", via, "dev", dev])


def neighbours(d_ns: str) -> list[dict]:
    """The DUT's neighbour table (``ip -j neigh show``): dst, dev, lladdr, state."""
    return commands.ip_json(["neigh", "show"], netns=d_ns)


__all__ = ["DUT_TOPOLOGIES", "ROUTES", "ROUTES6", "build_dut", "neighbours"]
