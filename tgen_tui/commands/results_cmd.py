"""``tgen results``: list, show, compare, trend, check and export the stored runs.

Every ``tgen run`` (and every console session and methodology run) is recorded in a SQLite
database by DUT and build (see :mod:`tgen_tui.results`). These verbs read it: ``check``
is the one for CI, it exits 1 with one sentence per regression.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import re
import shutil
import sqlite3
import statistics
import sys
from pathlib import Path

from tgen_tui import fmt
from tgen_tui.diagnostics import BadInput, EnvironmentProblem, ExitCode, check_output_file
from tgen_tui.results import analysis as A
from tgen_tui.results import metrics as M
from tgen_tui.results import plot, store
from tgen_tui.results import trending as T
from tgen_tui.results.record import add_db_option

EPILOG = """\
Every tgen run is recorded (unless --no-store) in $TGEN_DB, else
$XDG_DATA_HOME/tgen/results.db, else ~/.local/share/tgen/results.db; --db FILE overrides.
Runs are filed under a DUT label and a build: tgen run ... --dut natbox --build v2.3
(default: the lab DUT's kernel release and version string, else "unknown").

examples:
  tgen results list --dut natbox --since 7d
  tgen results show 12
  tgen results compare 11 12              # two runs, metric by metric
  tgen results compare b2 b3 --dut natbox # every run of build b2 against every run of b3
  tgen results trend rx_pps --dut natbox --output rx.svg
  tgen results check --build b3 --against b2 --max-change 3   # exit 1 on a regression
  tgen results export --csv --dut natbox > natbox.csv

metrics (trend, check, compare):
""" + M.catalogue_help()

CHECK_EPILOG = """\
The checked run is the newest one (or the newest of --build B). It is compared with
--against: 'last' (the DUT's previous build tested with the same test and profile) or
a build name. Every non-interrupted run of each build, with the same DUT, test and
profile hash, is a sample; repeating a run under one build gives a spread.

A metric regresses when it moves the bad way beyond its bound (rates and counts:
--max-change %; metrics in %: --max-points, the share of gaps spaced within 10 %
of the asked gap: --spacing-points; latency: --latency-change % and at least
--latency-floor), and, when both builds have repeats, beyond --spread-factor x the
spread (sample standard deviation). With repeats, a variance that grew more than
--variance-growth times is a regression too.

trend (jumpavg): then every checked metric's history, the newest --history builds up
to the checked one, is grouped as in tgen results trend (see its --help): jumpavg
(FD.io CSIT's trending) splits the builds into groups with one average each, opening
a group only where the numbers moved more than their noise. Per metric a line says
whether the newest group is a regression or a progression against the group before
(by the metric's direction), its size (the change of the group averages) and its
confidence; one line per change in the history follows. The exit code stays the
fixed bound's unless --fail-on-trend, which also fails a regressed newest group.

exit codes: 0 no regression, 1 regression (one sentence each), 2 bad input or nothing
to compare against, 3 no database.
example:
  tgen results check --build b3 --against b2
  rx pps median fell 10.2 % since build b2 (beyond the 5 % bound; no repeats, so no spread)
  ...
  trend (jumpavg) over 3 builds, b1..b3: per metric the newest group, then each change
    rx pps: last group b3: regression -10.2 % against b1..b2 (gain 12.0 bits, confidence 99.98 %)
      regression at build b3: -10.2 % (10 kpps → 8.98 kpps), gain 12.0 bits, confidence 99.98 %
    tx pps: no change over 3 builds (one group)
"""


TREND_EPILOG = """\
The plot: one point per build (its median), a bar from its lowest to its highest sample.

trend (jumpavg): FD.io CSIT's jumpavg splits the history into groups of consecutive
builds whose samples look like one normal distribution; it picks the split with the
shortest description (minimum description length), so a new group starts only where
the numbers moved by more than their noise. A build's samples (its runs, or the
repeats inside a run) go in together; builds keep the order they were first run in.
One row per group:
  change      the group's average against the group before: relative, or in
              points (pt) for metrics in %
  verdict     regression or progression by the metric's direction (rates: higher is
              better; loss and latency: lower is better); 'change' if it has none
  gain        bits the boundary saves in jumpavg's description: the history is
              2^gain times likelier with the change than without it
  confidence  2^gain / (1 + 2^gain): 10 bits ~ 99.9 %; near 0 bits, a coin toss.
              jumpavg keeps any boundary that saves a bit; one under
              --min-confidence (default 99 %) shows as 'unsure' and flags nothing
The line after the table: the newest group against the group before.
Few samples are little evidence: with one run per build over a handful of builds,
jumpavg may keep a real 10 % change in one group or call it unsure; repeat the run
under each build (its spread is then known) or test more builds.
fixed bound: tgen results check's default bounds (rates 5 %, metrics in % 0.5 points,
...), each build against the build before: what check would have said at each build.

example: 12 builds of 3 runs each, b8 6 % slower, b11 back:
  builds         samples      average       stdev      change  verdict             gain  confidence
  b1..b7              21   9.973 kpps    43.6 pps           -  -                      -  -
  b8..b10              9   9.408 kpps   58.93 pps      -5.7 %  regression     55.3 bits  >99.99 %
  b11..b12             6   10.02 kpps   37.02 pps      +6.5 %  progression    22.3 bits  >99.99 %

metrics:
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "results",
        help="the results store: list, show, compare, trend, check, export stored runs",
        description="Read the results database: every run recorded by DUT and build.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=lambda a: (p.print_help(), int(ExitCode.BAD_INPUT))[1])
    rs = p.add_subparsers(dest="results_verb", metavar="VERB")

    def add(name: str, helptext: str, func, epilog: str | None = None) -> argparse.ArgumentParser:
        sp = rs.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_db_option(sp)
        sp.set_defaults(func=func)
        return sp

    def filters(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--dut", metavar="NAME", help="only this DUT label")
        sp.add_argument("--build", metavar="ID", help="only this build")
        sp.add_argument(
            "--profile", metavar="P", help="only this profile (name, path or hash prefix)"
        )
        sp.add_argument("--test", metavar="T", help="only this test (run, tui, rfc2544, ...)")
        sp.add_argument(
            "--since",
            metavar="WHEN",
            help="from this time: 2026-11-30, 2026-11-30T13:00, or 7d / 12h ago (UTC)",
        )
        sp.add_argument("--until", metavar="WHEN", help="before this time (same forms as --since)")

    def series(sp: argparse.ArgumentParser) -> None:
        """The profile and test of a series of builds (trend, check)."""
        sp.add_argument(
            "--profile",
            metavar="P",
            help="profile name, path or hash prefix (default: the newest run's)",
        )
        sp.add_argument("--test", metavar="T", help="test (default: the newest run's)")

    sp = add("list", "list stored runs, newest first", cmd_list)
    filters(sp)
    sp.add_argument(
        "--limit", "-n", type=int, default=30, help="at most N runs (default: 30; 0 = all)"
    )
    sp.add_argument("--json", action="store_true", help="JSON lines instead of a table")

    sp = add("show", "show one run: parameters, every metric per port and per stream", cmd_show)
    sp.add_argument("id", type=int, metavar="ID", help="run id (see tgen results list)")
    sp.add_argument(
        "--json", action="store_true", help="the whole record as JSON (result included)"
    )

    sp = add(
        "compare",
        "compare two runs (or two builds) metric by metric, with the change and the spread",
        cmd_compare,
        epilog="A and B: a run id, or a build name (every run of that build is a repeat).\n"
        "'beyond spread': the change exceeds --spread-factor x the larger standard deviation\n"
        "of the repeats; '?' when neither side has repeats.",
    )
    sp.add_argument("a", metavar="A")
    sp.add_argument("b", metavar="B")
    sp.add_argument("--dut", metavar="NAME", help="DUT for build names (default: the newest run's)")
    sp.add_argument(
        "--scope",
        choices=("run", "port", "stream"),
        default="run",
        help="headline figures (run, default) or per port / per stream",
    )
    sp.add_argument(
        "--spread-factor", type=float, default=3.0, help="K in 'beyond K x the spread' (default: 3)"
    )
    sp.add_argument("--json", action="store_true", help="JSON instead of a table")

    sp = add(
        "trend",
        "plot a metric over the builds of a DUT (terminal, or --output x.svg|x.png) and "
        "find its changes with jumpavg",
        cmd_trend,
        epilog=TREND_EPILOG + M.catalogue_help(),
    )
    sp.add_argument("metric", metavar="METRIC", help="e.g. rx_pps, tx_pps, loss_pct, p99_ns")
    sp.add_argument(
        "--dut", metavar="NAME", help="DUT label (default: the only one, or the newest run's)"
    )
    series(sp)
    _min_confidence_option(sp)
    sp.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="also write an image: .svg (no dependencies) or .png (matplotlib)",
    )
    sp.add_argument(
        "--height", type=int, default=12, help="terminal plot height in rows (default: 12)"
    )
    sp.add_argument(
        "--last",
        type=int,
        default=40,
        metavar="N",
        help="only the newest N builds (default: 40; 0 = all)",
    )

    sp = add(
        "check",
        "check the newest run (or a build) for regressions against an earlier build",
        cmd_check,
        epilog=CHECK_EPILOG,
    )
    sp.add_argument("--dut", metavar="NAME", help="DUT label (default: the checked run's)")
    sp.add_argument("--build", metavar="B", help="build to check (default: the newest run's)")
    sp.add_argument(
        "--against",
        metavar="last|BUILD",
        default="last",
        help="baseline build (default: last = the previous build tested)",
    )
    series(sp)
    sp.add_argument(
        "--metric",
        action="append",
        metavar="M",
        help="check only these metrics (repeatable; default: every metric with a direction)",
    )
    sp.add_argument(
        "--max-change",
        type=float,
        default=5.0,
        metavar="PCT",
        help="rates and counts: relative change the bad way, in %% (default: 5)",
    )
    sp.add_argument(
        "--max-points",
        type=float,
        default=0.5,
        metavar="PP",
        help="metrics in %% (loss, achieved): change in percentage points (default: 0.5)",
    )
    sp.add_argument(
        "--spacing-points",
        type=float,
        default=5.0,
        metavar="PP",
        help="spaced_pct (gaps within 10 %% of the asked gap): drop in points (default: 5)",
    )
    sp.add_argument(
        "--latency-change",
        type=float,
        default=50.0,
        metavar="PCT",
        help="latency: relative rise in %% (default: 50)",
    )
    sp.add_argument(
        "--latency-floor",
        default="100us",
        metavar="TIME",
        help="latency: ignore rises smaller than this (default: 100us; ns/us/ms/s)",
    )
    sp.add_argument(
        "--spread-factor",
        type=float,
        default=3.0,
        metavar="K",
        help="with repeats: the change must also exceed K x the spread (default: 3)",
    )
    sp.add_argument(
        "--history",
        type=int,
        default=40,
        metavar="N",
        help="trend (jumpavg): group the newest N builds up to the checked one "
        "(default: 40; 0 = all)",
    )
    _min_confidence_option(sp)
    sp.add_argument(
        "--fail-on-trend",
        action="store_true",
        help="also exit 1 when jumpavg's newest group (the checked build's) is a regression "
        "against the group before (default: the section is information only)",
    )
    sp.add_argument(
        "--variance-growth",
        type=float,
        default=2.0,
        metavar="X",
        help="with repeats: flag a variance that grew more than X times (default: 2)",
    )

    sp = add("export", "export runs as CSV (one row per run) or JSON (full records)", cmd_export)
    filters(sp)
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument(
        "--csv", action="store_true", help="CSV: run fields and headline metrics, one row per run"
    )
    g.add_argument(
        "--json",
        action="store_true",
        help="JSON: a list of full records (params, result, metrics, trials)",
    )
    sp.add_argument("--output", "-o", metavar="FILE", help="write here (default: stdout)")


# ---------------------------------------------------------------- helpers


def _min_confidence_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--min-confidence",
        type=float,
        default=100.0 * T.MIN_CONFIDENCE,
        metavar="PCT",
        help="trend (jumpavg): flag a change only this sure, in %% (default: "
        f"{100.0 * T.MIN_CONFIDENCE:g}); a boundary below it shows as 'unsure'",
    )


def _bad(msg: str) -> BadInput:
    """Bad input: one line 'tgen: error: ...', exit 2."""
    return BadInput(f"tgen: error: {msg}")


def _open(args: argparse.Namespace) -> sqlite3.Connection:
    try:
        return store.connect(args.db, create=False)
    except store.StoreError as e:
        raise EnvironmentProblem(str(e)) from None


_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*(m|min|h|d|w)$")


def parse_when(text: str | None, opt: str) -> str | None:
    """'7d', '12h', '30min' ago, or an ISO date/time (UTC): an ISO string for comparisons."""
    if text is None:
        return None
    t = text.strip()
    m = _REL.match(t)
    if m:
        mult = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        when = _dt.datetime.now(_dt.UTC) - _dt.timedelta(seconds=float(m.group(1)) * mult)
        return when.isoformat(timespec="seconds")
    try:
        when = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise _bad(
            f"{opt}: {text!r} is not a time: give 2026-11-30, 2026-11-30T13:00 or 7d / 12h / 30min"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.astimezone(_dt.UTC).isoformat(timespec="seconds")


def _when(iso: str) -> str:
    return iso[:16].replace("T", " ")


def _short(s: str | None, n: int) -> str:
    s = s or "-"
    return s if len(s) <= n else s[: n - 1] + "…"


def _flags(r: dict) -> str:
    out = []
    if r["partial"]:
        out.append("partial")
    if r["passed"] == 0:
        out.append("FAIL")
    if r["dut_source"] == "unknown":
        out.append("dut?")
    return ",".join(out)


# ---------------------------------------------------------------- list / show


def _filtered_runs(conn, args: argparse.Namespace, **kw) -> list[dict]:
    """The stored runs that the filter options select (--dut --build --profile --test
    --since --until); ``kw`` goes to store.list_runs as it is."""
    return store.list_runs(
        conn,
        dut=args.dut,
        build=args.build,
        profile=args.profile,
        test=args.test,
        since=parse_when(args.since, "--since"),
        until=parse_when(args.until, "--until"),
        **kw,
    )


def _at_least(value, least, option: str, what: str) -> None:
    """BadInput naming ``option`` when ``value`` is below ``least`` (or not a number)."""
    if not (value >= least):  # NaN too
        raise _bad(f"{option}: {value:g}: {what}")


def cmd_list(args: argparse.Namespace) -> int:
    _at_least(args.limit, 0, "--limit", "give 0 (every run) or more")
    conn = _open(args)
    runs = _filtered_runs(conn, args, limit=args.limit or None)
    for r in runs:
        r["metrics"] = store.run_metrics(conn, r["id"])
    if args.json:
        for r in runs:
            print(json.dumps(r, default=str))
        return 0
    if not runs:
        print(f"no runs match in {store.resolve(args.db)}")
        return 0
    print(
        f"{'id':>5}  {'started (UTC)':<16}  {'test':<8}{'dut':<18}{'build':<14}{'profile':<14}"
        f"{'rx pps':>12}{'loss':>10}{'p99':>10}{'goodput':>14}  flags"
    )
    for r in runs:
        m = r["metrics"]
        print(
            f"{r['id']:>5}  {_when(r['started_at']):<16}  {_short(r['test'], 7):<8}"
            f"{_short(r['dut'], 17):<18}{_short(r['build'], 13):<14}{_short(r['profile'], 13):<14}"
            f"{fmt.pps(m.get('rx_pps')):>12}{fmt.pct(m.get('loss_pct'), 3):>10}"
            f"{fmt.ns(m.get('p99_ns')):>10}{fmt.bps(m.get('goodput_bps')):>14}  {_flags(r)}"
        )
    return 0


def _get(conn: sqlite3.Connection, run_id: int, args: argparse.Namespace) -> dict:
    run = store.get_run(conn, run_id)
    if run is None:
        raise _bad(f"no run {run_id} in {store.resolve(args.db)} (see: tgen results list)")
    return run


def cmd_show(args: argparse.Namespace) -> int:
    conn = _open(args)
    run = _get(conn, args.id, args)
    if args.json:
        print(json.dumps(run, indent=2, default=str))
        return 0
    print(f"run {run['id']}  {run['test']}  started {run['started_at']}  ({run['tester'] or '-'})")
    src = {"lab": " (from the lab kernel)", "unknown": " (not given: --dut/--build)"}.get(
        run["dut_source"], ""
    )
    print(f"DUT {run['dut']}  build {run['build']}{src}")
    print(
        f"profile {run['profile']}  {run['profile_path'] or ''}  hash {(run['profile_hash'] or '-')[:16]}"
        f"  seed {run['seed']}  duration {fmt.seconds(run['duration_s'])}"
        + ("  PARTIAL (interrupted)" if run["partial"] else "")
        + ("  FAILED thresholds" if run["passed"] == 0 else "")
    )
    if run["params"]:
        print(
            "params "
            + ", ".join(f"{k}={v}" for k, v in sorted(run["params"].items()) if v is not None)
        )
    by: dict[tuple[str, str], dict[str, float]] = {}
    for m in run["metrics"]:
        by.setdefault((m["scope"], m["name"]), {})[m["metric"]] = m["value"]
    head = by.pop(("run", ""), {})
    print("\nheadline")
    order = {n: i for i, n in enumerate(M.CATALOGUE)}
    for name, v in sorted(head.items(), key=lambda kv: (order.get(kv[0], 999), kv[0])):
        md = M.metric(name)
        print(f"  {md.label:<22}{md.fmt(v):>16}   {name}")
    for scope in ("port", "stream"):
        keys = [k for k in by if k[0] == scope]
        if not keys:
            continue
        cols = ["tx_pps", "rx_pps", "tx_frames", "rx_frames"]
        cols += ["achieved_pct"] if scope == "port" else ["lost", "loss_pct", "p50_ns", "p99_ns"]
        print(f"\n{scope:<12}" + "".join(f"{M.metric(c).label:>15}" for c in cols))
        for k in sorted(keys):
            vals = by[k]
            print(
                f"{_short(k[1], 11):<12}"
                + "".join(f"{M.metric(c).fmt(vals.get(c)):>15}" for c in cols)
            )
    if run["trials"]:
        print(f"\n{len(run['trials'])} trials stored (tgen results show {run['id']} --json)")
    warnings = run["result"].get("warnings") or []
    for w in warnings:
        print(f"warning: {w}")
    return 0


# ---------------------------------------------------------------- compare


def _side(
    conn: sqlite3.Connection, spec: str, args: argparse.Namespace
) -> tuple[list[int], str, dict]:
    """A run id, or a build name → (run ids, description, a representative run row)."""
    if spec.isdigit():
        run = store.get_run(conn, int(spec))
        if run is None:
            raise _bad(f"no run {spec} in {store.resolve(args.db)} (see: tgen results list)")
        return [run["id"]], f"run {run['id']} (DUT {run['dut']}, build {run['build']})", run
    runs = store.list_runs(conn, dut=args.dut, build=spec)
    runs = [r for r in runs if not r["partial"]] or runs
    if not runs:
        raise _bad(f"{spec!r} is neither a run id nor a build in {store.resolve(args.db)}")
    newest = runs[0]
    ids = [
        r["id"]
        for r in runs
        if r["dut"] == newest["dut"]
        and r["profile_hash"] == newest["profile_hash"]
        and r["test"] == newest["test"]
    ]
    return (
        ids,
        f"build {spec} (DUT {newest['dut']}, {len(ids)} run(s): {', '.join(map(str, ids))})",
        newest,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    _at_least(args.spread_factor, 0, "--spread-factor", "give a factor of 0 or more, e.g. 3")
    conn = _open(args)
    a_ids, a_desc, a_run = _side(conn, args.a, args)
    b_ids, b_desc, b_run = _side(conn, args.b, args)
    if args.scope == "run":
        changes = A.compare(conn, a_ids, b_ids, factor=args.spread_factor)
        rows = [("", c) for c in changes]
    else:
        rows = _scoped_changes(conn, a_ids, b_ids, args.scope, args.spread_factor)
    if args.json:
        out = {
            "a": {"runs": a_ids, "desc": a_desc},
            "b": {"runs": b_ids, "desc": b_desc},
            "metrics": [
                {
                    "name": name,
                    "metric": c.metric,
                    "a_median": c.a.median,
                    "a_spread": c.a.spread,
                    "a_n": c.a.n,
                    "b_median": c.b.median,
                    "b_spread": c.b.spread,
                    "b_n": c.b.n,
                    "change": c.delta,
                    "change_pct": c.pct,
                    "beyond_spread": c.beyond_spread,
                    "worse": c.worse,
                }
                for name, c in rows
            ],
        }
        print(json.dumps(out, indent=2))
        return 0
    print(f"A: {a_desc}\nB: {b_desc}")
    if a_run.get("profile_hash") != b_run.get("profile_hash"):
        print(
            "note: A and B used different profiles (hash differs): the figures may not be comparable"
        )
    print(
        f"{args.scope if args.scope != 'run' else '':<12}{'metric':<20}{'A median':>13}{'A spread':>12}{'B median':>13}{'B spread':>12}"
        f"{'change':>10}  beyond spread"
    )
    for name, c in rows:
        md = M.metric(c.metric)
        if md.unit == "%":
            ch = "-" if c.delta is None else f"{c.delta:+.2f} pt"
        else:
            ch = "-" if c.pct is None else f"{c.pct:+.1f} %"
        beyond = {True: f"yes (> {c.factor:g} × spread)", False: "no", None: "? (no repeats)"}[
            c.beyond_spread
        ]
        if c.worse and c.beyond_spread:
            beyond += ", worse"
        print(
            f"{_short(name, 11) if name else '':<12}{md.label:<20}{md.fmt(c.a.median):>13}{_spread(md, c.a):>12}"
            f"{md.fmt(c.b.median):>13}{_spread(md, c.b):>12}{ch:>10}  {beyond}"
        )
    return 0


def _spread(md: M.Metric, s: A.Summary) -> str:
    return "-" if s.spread is None else "±" + md.fmt(s.spread).lstrip()


def _scoped_changes(conn, a_ids, b_ids, scope, factor) -> list[tuple[str, A.Change]]:
    def pooled(ids: list[int]) -> dict[tuple[str, str], list[float]]:
        out: dict[tuple[str, str], list[float]] = {}
        q = ",".join("?" * len(ids))
        for name, metric, value in conn.execute(
            f"SELECT name, metric, value FROM metrics WHERE scope = ? AND run_id IN ({q})",
            (scope, *ids),
        ):
            out.setdefault((name, metric), []).append(value)
        return out

    pa, pb = pooled(a_ids), pooled(b_ids)
    order = {n: i for i, n in enumerate(M.CATALOGUE)}
    keys = sorted(pa.keys() & pb.keys(), key=lambda k: (k[0], order.get(k[1], 999), k[1]))
    return [(k[0], A.Change(k[1], A.Summary(pa[k]), A.Summary(pb[k]), factor)) for k in keys]


# ---------------------------------------------------------------- trend


def _context(conn, args, run_filter: dict) -> dict:
    """The newest run matching the filters: it supplies the defaults of DUT, test, profile."""
    runs = store.list_runs(conn, limit=1, **run_filter)
    if not runs:
        what = ", ".join(f"{k} {v}" for k, v in run_filter.items() if v is not None) or "any"
        raise _bad(f"no stored runs match ({what}) in {store.resolve(args.db)}")
    return runs[0]


def cmd_trend(args: argparse.Namespace) -> int:
    _at_least(args.height, 3, "--height", "give 3 rows or more")
    _at_least(args.last, 0, "--last", "give 0 (every build) or more")
    min_confidence = _min_confidence(args)
    check_output_file(args.output, "--output")
    conn = _open(args)
    if args.metric not in M.CATALOGUE:
        known = {
            m for (m,) in conn.execute("SELECT DISTINCT metric FROM metrics WHERE scope='run'")
        }
        if args.metric not in known:
            raise _bad(f"trend: unknown metric {args.metric!r}; known: {', '.join(M.CATALOGUE)}")
    ctx = _context(conn, args, {"dut": args.dut, "profile": args.profile, "test": args.test})
    dut, test, phash = ctx["dut"], args.test or ctx["test"], ctx["profile_hash"]
    md = M.metric(args.metric)
    history = []
    for b, summaries in A.build_history(conn, dut=dut, test=test, profile_hash=phash):
        s = summaries.get(args.metric)
        if s and s.samples:
            history.append((b, s.samples))
    if not history:
        raise _bad(
            f"trend: no {args.metric} values for DUT {dut} ({test}, profile {ctx['profile']})"
        )
    title = (
        f"{md.label} ({md.unit}) by build: DUT {dut}, test {test}, "
        f"profile {ctx['profile']} [{(phash or '-')[:8]}]"
    )
    if args.last and len(history) > args.last:
        history = history[-args.last :]
        title += f", last {args.last} builds"
    points = [plot.Point(b, statistics.median(xs), min(xs), max(xs), len(xs)) for b, xs in history]
    width = shutil.get_terminal_size((100, 24)).columns
    print(
        plot.text_plot(points, title=title, unit=md.unit, height=max(4, args.height), width=width)
    )
    print("● median, │ lowest to highest sample, n = samples (runs or repeats)")
    _print_trend_groups(T.detect(args.metric, history, min_confidence))
    _print_fixed_bound(args.metric, history)
    if args.output:
        path = Path(args.output)
        try:
            plot.write_image(
                points, title=title, ylabel=f"{md.label} ({md.unit})", unit=md.unit, path=path
            )
        except ValueError as e:
            raise _bad(str(e)) from None
        except plot.PlotUnavailable as e:
            raise EnvironmentProblem(str(e)) from None
        except OSError as e:
            raise EnvironmentProblem(f"--output {path}: {e.strerror or e}") from None
        print(f"wrote {path}")
    return 0


def _min_confidence(args: argparse.Namespace) -> float:
    """--min-confidence PCT as a fraction (BadInput outside 0..100)."""
    pct = args.min_confidence
    if not 0.0 <= pct <= 100.0:  # NaN too
        raise _bad(f"--min-confidence: {pct:g}: give a percentage from 0 to 100, e.g. 99")
    return pct / 100.0


def _print_trend_groups(t: T.Trend) -> None:
    """The 'trend (jumpavg)' section of ``trend``: one row per group, then the newest."""
    n = len(t.builds)
    print(f"\ntrend (jumpavg): {n} build{'s' if n != 1 else ''} in {len(t.groups)} group(s)")
    if t.groups:
        print(
            f"  {'builds':<14}{'samples':>8}{'average':>13}{'stdev':>12}{'change':>12}"
            f"  {'verdict':<13}{'gain':>11}  confidence"
        )
    for g in t.groups:
        gain = "-" if g.gain is None else f"{g.gain:.1f} bits"
        verdict = "-" if g.kind == "first" else g.kind
        print(
            f"  {_short(g.span, 13):<14}{g.n:>8}{T.fmt_avg(t.metric, g.avg):>13}"
            f"{T.fmt_avg(t.metric, g.stdev):>12}{T.size(t.metric, g):>12}"
            f"  {verdict:<13}{gain:>11}  {T.fmt_confidence(g.confidence, g.gain)}"
        )
    print(T.summary(t))


def _print_fixed_bound(metric: str, history: list[tuple[str, list[float]]]) -> None:
    """The fixed bound of ``check`` (its defaults), each build against the one before."""
    bounds = A.Bounds()
    hits, unjudged = [], 0
    for (a, xa), (b, xb) in zip(history, history[1:], strict=False):
        if metric in M.NEEDS_REPEATS and min(len(xa), len(xb)) < 2:
            unjudged += 1  # as check: latency only with repeats on both sides
            continue
        c = A.Change(metric, A.Summary(list(xa)), A.Summary(list(xb)), bounds.spread_factor)
        hits += [f"  {b}: {x}" for x in A.regression(c, bounds, a)]
    print("fixed bound (check's defaults, each build against the one before): ", end="")
    print(f"{len(hits)} regression(s)" if hits else "no regression", end="")
    print(f"; {unjudged} pair(s) without repeats not judged" if unjudged else "")
    for h in hits:
        print(h)


# ---------------------------------------------------------------- check


def cmd_check(args: argparse.Namespace) -> int:
    _at_least(args.history, 0, "--history", "give 0 (every build) or more")
    min_confidence = _min_confidence(args)
    conn = _open(args)
    bounds = _check_bounds(args)
    ctx = _context(
        conn,
        args,
        {"dut": args.dut, "build": args.build, "profile": args.profile, "test": args.test},
    )
    dut, build, test, phash = ctx["dut"], ctx["build"], ctx["test"], ctx["profile_hash"]
    base = _check_base(conn, args, ctx)
    tg = A.group_of(conn, dut=dut, build=build, test=test, profile_hash=phash)
    bg = A.group_of(conn, dut=dut, build=base, test=test, profile_hash=phash)
    if not bg.run_ids:
        raise _bad(
            f"check: no complete runs of DUT {dut} build {base} with {test} profile {ctx['profile']} "
            f"(hash {(phash or '-')[:8]}) to compare against (see: tgen results list --dut {dut})"
        )
    if not tg.run_ids:
        raise _bad(f"check: build {build} has only interrupted runs")
    changes = A.compare(conn, bg.run_ids, tg.run_ids, factor=args.spread_factor)
    known = {c.metric for c in changes} | set(M.CATALOGUE)
    unknown = [m for m in args.metric or [] if m not in known]
    if unknown:
        raise _bad(
            f"check: unknown metric(s) {', '.join(unknown)}; known: {', '.join(M.CATALOGUE)}"
        )
    verdict = A.judge(changes, bounds, base, args.metric)
    head = (
        f"DUT {dut}: build {build} ({len(tg.run_ids)} run(s)) against build {base} "
        f"({len(bg.run_ids)} run(s)), test {test}, profile {ctx['profile']}, "
        f"{len(verdict.checked)} metrics"
    )
    rc = _print_verdict(head, verdict)
    history = A.build_history(
        conn, dut=dut, test=test, profile_hash=phash, upto=build, last=args.history
    )
    trends = _print_check_trends([c.metric for c in verdict.checked], history, min_confidence)
    regressed = [M.metric(t.metric).label for t in trends if t.regressed]
    if args.fail_on_trend and regressed:
        print(
            f"jumpavg: the newest group regressed ({', '.join(regressed)}): exit 1 "
            "(--fail-on-trend)"
        )
        return int(ExitCode.TEST_FAILED)
    return rc


def _print_check_trends(
    metrics: list[str], history: list[tuple[str, dict[str, A.Summary]]], min_confidence: float
) -> list[T.Trend]:
    """The 'trend (jumpavg)' section of ``check``: per metric, the newest group against the
    one before, then every change in the history."""
    builds = [b for b, _ in history]
    if not builds:
        return []
    span = builds[0] if len(builds) == 1 else f"{builds[0]}..{builds[-1]}"
    print(
        f"\ntrend (jumpavg) over {len(builds)} build{'s' if len(builds) != 1 else ''}, "
        f"{span}: per metric the newest group, then each change"
    )
    trends = []
    for metric in metrics:
        hist = [(b, s[metric].samples) for b, s in history if metric in s]
        t = T.detect(metric, hist, min_confidence)
        trends.append(t)
        print(f"  {T.summary(t)}")
        for g in t.changes:
            print(f"    {T.describe(t, g)}")
    return trends


def _check_bounds(args: argparse.Namespace) -> A.Bounds:
    """The check's bounds from its options (BadInput for a negative one)."""
    from tgen_tui.profiles.units import parse_latency_ns

    try:
        floor_ns = parse_latency_ns(args.latency_floor)
    except ValueError as e:
        raise _bad(f"--latency-floor: {e}") from None
    opts = ("max_change", "max_points", "spacing_points", "latency_change", "spread_factor")
    for opt in (*opts, "variance_growth"):
        v = getattr(args, opt)
        if not v >= 0:
            raise _bad(f"--{opt.replace('_', '-')} must be >= 0, got {v}")
    return A.Bounds(
        max_change_pct=args.max_change,
        max_points=args.max_points,
        spacing_points=args.spacing_points,
        latency_pct=args.latency_change,
        latency_floor_ns=floor_ns,
        spread_factor=args.spread_factor,
        variance_growth=args.variance_growth,
    )


def _check_base(conn, args: argparse.Namespace, ctx: dict) -> str:
    """The build to check against: --against, or the DUT's build before this one."""
    dut, build = ctx["dut"], ctx["build"]
    if args.against == "last":
        base = A.previous_build(
            conn,
            dut=dut,
            build=build,
            test=ctx["test"],
            profile_hash=ctx["profile_hash"],
            before=ctx["started_at"],
            before_id=ctx["id"],
        )
        if base is None:
            raise _bad(
                f"check: DUT {dut} has no earlier build than {build} with {ctx['test']} profile "
                f"{ctx['profile']}: nothing to check against (give --against BUILD)"
            )
    else:
        base = args.against
    if base == build:
        raise _bad(f"check: --against {base} is the build being checked")
    return base


def _print_verdict(head: str, verdict) -> int:
    """The regressions (exit 1), or "no regression" with the headline changes."""
    if verdict.sentences:
        print(f"{head}: {len(verdict.sentences)} regression(s)")
        for s in verdict.sentences:
            print(s)
        return int(ExitCode.TEST_FAILED)
    summary = ", ".join(
        f"{M.metric(c.metric).label} "
        + (f"{c.delta:+.2f} pt" if M.metric(c.metric).unit == "%" else f"{c.pct:+.1f} %")
        for c in verdict.checked
        if c.metric in ("rx_pps", "loss_pct", "p99_ns")
        and c.delta is not None
        and (c.pct is not None or M.metric(c.metric).unit == "%")
    )
    print(f"{head}: no regression" + (f" ({summary})" if summary else ""))
    if verdict.skipped:
        print(
            f"not checked: {', '.join(M.metric(m).label for m in verdict.skipped)} (one run per "
            "build gives no spread: repeat the run under each build, or name it with --metric)"
        )
    return 0


# ---------------------------------------------------------------- export


def cmd_export(args: argparse.Namespace) -> int:
    check_output_file(args.output, "--output")
    conn = _open(args)
    runs = _filtered_runs(conn, args, newest_first=False)
    out = open(args.output, "w", newline="") if args.output else sys.stdout  # noqa: SIM115
    try:
        if args.json:
            json.dump([store.get_run(conn, r["id"]) for r in runs], out, indent=2, default=str)
            out.write("\n")
        else:
            mets = {r["id"]: store.run_metrics(conn, r["id"]) for r in runs}
            names = [n for n in M.CATALOGUE if any(n in m for m in mets.values())]
            names += sorted({n for m in mets.values() for n in m} - set(names))
            cols = list(runs[0].keys()) if runs else store.RUN_COLUMNS.replace(" ", "").split(",")
            w = csv.writer(out)
            w.writerow(cols + names)
            for r in runs:
                w.writerow([r[c] for c in cols] + [mets[r["id"]].get(n, "") for n in names])
    finally:
        if out is not sys.stdout:
            out.close()
    if args.output:
        print(f"wrote {len(runs)} run(s) to {args.output}", file=sys.stderr)
    return 0
