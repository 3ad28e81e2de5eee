"""The DUT's configuration, generated from a profile: the one generator the lab uses too.

From the profile's forward streams (a tester port that sends, the port it is received
on), :func:`plan_from_profile` derives what a NAT44 gateway or a router in between needs:
its inside and outside interface addresses (the ports' ``gateway``, else the first host
of the /24 around the streams' addresses), the routes to the tester's networks beyond
them, static neighbours for the tester's addresses (the MACs from the streams' ``eth.src``,
the interfaces' own MACs where the namespace exists, or ``--mac``), the MAC the streams
send to (set on the DUT's interface when asked, as the lab does), the NAT's public
address and port range, and the conntrack sizing for the profile's flows (USERS.md §1:
the table at 1.342 × the connections, rounded up to a power of two, the hash as large).

Renderers: :func:`nft_nat44` (the lab's ruleset: NAT44 with optional impairments and
filter rules, one ``nft -f`` transaction), :func:`nft_router` (forward only),
:func:`iptables_nat44` (``iptables-restore`` text), and :func:`shell_script` (the
addresses, sysctls, neighbours and the ruleset, for ``sh`` on the DUT).
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from typing import Any

KINDS = ("nftables-nat44", "nftables-router", "iptables-nat44")
TABLE = "tgen_dut"
MAX_NEIGHBOURS = 1024  # static neighbours per side; more: let the tester answer ARP


@dataclass
class Side:
    """One DUT interface and the tester network behind it."""

    ifname: str
    address: str  # the DUT's address/prefix on it
    network: str
    tester_hosts: list[str] = field(default_factory=list)  # tester addresses on it
    tester_mac: str | None = None
    dut_mac: str | None = None  # the MAC the tester sends to (the profile's eth.dst)


@dataclass
class DutPlan:
    inside: Side
    outside: Side
    public_ip: str  # the NAT's source address (the outside address)
    port_range: tuple[int, int] | None = None  # snat to IP:lo-hi (None: keep ports when free)
    connections: int = 0
    conntrack_max: int = 0
    conntrack_buckets: int = 0
    comments: list[str] = field(default_factory=list)


def conntrack_size(connections: int) -> int:
    """USERS.md §1: 1.342 × the connections, up to the next power of two (at least 2^16)."""
    need = max(65536, math.ceil(1.342 * max(connections, 1)))
    return 1 << (need - 1).bit_length()


def _net24(addr: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(f"{addr}/24", strict=False)


def _dut_address(net: ipaddress.IPv4Network, gateway: str | None, taken: set[str]) -> str:
    if gateway:
        return f"{gateway}/{net.prefixlen}"  # the port's gateway: the DUT's address
    for cand in (net.network_address + 1, net.broadcast_address - 1):
        if str(cand) not in taken:
            return f"{cand}/{net.prefixlen}"
    raise ValueError(f"no free address for the DUT in {net}")


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def _hosts(lo: Any, hi: Any) -> list[str]:
    a, b = int(lo), int(hi)
    n = min(b - a + 1, MAX_NEIGHBOURS)
    return [str(ipaddress.IPv4Address(a + i)) for i in range(n)]


def plan_from_profile(
    profile: Any,
    *,
    inside_if: str = "d0",
    outside_if: str = "d1",
    macs: dict[str, str] | None = None,
    port_range: tuple[int, int] | None = None,
    read_mac: Any = None,
) -> DutPlan:
    """The DUT's plan for ``profile`` (a validated Profile). ``macs``: port or address ->
    MAC (``--mac``); ``read_mac(port)``: the interface's own MAC, or None."""
    macs = dict(macs or {})
    fwd = [s for s in profile.streams if s.rx_port and s.ipv4 is not None and s.enabled]
    if not fwd:
        raise ValueError("the profile has no IPv4 stream from one port to another (rx_port)")
    first = fwd[0]
    in_port, out_port = first.port, first.rx_port
    ins = [s for s in fwd if s.port == in_port and s.rx_port == out_port]
    p_in, p_out = profile.ports[in_port], profile.ports[out_port]
    src_lo, dst_lo = first.ipv4.src.min, first.ipv4.dst.min
    net_in = p_in.ipv4.network if p_in.ipv4 else _net24(str(src_lo))
    net_out = p_out.ipv4.network if p_out.ipv4 else _net24(str(dst_lo))
    in_hosts = sorted({h for s in ins for h in _hosts(s.ipv4.src.min, s.ipv4.src.max)},
                      key=ipaddress.IPv4Address)  # fmt: skip
    out_hosts = sorted({h for s in ins for h in _hosts(s.ipv4.dst.min, s.ipv4.dst.max)},
                       key=ipaddress.IPv4Address)  # fmt: skip
    if p_in.ipv4:
        in_hosts = sorted({*in_hosts, str(p_in.ipv4.ip)}, key=ipaddress.IPv4Address)
    if p_out.ipv4:
        out_hosts = sorted({*out_hosts, str(p_out.ipv4.ip)}, key=ipaddress.IPv4Address)

    def mac_of(port: str, fallback: str | None) -> str | None:
        if port in macs:
            return macs[port]
        got = read_mac(port) if read_mac is not None else None
        return got or fallback

    back = [s for s in profile.streams if s.port == out_port and s.rx_port == in_port]
    inside = Side(
        inside_if,
        _dut_address(net_in, _s(p_in.gateway), set(in_hosts)),
        str(net_in),
        [h for h in in_hosts if ipaddress.IPv4Address(h) in net_in],
        mac_of(in_port, first.eth.src if first.eth else None),
        first.eth.dst if first.eth else None,
    )
    outside = Side(
        outside_if,
        _dut_address(net_out, _s(p_out.gateway), set(out_hosts)),
        str(net_out),
        [h for h in out_hosts if ipaddress.IPv4Address(h) in net_out],
        mac_of(out_port, back[0].eth.src if back and back[0].eth else None),
        back[0].eth.dst if back and back[0].eth else None,
    )
    conns = sum(int(s.distinct_flows()) for s in ins)
    size = conntrack_size(conns)
    plan = DutPlan(inside, outside, str(ipaddress.IPv4Interface(outside.address).ip),
                   port_range, conns, size, size)  # fmt: skip
    for side, what in ((inside, "inside"), (outside, "outside")):
        if side.tester_mac is None and side.tester_hosts:
            plan.comments.append(
                f"the tester's {what} MAC is unknown: give --mac {side.ifname}=MAC, or let the "
                "tester answer ARP (the port's ipv4:)"
            )
    return plan


# ------------------------------------------------------------------ nftables
def nft_nat44(
    *,
    table: str = TABLE,
    outside_if: str,
    public_ip: str,
    port_range: tuple[int, int] | None = None,
    fully_random: bool = False,
    drop_percent: float = 0.0,
    rate_limit_pps: int | None = None,
    ct_limit: int | None = None,
    ct_new_rate: int | None = None,
    filter_rules: list[str] | None = None,
    extra_nat: list[str] | None = None,
) -> str:
    """A NAT44 ruleset as one ``nft -f`` transaction (the old table replaced atomically):
    the impairments chain (random drop in 0.01 % steps, a rate limit, a cap on tracked
    flows), the filter chain (``filter_rules``, then accept), and the SNAT (then the
    ``extra_nat`` rules of nat_post: the lab's client range)."""
    t = table
    lines = [f"table ip {t}", f"delete table ip {t}", f"table ip {t} {{", "  chain fwd_drop {",
             "    type filter hook forward priority -10; policy accept;"]  # fmt: skip
    k = int(round(drop_percent * 100))
    if k > 0:
        lines.append(f"    numgen random mod 10000 < {k} counter drop")
    if rate_limit_pps:
        burst = max(5, rate_limit_pps // 50)
        lines.append(
            f"    limit rate over {rate_limit_pps}/second burst {burst} packets counter drop"
        )
    if ct_limit:
        lines.append(  # the comment names the cause in the drop counters (dut/counters.py)
            f'    ct state new ct count over {ct_limit} counter drop comment "ct count over {ct_limit}"'
        )
    if ct_new_rate:  # a connections-per-second limit (burst: 100 ms worth, at least 5:
        # a tester late by a few ms catches up without meeting the limit)
        lines.append(
            f"    ct state new limit rate over {ct_new_rate}/second burst "
            f"{max(5, ct_new_rate // 10)} packets counter drop comment "
            f'"new connections over {ct_new_rate}/s"'
        )
    lines += [
        "  }",
        "  chain fwd_filter {",
        "    type filter hook forward priority 0; policy accept;",
    ]
    lines.extend("    " + r for r in filter_rules or [])
    to = public_ip + (f":{port_range[0]}-{port_range[1]}" if port_range else "")
    lines += [
        "    accept",
        "  }",
        "  chain nat_post {",
        "    type nat hook postrouting priority 100; policy accept;",
        f'    oifname "{outside_if}" snat to {to}' + (" fully-random" if fully_random else ""),
    ]
    lines += ["    " + r for r in extra_nat or []] + ["  }", "}", ""]  # fmt: skip
    return "\n".join(lines)


def nft_router(*, table: str = TABLE) -> str:
    """Forward everything, count it (no NAT)."""
    return "\n".join([f"table ip {table}", f"delete table ip {table}", f"table ip {table} {{",
                      "  chain fwd {", "    type filter hook forward priority 0; policy accept;",
                      "    counter accept", "  }", "}", ""])  # fmt: skip


def iptables_nat44(plan: DutPlan) -> str:
    """``iptables-restore`` text: SNAT out of the outside interface, forward accepted."""
    to = plan.public_ip + (f":{plan.port_range[0]}-{plan.port_range[1]}" if plan.port_range else "")
    return "\n".join(["*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]",
                      ":OUTPUT ACCEPT [0:0]", ":POSTROUTING ACCEPT [0:0]",
                      f"-A POSTROUTING -o {plan.outside.ifname} -j SNAT --to-source {to}",
                      "COMMIT", "*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]",
                      ":OUTPUT ACCEPT [0:0]", "COMMIT", ""])  # fmt: skip


def ruleset_for(plan: DutPlan, kind: str) -> str:
    if kind == "nftables-nat44":
        return nft_nat44(outside_if=plan.outside.ifname, public_ip=plan.public_ip,
                         port_range=plan.port_range)  # fmt: skip
    if kind == "nftables-router":
        return nft_router()
    if kind == "iptables-nat44":
        return iptables_nat44(plan)
    raise ValueError(f"unknown kind {kind!r} (kinds: {', '.join(KINDS)})")


def shell_script(plan: DutPlan, kind: str, *, set_macs: bool = True, sizing: bool = True) -> str:
    """The whole DUT set-up for ``sh``: interfaces up with their addresses (and the MACs
    the profile sends to), forwarding and conntrack sysctls, static neighbours, the ruleset."""
    L = ["#!/bin/sh", f"# tgen dut config --kind {kind}: generated from the profile; run as root on the DUT",
         "set -e"]  # fmt: skip
    L += [f"# note: {c}" for c in plan.comments]
    for side in (plan.inside, plan.outside):
        if set_macs and side.dut_mac:
            L.append(
                f"ip link set dev {side.ifname} address {side.dut_mac}  # the profile sends to it"
            )
        L.append(f"ip addr replace {side.address} dev {side.ifname}")
        L.append(f"ip link set dev {side.ifname} up")
    L += ["sysctl -qw net.ipv4.ip_forward=1"]
    if kind != "nftables-router" and sizing:  # machine-wide on Linux: skip in a namespace
        L += [f"# conntrack for {plan.connections:,} connections: 1.342 x, to a power of two",
              "modprobe nf_conntrack 2>/dev/null || true",
              f"sysctl -qw net.netfilter.nf_conntrack_max={plan.conntrack_max} || true",
              f"echo {plan.conntrack_buckets} > /sys/module/nf_conntrack/parameters/hashsize 2>/dev/null || true"]  # fmt: skip
    for side in (plan.inside, plan.outside):
        if side.tester_mac:
            L += [f"ip neigh replace {h} lladdr {side.tester_mac} dev {side.ifname} nud permanent"
                  for h in side.tester_hosts]  # fmt: skip
    text = ruleset_for(plan, kind)
    if kind.startswith("nftables"):
        L += ["nft -f - <<'EOF'", text.rstrip("\n"), "EOF"]
    else:
        L += ["iptables-restore <<'EOF'", text.rstrip("\n"), "EOF"]
    return "\n".join(L) + "\n"


__all__ = ["KINDS", "DutPlan", "Side", "conntrack_size", "nft_nat44", "nft_router",
           "iptables_nat44", "plan_from_profile", "ruleset_for", "shell_script"]  # fmt: skip
