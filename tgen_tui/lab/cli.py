"""``tgen lab up|down|status|set|flush``: argparse verbs for the network-namespace lab.

The main CLI calls :func:`register` with its subparsers, then ``args.func(args)``; every
handler returns an exit code and raises :class:`~tgen_tui.diagnostics.BadInput` (exit 2)
or :class:`~tgen_tui.diagnostics.EnvironmentProblem` (exit 3) for errors.
"""

from __future__ import annotations

import argparse
import json

from tgen_tui.diagnostics import BadInput
from tgen_tui.lab import config as labconfig
from tgen_tui.lab import middlebox, topology
from tgen_tui.lab.naming import (
    D0_IP,
    D0_MAC,
    D1_IP,
    D1_MAC,
    DEFAULT_PREFIX,
    P0_IP,
    P0_MAC,
    P1_IP,
    P1_MAC,
)

DIAGRAM = f"""\
topology "nat" (default):

  PREFIX-tester (ports, no IPs)        PREFIX-dut (forwards, NAT44, conntrack)
  p0 {P0_MAC}  <--veth-->  d0 {D0_MAC}  {D0_IP}/24  inside
     acts as {P0_IP}                    |  nftables forward: random drop, rate limit,
                                           |  ct count cap, N filter rules, accept;
                                           |  postrouting: snat to {D1_IP} out of d1
  p1 {P1_MAC}  <--veth-->  d1 {D1_MAC}  {D1_IP}/24  outside
     acts as {P1_IP}                    (optional TBF qdisc on d1 egress)

  Tester ports have no IP address and IPv6 is off, so the tester's own stack never
  answers or consumes traffic; the DUT has static neighbours for {P0_IP} and {P1_IP}.
  Send from p0 with destination MAC {D0_MAC} (d0); frames reach p1 with source
  {D1_IP}. The DUT also routes 198.18.0.0/16 back to p0 and everything else to p1.
  A keeper process in PREFIX-dut puts those neighbours and routes back when d0 or d1
  comes up again (a link down flushes them), so a link-flap test measures the flap.

topology "direct": one veth pair p0 <-> p1 in PREFIX-tester, no DUT.

topology "router": as "nat", but the DUT learns the tester by ARP and ND (no static
  neighbours; profiles give ports ipv4/gateway, ipv6/gateway6: the ports answer), and
  routes IPv6 (d0 2001:2::1/64, d1 2001:2:0:1::1/64). See profiles/router-dual-stack.yaml.
"""

UP_EPILOG = f"""\
{DIAGRAM}
Global settings (--conntrack-max, --conntrack-buckets) can only be changed from the
initial namespace, so they affect the whole machine: the old values are recorded in
/run/tgen-lab/PREFIX.json and restored by `tgen lab down`.

UDP timeouts are raised by default (120 s / 180 s instead of the kernel's 30 s / 120 s)
so that RFC 9693 trials do not lose entries between the fill and measurement phases.

RPS: veth does receive work on the sending CPU. By default receive work of p0, p1, d0 and
d1 is steered to CPU 0 (mask 1) on machines with 2 or more CPUs, because workers are
pinned to the last cores; --rps-cpus 0 turns RPS off.

examples:
  sudo tgen lab up
  sudo tgen lab up --conntrack-max 1048576 --ct-limit 500000 --udp-timeout 300
  sudo tgen lab up --drop-percent 1 --tbf 10mbit,40ms
  sudo tgen lab up --filter-rules 10000        # USERS.md section 3: rule-set scaling
  sudo tgen lab up --topology direct --prefix bench
"""


def _pos_int(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return v


def _percent(text: str) -> float:
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    return v


def _add_prefix(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help="name prefix of everything the lab creates (default: %(default)s); "
        "namespaces are PREFIX-tester and PREFIX-dut",
    )


def _add_dut_options(p: argparse.ArgumentParser, *, for_set: bool) -> None:
    d = argparse.SUPPRESS if for_set else None
    g = p.add_argument_group("DUT options" if not for_set else "DUT settings to change")
    g.add_argument(
        "--conntrack-max",
        type=_pos_int,
        default=d,
        metavar="N",
        help="global nf_conntrack_max (whole machine; restored on down)",
    )
    g.add_argument(
        "--conntrack-buckets",
        type=_pos_int,
        default=d,
        metavar="N",
        help="global conntrack hash size, /sys/module/nf_conntrack/parameters/hashsize "
        "(restored on down; skipped with a warning if not writable)",
    )
    g.add_argument(
        "--ct-limit",
        type=_pos_int,
        default=d,
        metavar="N",
        help="per-DUT cap on tracked flows: nftables 'ct state new ct count over N drop' "
        "(the namespace-local alternative to --conntrack-max; 0 = none)",
    )
    g.add_argument(
        "--udp-timeout",
        type=_pos_int,
        default=argparse.SUPPRESS if for_set else labconfig.DEFAULT_UDP_TIMEOUT,
        metavar="S",
        help=f"DUT's nf_conntrack_udp_timeout in seconds (default: "
        f"{labconfig.DEFAULT_UDP_TIMEOUT}, raised from the kernel's 30 so RFC 9693 trials do "
        "not lose entries)",
    )
    g.add_argument(
        "--udp-stream-timeout",
        type=_pos_int,
        default=argparse.SUPPRESS if for_set else labconfig.DEFAULT_UDP_STREAM_TIMEOUT,
        metavar="S",
        help=f"DUT's nf_conntrack_udp_timeout_stream in seconds (default: "
        f"{labconfig.DEFAULT_UDP_STREAM_TIMEOUT}, raised from the kernel's 120)",
    )
    g.add_argument(
        "--drop-percent",
        type=_percent,
        default=argparse.SUPPRESS if for_set else 0.0,
        metavar="P",
        help="drop P %% of forwarded packets at random (nftables numgen, 0.01 %% steps)",
    )
    g.add_argument(
        "--rate-limit",
        dest="rate_limit_pps",
        type=_pos_int,
        default=d,
        metavar="PPS",
        help="drop forwarded packets above PPS per second (nftables limit; 0 = none)",
    )
    g.add_argument(
        "--ct-new-rate",
        dest="ct_new_rate",
        type=_pos_int,
        default=d,
        metavar="N",
        help="drop new connections above N per second: nftables 'ct state new limit rate "
        "over N/second' (a connections-per-second limit for app flows; 0 = none)",
    )
    g.add_argument(
        "--tbf",
        default=d,
        metavar="RATE[,LATENCY]",
        help="token-bucket bottleneck on d1 egress, e.g. 10mbit,40ms: RATE, and a queue "
        "of RATE x LATENCY bytes, so a frame waits at most LATENCY once it is full "
        "(default 50ms); 'none' removes it",
    )
    g.add_argument(
        "--transport-hosts",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS if for_set else False,
        help="make the transport hosts PREFIX-h0 (198.18.100.2) and PREFIX-h1 (198.19.100.2) "
        "on their own links to the DUT, for profiles with transport: streams (implied by "
        "--delay and --loss)",
    )
    g.add_argument(
        "--delay",
        default=d,
        metavar="TIME",
        help="delay each way on the transport hosts' path (h0/h1, user-space delay line in "
        "the middlebox namespace PREFIX-mb next to the DUT), e.g. 20ms for a 40 ms RTT (a "
        "bare number is ms); 'none' removes it and keeps the hosts, bridged",
    )
    g.add_argument(
        "--loss",
        type=_percent,
        default=argparse.SUPPRESS if for_set else 0.0,
        metavar="P",
        help="drop P %% at random each way on the transport hosts' path (the delay line)",
    )
    g.add_argument(
        "--filter-rules",
        type=_pos_int,
        default=argparse.SUPPRESS if for_set else 0,
        metavar="N",
        help="N non-matching rules before the accepting rule in the forward chain "
        "(rule-set scaling; 10,000 load in about a second)",
    )
    g.add_argument(
        "--nat-ports",
        choices=labconfig.NAT_PORT_MODES,
        default=argparse.SUPPRESS if for_set else "preserve",
        help="how the NAT picks public source ports: keep the private port when free "
        "(preserve, Linux's default) or a random one for every new flow (random: nftables "
        "snat fully-random; an RFC 9693 Responder must learn the tuples)",
    )
    g.add_argument(
        "--rps-cpus",
        default=argparse.SUPPRESS if for_set else "default",
        metavar="MASK",
        help="hex CPU mask for receive packet steering on p0, p1, d0, d1 (default: 1, "
        "i.e. CPU 0, on machines with 2+ CPUs; 0 turns RPS off)",
    )
    g.add_argument(
        "--xdp",
        dest="xdp_peers",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS if for_set else False,
        help="native XDP_PASS on d0 and d1 (direct: p0, p1): NAPI on the veths facing the "
        "tester, which tx_path xdp needs (--no-xdp takes it off)",
    )


_OPTION_FIELDS = (*labconfig.DUT_FIELDS, "rps_cpus", "xdp_peers")


def _normalise(field: str, value):
    if field in ("ct_limit", "rate_limit_pps", "ct_new_rate", "conntrack_max", "conntrack_buckets"):
        return value or None  # 0 means "none"
    if field == "tbf" and value is not None and value.lower() in ("none", "off", ""):
        return None
    if field == "delay" and value is not None and value.lower() in ("none", "off", "", "0"):
        return None
    if field == "rps_cpus" and value == "default":
        return labconfig.default_rps_cpus()
    return value


def _changes(args: argparse.Namespace) -> dict:
    return {f: _normalise(f, getattr(args, f)) for f in _OPTION_FIELDS if hasattr(args, f)}


def cmd_up(args: argparse.Namespace) -> int:
    cfg = labconfig.LabConfig(prefix=args.prefix, topology=args.topology, **_changes(args))
    st = topology.up(cfg)
    _print_status(st, as_json=args.json)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    topology.down(args.prefix)
    if not args.quiet:
        print(f"lab {args.prefix!r} is down")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    st = topology.status(args.prefix)
    _print_status(st, as_json=args.json)
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    changes = _changes(args)
    if not changes:
        raise BadInput("tgen lab set: give at least one setting, e.g. --drop-percent 1")
    st = topology.set_dut(args.prefix, **changes)
    _print_status(st, as_json=args.json)
    return 0


def cmd_flush(args: argparse.Namespace) -> int:
    topology.flush_conntrack(args.prefix)
    return 0


def _print_status(st: dict, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(st, indent=2, sort_keys=False))
        return
    print(format_status(st))


def format_status(st: dict) -> str:
    """The human-readable rendering of :func:`topology.status`."""
    lines = []
    state = "up" if st.get("up") else "DOWN"
    lines.append(f"lab {st['prefix']!r}: {state}, topology {st.get('topology') or '-'}")
    for ns in st.get("namespaces", {}).values():
        lines.append(f"  namespace {ns['name']:<20} {'present' if ns['exists'] else 'missing'}")
    for role, ifs in st.get("interfaces", {}).items():
        for name, i in ifs.items():
            addrs = ",".join(i["addresses"]) or "no IP"
            lines.append(
                f"  {role:<6} {name:<3} {i['mac']}  {i['state']:<7} {addrs:<16}"
                f" rps_cpus={i.get('rps_cpus') or '-'}"
            )
    for name, p in st.get("ports", {}).items():
        lines.append(
            f"  port {name}: {p['side']}, send as {p['ip']} to gateway {p['gateway']}"
            f" ({p['gateway_mac']})"
        )
    dut = st.get("dut")
    if dut:
        lines.append(
            f"  DUT conntrack: count {_v(dut.get('count'))} / max {_v(dut.get('conntrack_max'))},"
            f" buckets {_v(dut.get('conntrack_buckets'))}, udp timeout"
            f" {_v(dut.get('udp_timeout'))} s, stream {_v(dut.get('udp_stream_timeout'))} s"
        )
        nft = dut.get("nft")
        if nft:
            lines.append(
                f"  DUT nftables ({'loaded' if nft['loaded'] else 'MISSING'}): {nft['nat']};"
                f" drop {_v(nft['drop_percent'])} %, rate limit {_v(nft['rate_limit_pps'])} pps,"
                f" ct limit {_v(nft['ct_limit'])}, filter rules {_v(nft['filter_rules'])}"
                + (f", new conn/s limit {nft['ct_new_rate']}" if nft.get("ct_new_rate") else "")
            )
            if nft.get("dropped"):
                lines.append(
                    "  DUT dropped so far: "
                    + ", ".join(f"{k} {v}" for k, v in nft["dropped"].items())
                )
        tbf = dut.get("tbf")
        lines.append(f"  DUT d1 egress: {('tbf ' + tbf['spec']) if tbf else 'no qdisc'}")
    kp = st.get("keeper")
    if kp:
        lines.append(
            f"  DUT keeper (pid {kp.get('pid')}, {'running' if kp.get('running') else 'NOT RUNNING'}):"
            f" neighbours and routes restored {kp.get('restores') or 0} times (each"
            " interface once at start, then after each link up)"
        )
    lines += middlebox.status_lines(st)  # transport hosts and delay line (lab/middlebox.py)
    for w in st.get("warnings", []):
        lines.append(f"  warning: {w}")
    return "\n".join(lines)


def _v(x) -> str:
    return "-" if x is None else str(x)


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``lab`` with sub-verbs up, down, status, set, flush to the main CLI's subparsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    lab = subparsers.add_parser(
        "lab",
        help="network-namespace test bed: tester ports and a NAT44 DUT",
        description="Build, inspect and remove the network-namespace test bed (needs root).",
        epilog=DIAGRAM,
        formatter_class=fmt,
    )
    verbs = lab.add_subparsers(dest="lab_verb", metavar="VERB", required=True)

    p = verbs.add_parser(
        "up",
        help="create (or reconfigure) the lab; idempotent",
        description="Create the lab, or reconfigure a running one to these options. "
        "Running it twice with the same options changes nothing.",
        epilog=UP_EPILOG,
        formatter_class=fmt,
    )
    _add_prefix(p)
    p.add_argument(
        "--topology",
        choices=labconfig.TOPOLOGIES,
        default="nat",
        help="nat: tester <-> NAT44 DUT <-> tester (default); direct: p0 <-> p1; "
        "router: a plain router DUT (dynamic ARP/ND, NAT44, IPv6 in 2001:2::/48)",
    )
    _add_dut_options(p, for_set=False)
    p.add_argument("--json", action="store_true", help="print the resulting status as JSON")
    p.set_defaults(func=cmd_up)

    p = verbs.add_parser(
        "down",
        help="remove everything the lab made and restore global settings",
        description="Delete the lab's namespaces (and so its veths, qdiscs and nftables), "
        "restore the global conntrack settings it changed and remove its state file. "
        "Safe to run when nothing is up.",
        epilog="example:\n  sudo tgen lab down --prefix bench",
        formatter_class=fmt,
    )
    _add_prefix(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    p.set_defaults(func=cmd_down)

    p = verbs.add_parser(
        "status",
        help="show namespaces, ports, DUT settings and conntrack count",
        description="Show the topology (namespaces, interfaces with MACs, addresses and link "
        "state), the DUT's nftables options in effect and its conntrack settings and count.",
        epilog=DIAGRAM + "\nexamples:\n  sudo tgen lab status\n  sudo tgen lab status --json",
        formatter_class=fmt,
    )
    _add_prefix(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_status)

    p = verbs.add_parser(
        "set",
        help="change DUT settings of a running lab",
        description="Change settings of a running lab. The nftables ruleset is replaced "
        "atomically (one `nft -f` transaction); options not given keep their values.",
        epilog="examples:\n  sudo tgen lab set --drop-percent 1\n"
        "  sudo tgen lab set --rate-limit 0 --tbf none      # remove both\n"
        "  sudo tgen lab set --filter-rules 10000\n",
        formatter_class=fmt,
    )
    _add_prefix(p)
    _add_dut_options(p, for_set=True)
    p.add_argument("--json", action="store_true", help="print the resulting status as JSON")
    p.set_defaults(func=cmd_set)

    p = verbs.add_parser(
        "flush",
        help="empty the DUT's conntrack table (before each trial)",
        description="Delete every conntrack entry in the DUT namespace (conntrack -F there).",
        epilog="example:\n  sudo tgen lab flush && tgen run profiles/nat-fill.yaml",
        formatter_class=fmt,
    )
    _add_prefix(p)
    p.set_defaults(func=cmd_flush)
    return lab
