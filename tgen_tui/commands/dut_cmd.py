"""``tgen dut config PROFILE --kind K``: the DUT configuration that matches a profile.

It writes what a NAT44 gateway or a router between the tester's ports needs for the
profile's traffic (tgen_tui.dut.config): addresses, forwarding, conntrack sizing,
static neighbours for the tester's addresses and the ruleset. The lab's own ruleset
comes from the same generator, so what the lab runs is what a real box can apply.
"""

from __future__ import annotations

import argparse
import sys

from tgen_tui.diagnostics import BadInput

EPILOG = """\
examples:
  tgen dut config profiles/nat44-stateful.yaml --kind nftables-nat44 > dut.sh   # then: sh dut.sh
  tgen dut config profiles/nat44-stateful.yaml --kind nftables-nat44 --format nft | nft -f -
  tgen dut config profiles/lab.yaml --kind iptables-nat44 --inside-if eth1 --outside-if eth2
  tgen dut config profiles/lab.yaml --kind nftables-nat44 --mac p1=02:74:67:00:01:01

kinds: nftables-nat44 (SNAT to the outside address, conntrack sized for the profile's
flows: 1.342 x the connections, to a power of two, hash as large), nftables-router
(forward only), iptables-nat44 (iptables-restore text).
--format sh (default): a script for the DUT: interface MACs the profile sends to (off with
--keep-macs), addresses, ip_forward, conntrack sizes, static neighbours for the tester's
addresses, the ruleset. --format nft / iptables: the ruleset alone.
The DUT's addresses: each port's gateway: when the profile gives one, else the first free
host of the /24 around the streams' addresses. The tester's MACs: --mac PORT=MAC, else
the port's interface (read in its namespace when it exists), else the streams' eth.src.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dut",
        help="the DUT's side: its configuration generated from a profile",
        description="Tools for the device under test.",
    )
    s = p.add_subparsers(dest="dut_verb", metavar="VERB")
    q = s.add_parser(
        "config",
        help="write the DUT configuration that matches a profile (nftables, iptables)",
        description="Write the DUT configuration that matches the profile's traffic.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    q.add_argument("profile", metavar="PROFILE")
    q.add_argument(
        "--kind", required=True, choices=("nftables-nat44", "nftables-router", "iptables-nat44")
    )
    q.add_argument("--format", choices=("sh", "nft", "iptables"), default="sh", help="default: sh")
    q.add_argument(
        "--inside-if",
        default="d0",
        metavar="IF",
        help="the DUT's interface to the sending port (default: d0)",
    )
    q.add_argument(
        "--outside-if",
        default="d1",
        metavar="IF",
        help="the DUT's interface to the receiving port (default: d1)",
    )
    q.add_argument(
        "--mac", action="append", metavar="PORT=MAC", help="the tester port's MAC (repeatable)"
    )
    q.add_argument(
        "--nat-port-range",
        metavar="LO-HI",
        help="SNAT source ports, e.g. 1024-65535 (default: kept when free)",
    )
    q.add_argument("--keep-macs", action="store_true", help="do not set the DUT interfaces' MACs")
    q.add_argument(
        "--no-sizing",
        action="store_true",
        help="leave nf_conntrack_max and the hash size alone (they are machine-wide: a DUT in a namespace)",
    )
    q.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    q.set_defaults(func=cmd_dut_config)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _macs(items: list[str] | None) -> dict[str, str]:
    import re

    out = {}
    for it in items or []:
        k, _, v = it.partition("=")
        if not k or not re.fullmatch(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}", v):
            raise BadInput(f"--mac {it!r}: give PORT=MAC, e.g. p1=02:74:67:00:01:01")
        out[k] = v.lower()
    return out


def _range(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    lo, _, hi = text.partition("-")
    try:
        a, b = int(lo), int(hi)
    except ValueError:
        raise BadInput(f"--nat-port-range {text!r}: give LO-HI, e.g. 1024-65535") from None
    if not 1 <= a <= b <= 65535:
        raise BadInput(f"--nat-port-range {text!r}: ports 1..65535, LO <= HI")
    return a, b


def cmd_dut_config(args: argparse.Namespace) -> int:
    from tgen_tui.dut import config as C
    from tgen_tui.profiles.loader import load_profile

    fmt_ok = {
        "sh": True,
        "nft": args.kind.startswith("nftables"),
        "iptables": args.kind.startswith("iptables"),
    }
    if not fmt_ok[args.format]:
        raise BadInput(f"--format {args.format} does not fit --kind {args.kind}")
    if args.output:
        from tgen_tui.diagnostics import check_output_file

        check_output_file(args.output, "--output")
    prof = load_profile(args.profile)
    macs = _macs(args.mac)

    def read_mac(port: str) -> str | None:
        import os
        import subprocess

        pc = prof.ports.get(port)
        if pc is None or os.geteuid() != 0:
            return None
        cmd = ["ip", "-o", "link", "show", pc.interface]
        if pc.netns:
            cmd = ["ip", "-n", pc.netns, "-o", "link", "show", pc.interface]
        cp = subprocess.run(cmd, capture_output=True, text=True, check=False)
        words = cp.stdout.split()
        return words[words.index("link/ether") + 1] if "link/ether" in words else None

    try:
        plan = C.plan_from_profile(prof, inside_if=args.inside_if, outside_if=args.outside_if,
                                   macs=macs, port_range=_range(args.nat_port_range),
                                   read_mac=read_mac)  # fmt: skip
    except ValueError as e:
        raise BadInput(f"{args.profile}: {e}") from None
    text = (C.shell_script(plan, args.kind, set_macs=not args.keep_macs, sizing=not args.no_sizing) if args.format == "sh"
            else C.ruleset_for(plan, args.kind))  # fmt: skip
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output} ({args.kind}, {args.format})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for c in plan.comments:
        print(f"tgen: note: {c}", file=sys.stderr)
    return 0
