"""Transport hosts: one namespace per tester side with an address, attached to the DUT.

The tester ports (p0/p1) carry no address on purpose (the kernel must not answer raw
test frames), so kernel TCP/UDP flows (the ``transport`` streams) get hosts of their own::

    PREFIX-h0: h0 198.18.100.2/24 ─── e0 198.18.100.1/24 ┐
                                                         DUT (PREFIX-dut): routes, nftables
    PREFIX-h1: h1 198.19.100.2/24 ─── x1 ┄┄ y1 ─── e1 198.19.100.1/24 (TBF on egress)
                                          └ bridge b1, or the delay line (--delay/--loss)

The middlebox has its own namespace so that every frame entering it crosses a namespace
boundary, which clears the skb's timestamp: the delay line's receive stamp is then the
time the frame reached x1 or y1 (within the DUT's namespace a forwarded frame keeps the
stamp of its arrival at e0, so the TBF queue's wait would count as delay). The hosts send
one TCP segment per packet (``gso_max_segs 1``: veth would otherwise
carry 64 KB super-packets, and the DUT's rule set would be evaluated once per 44
segments). Side 1 passes through two DUT-side interfaces x1 and y1: a kernel bridge joins them when
no delay or loss is asked; otherwise the user-space delay line (:mod:`.delayline`)
forwards between them, holding each frame for the delay and dropping the given share.
So data from h0 to h1 crosses the DUT's forward chain (filter rules, drops), the TBF
bottleneck on e1, then the delay; the ACKs come back through the delay again (RTT = 2 x
delay). The DUT does not NAT these flows (its NAT is on d1 only), but for the client
range: :data:`CLIENT_NET` is local on h0 (one ``local`` route on lo, so a request/response
flow's clients bind to any of its addresses without an address each), the DUT routes it
back via h0, and its traffic toward h1 is NATed to e1's address (``tgen_lab``'s nat_post:
many inside hosts behind one public address, as a NAT gateway sees them).
"""

from __future__ import annotations

from tgen_tui.lab import commands
from tgen_tui.lab.naming import dut_netns

H0, H1 = "h0", "h1"
E0, E1 = "e0", "e1"
X1, Y1, B1 = "x1", "y1", "b1"
H0_IP, E0_IP = "198.18.100.2", "198.18.100.1"
H1_IP, E1_IP = "198.19.100.2", "198.19.100.1"
HOST_PREFIX_LEN = 24
#: request/response clients on h0 (1,022 addresses from 198.18.104.1), NATed toward h1
CLIENT_NET = "198.18.104.0/22"
CLIENT_FIRST = "198.18.104.1"


def mb_netns(prefix: str) -> str:
    """The middlebox namespace between h1 and the DUT (bridge or delay line)."""
    return f"{prefix}-mb"


def host_netns(prefix: str, side: int) -> str:
    """Name of the transport host namespace of side 0 (inside) or 1 (outside)."""
    return f"{prefix}-h{side}"


def _links(netns: str) -> set[str]:
    if not commands.netns_exists(netns):
        return set()
    return {link["ifname"] for link in commands.ip_json(["link", "show"], netns=netns)}


def _veth(ns_a: str, a: str, ns_b: str, b: str) -> None:
    have_a, have_b = a in _links(ns_a), b in _links(ns_b)
    if have_a and have_b:
        return
    if have_a:
        commands.run(["ip", "-n", ns_a, "link", "del", a], check=False)
    if have_b:
        commands.run(["ip", "-n", ns_b, "link", "del", b], check=False)
    commands.run(
        ["ip", "-n", ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b]
    )


def _up(netns: str, *ifnames: str) -> None:
    for ifname in ifnames:
        commands.run(["ip", "-n", netns, "link", "set", ifname, "up"])


def build(prefix: str) -> None:
    """Create (or complete) both host namespaces and their links to the DUT; idempotent."""
    d_ns = dut_netns(prefix)
    base = {
        "net.ipv6.conf.all.disable_ipv6": 1,
        "net.ipv6.conf.default.disable_ipv6": 1,
    }
    for side, (h, e, h_ip, e_ip) in enumerate(((H0, E0, H0_IP, E0_IP), (H1, E1, H1_IP, E1_IP))):
        ns = host_netns(prefix, side)
        commands.netns_add(ns)
        commands.sysctl_set(ns, base)
        _up(ns, "lo")
        if side == 0:
            _veth(ns, h, d_ns, e)
        else:
            mb = mb_netns(prefix)
            commands.netns_add(mb)
            commands.sysctl_set(mb, base)
            _up(mb, "lo")
            _veth(ns, h, mb, X1)
            _veth(mb, Y1, d_ns, e)
            _up(mb, X1, Y1)
        commands.run(["ip", "-n", ns, "addr", "replace", f"{h_ip}/{HOST_PREFIX_LEN}", "dev", h])
        # one segment per packet, as on a wire: the DUT's rules, the TBF and the delay
        # line see every 1500-byte packet, not 64 KB GSO super-packets
        commands.run(["ip", "-n", ns, "link", "set", h, "gso_max_segs", "1"])
        _up(ns, h)
        commands.run(["ip", "-n", ns, "route", "replace", "default", "via", e_ip, "dev", h])
        commands.run(["ip", "-n", d_ns, "addr", "replace", f"{e_ip}/{HOST_PREFIX_LEN}", "dev", e])
        commands.sysctl_set(d_ns, {f"net.ipv4.conf.{e}.rp_filter": 0})
        _up(d_ns, e)
    client_range(prefix)


def client_range(prefix: str) -> None:
    """:data:`CLIENT_NET` local on h0 and routed to it from the DUT; idempotent."""
    h0 = host_netns(prefix, 0)
    commands.run(["ip", "-n", h0, "route", "replace", "local", CLIENT_NET, "dev", "lo"])
    commands.run(
        ["ip", "-n", dut_netns(prefix), "route", "replace", CLIENT_NET, "via", H0_IP, "dev", E0]
    )


def bridge(prefix: str, on: bool) -> None:
    """Join x1 and y1 with a kernel bridge (on), or leave them apart for the delay line."""
    mb = mb_netns(prefix)
    have = B1 in _links(mb)
    if on:
        if not have:
            commands.run(["ip", "-n", mb, "link", "add", B1, "type", "bridge", "stp_state", "0"])
        for ifname in (X1, Y1):
            commands.run(["ip", "-n", mb, "link", "set", ifname, "master", B1])
        _up(mb, B1)
    elif have:
        commands.run(["ip", "-n", mb, "link", "del", B1], check=False)


def apply_tbf(prefix: str, tc_args: list[str] | None) -> None:
    """The lab's TBF on e1 egress too (the transport flows' bottleneck), or none."""
    d_ns = dut_netns(prefix)
    if tc_args:
        commands.run(["tc", "-n", d_ns, "qdisc", "replace", "dev", E1, "root", *tc_args])
    else:
        commands.run(["tc", "-n", d_ns, "qdisc", "del", "dev", E1, "root"], check=False)


def remove(prefix: str) -> None:
    """Delete both host namespaces (their veths go with them); safe when absent."""
    for side in (0, 1):
        commands.netns_delete(host_netns(prefix, side))
    commands.netns_delete(mb_netns(prefix))


def exists(prefix: str) -> bool:
    names = [host_netns(prefix, 0), host_netns(prefix, 1), mb_netns(prefix)]
    return all(commands.netns_exists(n) for n in names)


def describe(prefix: str) -> dict:
    """What profiles need: each side's namespace and address (``hosts:`` in a profile)."""
    return {
        "p0": {
            "netns": host_netns(prefix, 0),
            "ipv4": H0_IP,
            "gateway": E0_IP,
            "clients": CLIENT_NET,
            "clients_nat": E1_IP,
        },
        "p1": {"netns": host_netns(prefix, 1), "ipv4": H1_IP, "gateway": E1_IP},
    }
