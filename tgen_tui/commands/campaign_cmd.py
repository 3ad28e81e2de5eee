"""``tgen campaign FILE`` and ``tgen campaign report FILE``: a test matrix as one file.

The campaign (tgen_tui.profiles.campaign) is validated with positions before anything
runs; its points run one by one, each as a run owner's run (tgen_tui.campaign.runner),
each stored when it ends, so ``--resume`` after a crash runs only what is missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tgen_tui.diagnostics import BadInput, check_output_file

EPILOG = """\
examples:
  tgen campaign campaigns/rules-by-size.yaml              # run every point
  tgen campaign campaigns/rules-by-size.yaml --dry-run    # list the points, run nothing
  tgen campaign campaigns/rules-by-size.yaml --resume     # after a crash: the missing points
  tgen campaign report campaigns/rules-by-size.yaml --md t.md --csv t.csv --plots out/
  tgen campaign campaigns/rules-by-size.yaml --bundle rules.tar.gz

A campaign file:
  name: rules-by-size
  procedure: run                 # run | rfc2544.throughput | search | rfc9693.cps
  profile: ../profiles/lab.yaml  # relative to the campaign file
  duration: 3s                   # the run's length (run) or each trial's (the others)
  repeats: 3
  order: random                  # or as-written; random shuffles with seed (RFC 2544 26.)
  seed: 7
  axes:
    frame_size: [64, 512]
    lab.filter_rules: [0, 1000, 5000]
  build: b1                      # the results store's build label for every point
  dut: lab-nat44
  options: {max_rate: 200k}      # the procedure's (see tgen schema --campaign)

Axes: frame_size, rate (fps), rate_scale, lanes, pacing, duration; lab.FIELD (the lab
DUT's settings, as tgen lab set: filter_rules, conntrack_max, nat_ports, tbf, delay, loss,
drop_percent, rate_limit_pps, ct_limit, ...); profile.PATH (any profile field by its
dotted path: profile.streams.0.udp.src_port.max); dut.NAME (a real DUT: runs
dut_commands.NAME on it, {value} replaced, before the point).

The folder NAME.campaign/ (or --out) keeps state.jsonl (one line per finished point,
fsync'ed), each point's profile and result. Each point is also stored in the results
store (tgen results list) with the campaign's build and DUT labels. A failed point is
recorded with its reason and the campaign goes on (on_failure: stop to stop). Exit:
0 every point ok, 1 a point failed, 2 bad input, 3 environment, 130/143 stopped
(--resume goes on).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "campaign",
        help="run a test matrix from one file (resumable, stored by build) and report it",
        description="Run a campaign: one procedure over the product of its axes, repeated.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="the campaign file (or 'report' then the file)")
    p.add_argument("report_file", nargs="?", metavar="FILE", help=argparse.SUPPRESS)
    p.add_argument(
        "--out", metavar="DIR", help="the campaign's folder (default: FILE's name + .campaign)"
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help="run only the points not done yet")
    g.add_argument("--fresh", action="store_true", help="forget the points done and start over")
    p.add_argument(
        "--dry-run", action="store_true", help="list the points in running order and stop"
    )
    p.add_argument("--only", metavar="ID[,ID]", help="run only these point ids (from --dry-run)")
    p.add_argument(
        "--ndjson", metavar="FILE", help="one event per point start and end (- for stdout)"
    )
    p.add_argument(
        "--bundle",
        metavar="OUT.tar.gz",
        help="after the run (or with report): write the artefact bundle",
    )
    p.add_argument("--md", metavar="FILE", help="report: the table as Markdown")
    p.add_argument("--csv", metavar="FILE", help="report: the table as CSV")
    p.add_argument("--json", metavar="FILE", help="report: the table as JSON")
    p.add_argument("--plots", metavar="DIR", help="report: one SVG per numeric axis")
    p.add_argument(
        "--db",
        metavar="FILE",
        help="the results store (default: $TGEN_DB or ~/.local/share/tgen/results.db)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_campaign)


def cmd_campaign(args: argparse.Namespace) -> int:
    from tgen_tui.profiles.campaign import load_campaign

    report_mode = args.file == "report"
    if report_mode and not args.report_file:
        raise BadInput("tgen campaign report FILE: name the campaign file")
    if not report_mode and args.report_file:
        raise BadInput(f"tgen campaign: one campaign file (got also {args.report_file!r})")
    path = Path(args.report_file if report_mode else args.file)
    c, text = load_campaign(path)
    for opt in ("md", "csv", "json", "bundle"):
        check_output_file(getattr(args, opt), f"--{opt}")
    if report_mode:
        return _report(c, text, path, args)
    from tgen_tui.campaign.runner import CampaignRunner, install_term_as_interrupt

    nd = None
    if args.ndjson == "-":
        nd = sys.stdout
    elif args.ndjson:
        check_output_file(args.ndjson, "--ndjson")
        nd = open(args.ndjson, "a")  # noqa: SIM115 - closed below
    try:
        runner = CampaignRunner(c, text, path, out=args.out, resume=args.resume or bool(args.only),
                                fresh=args.fresh, db=args.db, ndjson=nd, quiet=args.quiet)  # fmt: skip
        if args.only:
            want = {x.strip() for x in args.only.split(",") if x.strip()}
            unknown = want - {p.id for p in runner.points}
            if unknown:
                raise BadInput(f"--only: no point {', '.join(sorted(unknown))} (see --dry-run)")
            runner.points = [p for p in runner.points if p.id in want]
            for pid in want:
                runner.state.done.pop(pid, None)
        if args.dry_run:
            for k, p in enumerate(runner.points, 1):
                done = " (done)" if p.id in runner.state.done else ""
                print(f"{k:>4}  {p.id}  {p.label()}{done}")
            print(
                f"{len(runner.points)} points, {c.procedure}, {c.duration} each; folder {runner.out}"
            )
            return 0
        if runner.lab_prefix is None and any(k.startswith("lab.") for k in c.axes):
            raise BadInput("lab axes need a lab")
        install_term_as_interrupt()
        rc = runner.run()
    finally:
        if nd is not None and nd is not sys.stdout:
            nd.close()
    if rc in (0, 1):
        _report(c, text, path, args, quiet=args.quiet)
    return rc


def _report(c, text: str, path: Path, args: argparse.Namespace, quiet: bool = False) -> int:
    from tgen_tui.campaign import report as R
    from tgen_tui.campaign.runner import STATE, State, out_dir_for

    out = out_dir_for(path, args.out)
    state = State.read(out / STATE)
    if not state.done:
        raise BadInput(f"{out}: no point of campaign {c.name} has run yet (tgen campaign {path})")
    table, files = R.write_all(c, state, md=args.md, csv_path=args.csv, json_path=args.json,
                               plots_dir=args.plots)  # fmt: skip
    if not quiet:
        print(f"campaign {c.name} ({c.procedure}, build {c.build or '-'}): "
              f"{len(state.done)} of {c.n_points()} points")  # fmt: skip
        print(table)
        for f in files:
            print(f"plot: {f}")
    if args.bundle:
        from tgen_tui.campaign.bundle import make_bundle

        names, rows = R.rows(c, state)
        members = make_bundle(
            c,
            text,
            path,
            out,
            Path(args.bundle),
            c.lab or _lab_of(path, c),
            {
                "table.txt": table,
                "table.md": R.text_table(names, rows, markdown=True),
                "table.csv": R.csv_text(names, rows),
            },
        )
        print(f"bundle: {args.bundle} ({len(members)} files)", file=sys.stderr)
    return 0


def _lab_of(path: Path, c) -> str | None:
    from tgen_tui.profiles.loader import load_profile

    prof = load_profile((path.parent / c.profile).resolve())
    ns = prof.dut.netns if prof.dut else None
    return ns[: -len("-dut")] if ns and ns.endswith("-dut") else None
