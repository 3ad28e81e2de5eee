"""``tgen preflight PROFILE``: check the path before a test (issue 19).

Per port: link up, MTU, gateway resolved (with its MAC); the DUT over the profile's
channel, with its conntrack readable; per stream: a short low-rate burst arrives at its
``rx_port`` (and, for IPv4 UDP/TCP, whether the path translated it). A table, or
``--json``; exit 1 on any failure. The checks live in :mod:`tgen_tui.engine.preflight`;
``tgen run``, ``tgen tui`` and the methodology verbs take ``--preflight`` to run them first.
"""

from __future__ import annotations

import argparse
import json
import sys

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.cli_options import add_cores_option, add_dut_options, parse_cores_option


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "preflight",
        help="check links, MTU, gateways, the DUT and a burst per stream before a test",
        description="Check the path of a profile: per port link, MTU and gateway (ARP/ND), "
        "the DUT channel and its conntrack, and a short burst per stream to its rx_port. "
        "Exit 1 when a check fails.",
    )
    p.add_argument("profile", metavar="PROFILE")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--ports", help="comma-separated port names to check (default: all)")
    p.add_argument("--no-burst", action="store_true", help="skip the burst per stream")
    add_cores_option(p)
    add_dut_options(p)
    p.set_defaults(func=cmd_preflight)


def cmd_preflight(args: argparse.Namespace) -> int:
    import trio

    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.engine.preflight import preflight, render_table
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile

    compiled = compile_profile(load_profile(args.profile))
    ports = [p.strip() for p in args.ports.split(",") if p.strip()] if args.ports else None
    unknown = [p for p in ports or () if p not in compiled.ports]
    if unknown or ports == []:
        raise BadInput(
            f"--ports: unknown port {', '.join(map(repr, unknown)) or repr(args.ports)} "
            f"(the profile has {', '.join(compiled.ports)})"
        )
    opts = EngineOptions(
        cores=parse_cores_option(args.cores),
        ports=ports,
        dut_netns=args.dut_netns,
        dut_ssh=args.dut_ssh,
        neighbours={},
    )
    checks = trio.run(preflight, compiled, opts, not args.no_burst)
    ok = all(c.ok for c in checks)
    if args.json:
        doc = {"profile": args.profile, "passed": ok, "checks": [c.to_dict() for c in checks]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(render_table(checks))
    return 0 if ok else 1
