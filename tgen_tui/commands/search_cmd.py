"""``tgen search PROFILE``: the RFC 9971 multiple loss ratio search (NDR and PDR in one
search), then latency at a load ladder. Options, report and store as the methodology verbs
(:mod:`tgen_tui.commands.methodology_cmds`)."""

from __future__ import annotations

import argparse

from tgen_tui.commands.methodology_cmds import (
    COMMON_EPILOG,
    _common,
    _count,
    _dur,
    params_from_args,
    run_procedure,
)
from tgen_tui.diagnostics import BadInput

SEARCH_EPILOG = """\
examples:
  tgen lab up --prefix t1 && tgen lab set --prefix t1 --rate-limit 40000 --drop-percent 0.2
  tgen search profiles/lab.yaml --quick --max-rate 100k --json s.json
  tgen search profiles/lab.yaml --goal ndr=0 --goal pdr=0.5% --max-rate 100k
  tgen search profiles/lab.yaml --preset rfc2544 --width 2.5% --max-rate 100k
  tgen search profiles/lab.yaml --goal pdr=0.1%,exceed=0,trial=10s,sum=10s

Goals (RFC 9971): NAME=LOSS[,exceed=R][,trial=D][,sum=D][,width=R][,initial=D]; unset
values are CSIT's (exceed 0.5, 1 s trials, 21 s sum, width 0.5 %, initial 1 s).
Presets: rfc2544 (60 s / 60 s / 0 %% / exceed 0), tst009 (60 s / 120 s / 0 %% / 0.5),
csit (NDR 0 %% and PDR 0.5 %%, 1 s / 21 s / 0.5; the default), nfvbench (NDR 0.001 %%,
PDR 0.1 %%). Each goal reports its relevant lower and upper bounds, the conditional
throughput and whether the result is regular; "no load passed" (min load is an upper
bound) and "max load passed" (max load is a lower bound) are irregular.
Max load: --max-rate, else tgen calibrate's send rate for the port, else its line rate.
--quick: 1 s trials and a duration sum of at most 3 trials (marked in the report).

The search runs through CSIT's MLRsearch library (PyPI MLRsearch). tgen rfc2544
throughput keeps RFC 2544's binary search with repeats and a confirmation trial; the
rfc2544 preset here is RFC 9971's equivalent goal of the same definition.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help="RFC 9971 multiple loss ratio search: NDR and PDR in one search, latency ladder",
        description="RFC 9971 (MLRsearch) throughput search on the real data path.",
        epilog=SEARCH_EPILOG + "\n" + COMMON_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p, repeats=1)
    g = p.add_argument_group("RFC 9971 search")
    g.add_argument(
        "--goal",
        action="append",
        default=[],
        metavar="SPEC",
        help="a search goal, repeatable: ndr=0, pdr=0.5%%, pdr=0.5%%,exceed=0.5,trial=1s,sum=21s",
    )
    g.add_argument(
        "--preset",
        choices=("rfc2544", "tst009", "csit", "nfvbench"),
        help="goals of a standard (default: csit when no --goal is given)",
    )
    g.add_argument("--width", help="goal width relative to the upper bound, e.g. 0.5%% or 0.02")
    g.add_argument("--min-load", help="lowest load tried (default: 9001 fps or max/10)")
    g.add_argument(
        "--unsent-not-loss",
        action="store_true",
        help="frames due but not sent do not count as loss (default: they do, as in CSIT)",
    )
    g.add_argument("--warmup", default="1s", help="warm-up trial at max load (default 1s; 0: none)")
    g.add_argument("--no-ladder", action="store_true", help="no latency ladder after the search")
    g.add_argument(
        "--ladder-low", default="1000", help="the ladder's low rate, fps (default: 1000)"
    )
    # the binary search's and loss test's knobs: None here, so that giving one is refused
    p.set_defaults(func=cmd_search, verb_name="search", error=None, loss_tolerance=None, step=None)


#: options of the methodology verbs that tgen search does not use: the goals set the trials
UNUSED = (
    ("duration", "--duration"),
    ("search_duration", "--search-duration"),
    ("repeats", "--repeats"),
    ("rate", "--rate"),
    ("delay", "--delay"),
    ("error", "--error (the goals' --width sets the stopping width)"),
    ("loss_tolerance", "--loss-tolerance (a goal's loss ratio, e.g. --goal pdr=0.5%)"),
    ("step", "--step"),
)


def config_from_args(args: argparse.Namespace):
    from tgen_tui.methodology.procedures.mlr.goals import PRESETS, goals_for, parse_ratio, quick
    from tgen_tui.methodology.procedures.mlr.run import SearchConfig

    for attr, opt in UNUSED:
        if getattr(args, attr, None) is not None:
            raise BadInput(f"{opt}: not used by tgen search (the goals set the trials)")
    sizes = getattr(args, "frame_sizes", None)
    if sizes and ("," in sizes or sizes.strip() == "rfc2544"):
        raise BadInput("--frame-sizes: tgen search searches one frame size per run; give one")
    width = parse_ratio(args.width, "--width") if args.width else None
    goals = goals_for(args.preset, args.goal, width)
    quick_text = ""
    if args.quick:
        goals, quick_text = quick(goals)
    preset = args.preset or (None if args.goal else "csit")
    return SearchConfig(
        goals=goals,
        preset=preset,
        preset_text=PRESETS[preset][1] if preset else "",
        min_load=_count(args.min_load, "--min-load"),
        unsent_is_loss=not args.unsent_not_loss,
        warmup_s=_dur(args.warmup, "--warmup"),
        ladder=not args.no_ladder,
        ladder_low_pps=_count(args.ladder_low, "--ladder-low") or 1000.0,
        quick_text=quick_text,
    )


def cmd_search(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    params = params_from_args(args)
    if params.max_rate and cfg.min_load and cfg.min_load >= params.max_rate:
        raise BadInput("--min-load must be below --max-rate")
    return run_procedure(args, "search", params, config=cfg)
