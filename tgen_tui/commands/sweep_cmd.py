"""``tgen sweep PROFILE sessions=FIRST..LAST``: throughput and connection rate against the
number of sessions the DUT holds (CSIT's NAT44 ladder; :mod:`tgen_tui.methodology.procedures.sweep`).
"""

from __future__ import annotations

import argparse

SWEEP_EPILOG = """\
examples:
  tgen lab up --prefix sw
  tgen sweep profiles/nat44-stateful.yaml sessions=1k..16k --points 3 --quick --max-rate 50k
  tgen sweep profiles/rfc9693-capacity.yaml sessions=64512..4M --points 4 --plots out/

For each session count S: the Initiator stream is narrowed to S unique tuples; a
connection-rate search (each trial resets the DUT, opens S connections and checks the
conntrack count rose by S); a fill that opens the S sessions again and checks them; then a
throughput search over those S sessions with the table full. One row per S: sessions,
connection rate, throughput, entries opened, conntrack after; and a plot of both rates.
"""


def register(sub: argparse._SubParsersAction) -> None:
    from tgen_tui.commands.methodology_cmds import _common, _stateful

    p = sub.add_parser(
        "sweep",
        help="throughput and connection rate against the number of sessions (table, plot)",
        description="Session-scale sweep: throughput and connection rate against sessions.",
        epilog=SWEEP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p, repeats=1)
    _stateful(p)
    p.add_argument("sessions", metavar="sessions=FIRST..LAST", help="or sessions=A,B,C")
    p.add_argument(
        "--points", type=int, default=3, help="session counts from FIRST to LAST (default: 3)"
    )
    p.set_defaults(func=cmd_sweep, verb_name="sweep")


def cmd_sweep(args: argparse.Namespace) -> int:
    from tgen_tui.commands.methodology_cmds import _count, params_from_args, run_procedure
    from tgen_tui.methodology.procedures.sweep.sessions import parse_sessions

    sessions = parse_sessions(args.sessions, args.points, _count)
    return run_procedure(args, "sweep", params_from_args(args), sessions=sessions)
