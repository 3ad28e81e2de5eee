"""``tgen rfc9411 cps PROFILE`` and ``tgen rfc9411 concurrent PROFILE``: RFC 9411-style
(NGFW benchmarking) searches over a profile's request/response flows on the RFC 9971
search (methodology/procedures/mlr/appsearch.py); the report, the store and the exit code
as the other methodology verbs (:func:`~tgen_tui.commands.methodology_cmds.run_procedure`).
"""

from __future__ import annotations

import argparse
import sys

from tgen_tui.commands.methodology_cmds import _count, _dur, _dut_options, _output_options
from tgen_tui.diagnostics import BadInput, ExitCode
from tgen_tui.engine.cli_options import add_cores_option, add_preflight_option

EPILOG = """\
examples:
  tgen lab up --prefix t3 --transport-hosts --ct-new-rate 1200
  tgen rfc9411 cps profiles/http-cps.yaml --max-load 2400 --min-load 200 --json cps.json
  tgen lab set --prefix t3 --ct-new-rate 0 --ct-limit 1500
  tgen rfc9411 concurrent profiles/http-hold.yaml --max-load 3000 --trial 3s --json c.json

cps: the load is new connections per second: every app flow with load: {connections_per_s}
  scaled to the trial's load (tgen run --rate-scale), the DUT's conntrack flushed before
  each trial. A trial's loss: connections that failed (refused, reset, timed out: give the
  app a timeout below the SYN retransmission, 1 s, so that a dropped SYN fails its
  connection; the tester's own limits) and those due but not attempted.
concurrent: the load is connections kept open: every app flow with load: {concurrent}
  set to its share of the trial's load (a derived profile); its app should hold its
  connections (per_connection large, a think time). A trial of C loses the larger of
  C - established and the failed connections, at most C.
Goal (RFC 9971): by default one, "failed": loss ratio 0.001 %% (RFC 9411's criterion for
  failed connections), exceed 0, one --trial per load, --width 2 %%; --goal NAME=LOSS[,...]
  as tgen search's (unset values from that default).
Load range: --max-load (default: the profile's own load), --min-load (default: max / 10).
Each trial is one tgen run of the profile (not stored on its own: the search is).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rfc9411",
        help="RFC 9411-style app-flow searches: connections per second, concurrent capacity",
        description="RFC 9411-style searches over request/response flows (RFC 9971 search).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tests = p.add_subparsers(dest="test", metavar="TEST")
    for name, text in (
        ("cps", "highest new-connection rate with failed connections under the goal"),
        ("concurrent", "most concurrent connections held with failures under the goal"),
    ):
        q = tests.add_parser(
            name,
            help=text,
            description=text,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _options(q)
        q.set_defaults(func=cmd_rfc9411, verb_name=f"rfc9411-{name}", search_kind=name)
    p.set_defaults(func=_help(p))


def _help(parser: argparse.ArgumentParser):
    def f(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return int(ExitCode.BAD_INPUT)

    return f


def _options(q: argparse.ArgumentParser) -> None:
    q.add_argument("profile", metavar="PROFILE", help="profile YAML with app flows")
    add_preflight_option(q)
    g = q.add_argument_group("search")
    g.add_argument("--trial", default="10s", help="trial length (default: 10s; --quick: 2s)")
    g.add_argument("--goal", action="append", default=[], metavar="SPEC",
                   help="a search goal (default: failed=0.001%%,exceed=0), repeatable")  # fmt: skip
    g.add_argument("--width", default="2%", help="goal width relative to the upper bound (2%%)")
    g.add_argument("--min-load", help="lowest load tried (default: max load / 10)")
    g.add_argument("--max-load", help="highest load tried (default: the profile's own)")
    g.add_argument("--settle", default="1s", help="pause between trials (default: 1s)")
    g.add_argument("--quick", action="store_true", help="2 s trials (marked in the report)")
    add_cores_option(g)
    _dut_options(q.add_argument_group("DUT"))
    _output_options(q.add_argument_group("output"))
    from tgen_tui.results.record import add_store_options

    add_store_options(q)


def config_from_args(args: argparse.Namespace):
    from tgen_tui.methodology.procedures.mlr.appsearch import AppSearchConfig, default_goal
    from tgen_tui.methodology.procedures.mlr.goals import parse_goal, parse_ratio

    trial = 2.0 if args.quick else _dur(args.trial, "--trial")
    if trial <= 0:
        raise BadInput(f"--trial {args.trial}: must be > 0 (e.g. 10s)")
    width = parse_ratio(args.width, "--width")
    if not 0 < width < 1:
        raise BadInput(f"--width: {args.width}: give a ratio in (0, 1), e.g. 2% or 0.02")
    base = default_goal(trial, width)
    goals = [parse_goal(s, base) for s in args.goal] or [base]
    if len({g.name for g in goals}) < len(goals):
        raise BadInput("--goal: one --goal per name")
    lo, hi = _count(args.min_load, "--min-load"), _count(args.max_load, "--max-load")
    if lo and hi and lo >= hi:
        raise BadInput("--min-load must be below --max-load")
    extra = ["--no-store"]
    for opt, v in (("--dut-netns", args.dut_netns), ("--dut-ssh", args.dut_ssh),
                   ("--cores", args.cores)):  # fmt: skip
        if v:
            extra += [opt, v]
    return AppSearchConfig(
        kind=args.search_kind,
        goals=goals,
        min_load=lo,
        max_load=hi,
        quick_text=f"--quick: {trial:g} s trials" if args.quick else "",
        trial_args=extra,
    )


def params_from_args(args: argparse.Namespace):
    from tgen_tui.commands.methodology_cmds import _check_plots_dir
    from tgen_tui.diagnostics import check_output_file
    from tgen_tui.engine.cli_options import check_dut_ssh, parse_cores_option
    from tgen_tui.methodology.kit.params import Params

    check_dut_ssh(args.dut_ssh)
    if args.dut_reset:
        raise BadInput("--dut-reset: not used by tgen rfc9411 (each trial is tgen run --flush-dut)")
    _check_plots_dir(args.plots)
    for opt in ("json", "ndjson", "md", "csv"):
        check_output_file(getattr(args, opt, None), f"--{opt}")
    cores = parse_cores_option(args.cores)
    return Params(
        profile=args.profile,
        duration_s=2.0 if args.quick else _dur(args.trial, "--trial"),
        settle_s=_dur(args.settle, "--settle"),
        repeats=1,
        quick=args.quick,
        dut_netns=args.dut_netns,
        dut_ssh=args.dut_ssh,
        cores=list(cores) if cores else None,
    )


def cmd_rfc9411(args: argparse.Namespace) -> int:
    from tgen_tui.commands.methodology_cmds import run_procedure

    cfg = config_from_args(args)
    return run_procedure(args, args.verb_name, params_from_args(args), config=cfg)
