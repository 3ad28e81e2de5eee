"""``tgen rfc2544 …``, ``tgen rfc9693 …`` and ``tgen scaleup …``: the test methodology.

Each verb parses its options (METHODOLOGY.md's defaults), runs the procedure of
:mod:`tgen_tui.methodology.registry` under trio, and writes the report three ways: JSON with
every trial (``--json``), Markdown and CSV tables laid out like USERS.md §1 (``--md``,
``--csv``), and plots in the terminal and as SVG/PNG files (``--plots DIR``). Ctrl-C or
SIGTERM ends the run cleanly and the report keeps every trial so far, marked partial.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING

from tgen_tui.diagnostics import BadInput, ExitCode, check_output_file
from tgen_tui.engine.cli_options import (
    add_cluster_option,
    add_cores_option,
    add_dut_options,
    add_pacing_option,
    add_preflight_option,
    add_quiet_option,
    check_dut_ssh,
    parse_cores_option,
    write_json_output,
)
from tgen_tui.profiles.units import parse_duration

if TYPE_CHECKING:
    from tgen_tui.methodology.kit.output import MethodologyReport
    from tgen_tui.methodology.kit.params import Params

COMMON_EPILOG = """\
Rates are frames/s per direction (RFC 2544) or connections/s (RFC 9693). Durations take
units: 60s, 500ms, 2min (a bare number is seconds).

Validity: a trial is invalid (and counts as failed) when the sender had not sent every
frame by duration x (1 + --tolerance). siitperf uses 1e-5; a Python sender wakes every
0.2-1 ms, so tgen defaults to 1e-3 (2 ms on a 2 s trial, 60 ms on 60 s).

--quick: 2 s trials, 3 repeats, 0.5 s timeout and settle (marked in the report).
Output: progress on stderr (trial, l, h, time left); --ndjson FILE: one line per trial;
--json FILE (- for stdout): the report with every trial; --md/--csv: tables; --plots DIR:
SVG plots (PNG with --plot-format png). Exit: 0 done, 2 bad input, 3 environment (not
root, no lab), 130/143 interrupted (the report is written, "partial": true).
"""

RFC2544_EPILOG = """\
examples:
  tgen lab up --prefix t1 && tgen lab set --prefix t1 --rate-limit 50000
  tgen rfc2544 throughput profiles/lab.yaml --error 1000 --quick --json tp.json
  tgen rfc2544 throughput profiles/lab.yaml --frame-sizes rfc2544 --max-rate 200k
  tgen rfc2544 loss profiles/lab.yaml --max-rate 100k --duration 10s --plots out/
  tgen rfc2544 latency profiles/lab.yaml --rate 40000 --duration 120s --delay 60s
  tgen rfc2544 pdv profiles/lab.yaml --rate 40000 --duration 60s --repeats 20

throughput: binary search (max first; l = highest passing, h = lowest failing rate),
  repeated --repeats times; median, min, max (p1, p99 from 10 runs); l confirmed with a
  full-length trial.
loss: from 100 % of the maximum rate down in --step % steps until two trials lose nothing.
latency: RFC 8219: at the throughput rate (or --rate) for --duration; frames after --delay
  are the tagged ones (every frame carries a timestamp); TL = median, WCL = 99.9th;
  a lost tagged frame counts as (duration - delay) + timeout.
pdv: PDV = D99.9th - Dmin over every frame of the trial (negative delays clamped to 0).
"""

RFC9693_EPILOG = """\
examples:
  tgen lab up --prefix t2 --conntrack-max 20000
  tgen rfc9693 cps profiles/nat44-stateful.yaml --quick --max-rate 300k
  tgen rfc9693 capacity profiles/rfc9693-capacity.yaml --quick --c0 5000 --max-rate 300k
  tgen rfc9693 teardown profiles/nat44-stateful.yaml --rate 50k --repeats 5

cps: phase 1 at rate r with N unique (source, destination port) tuples, the DUT's
  conntrack flushed before each trial; a trial passes when all N frames arrived, the
  sender kept the rate, and conntrack rose by N ("failed to fill the state table"
  otherwise). Binary-searched; median, min, max over --repeats.
capacity: R0 = cps with C0 connections (C0 halved while nothing passes), then C doubled
  while a trial at beta x R0 passes, then binary-searched with trials at gamma x R0 until
  the width is <= E.
teardown: load N connections, time a full flush (T_N) and an empty flush (T_0):
  rate = N / (T_N - T_0).
phase 2: in phase 1 the Responder's port learns the translated tuples (NAT address and
  port, its own address and port) from the frames it receives, at most M of them (fewer
  fail the trial); D ms after phase 1 began (at least 1000 x N/R + T) it sends alpha x r
  replies to the learned tuples (fixed, increasing, decreasing or random) and all must
  come back through the NAT. Whatever ports the NAT chose, the replies use them.
"""

SCALEUP_EPILOG = """\
examples:
  tgen scaleup rfc9693-cps --cores 1,2 profiles/nat44-stateful.yaml --quick --max-rate 300k
  tgen scaleup rfc2544-throughput --cores 1,2 profiles/lab.yaml --quick --plots out/

Runs the test once per core count k, with the tester's workers pinned to the last k cores,
and prints rate_k and the relative scale-up rate_k / (k x rate_1), as in USERS.md §1.
"""

SCALABLE = ("rfc2544-throughput", "rfc9693-cps")  # the registry's procedures with a unit


def register(sub: argparse._SubParsersAction) -> None:
    def rfc2544_test(q: argparse.ArgumentParser, name: str) -> None:
        _common(q, repeats=20 if name in ("latency", "pdv") else 10)
        if name in ("latency", "pdv"):
            q.set_defaults(default_duration="120s" if name == "latency" else "60s")

    _add_test_family(
        sub,
        "rfc2544",
        help="RFC 2544 throughput (binary search), frame loss, latency (RFC 8219), PDV",
        description="RFC 2544 benchmarks on the real data path (METHODOLOGY.md).",
        epilog=RFC2544_EPILOG + "\n" + COMMON_EPILOG,
        tests=(
            ("throughput", "highest rate with no loss: repeated binary search"),
            ("loss", "frame loss rate from 100 %% down until two clean trials"),
            ("latency", "TL and WCL (RFC 8219) at the throughput rate"),
            ("pdv", "packet delay variation D99.9 - Dmin at the throughput rate"),
        ),
        add_options=rfc2544_test,
    )

    def rfc9693_test(q: argparse.ArgumentParser, name: str) -> None:
        _common(q, repeats=1 if name == "capacity" else 10)
        _stateful(q)

    _add_test_family(
        sub,
        "rfc9693",
        help="RFC 9693 stateful NAT: connection rate, table capacity, tear-down rate",
        description="RFC 9693 stateful NATxy benchmarks (METHODOLOGY.md).",
        epilog=RFC9693_EPILOG + "\n" + COMMON_EPILOG,
        tests=(
            ("cps", "maximum connection establishment rate (binary search, phase 1)"),
            ("capacity", "conntrack table capacity (C0, beta/gamma doubling and search)"),
            ("teardown", "connection tear-down rate from timed flushes"),
        ),
        add_options=rfc9693_test,
    )

    p = sub.add_parser(
        "scaleup",
        help="run a test with 1, 2, ... tester cores: table with relative scale-up",
        description="Scale-up over cores: rate_k and rate_k / (k x rate_1).",
        epilog=SCALEUP_EPILOG + "\n" + COMMON_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scale_test", metavar="TEST", choices=SCALABLE, help=", ".join(SCALABLE))
    _common(p, repeats=10, cores_option=False)
    _stateful(p)
    p.add_argument(
        "--cores",
        dest="core_counts",
        default="1,2",
        help="core counts to run, e.g. 1,2,4 (default: 1,2; at most this machine's CPUs)",
    )
    p.add_argument(
        "--lanes",
        dest="over_lanes",
        action="store_true",
        help="scale each port over its cores: with k cores every port gets k sender lanes "
        "(default: one worker per port, so one port never uses more than one core)",
    )
    p.set_defaults(func=cmd_scaleup, verb_name="scaleup", plots="scaleup-plots")


def _add_test_family(
    sub: argparse._SubParsersAction,
    verb: str,
    *,
    help: str,
    description: str,
    epilog: str,
    tests: tuple[tuple[str, str], ...],
    add_options,
) -> None:
    """``tgen VERB TEST``: one parser per test, each with the verb's epilog and
    ``add_options(parser, test)``; the verb alone prints its help (bad input)."""
    p = sub.add_parser(
        verb,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tests_sub = p.add_subparsers(dest="test", metavar="TEST")
    for name, helptext in tests:
        q = tests_sub.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_options(q, name)
        q.set_defaults(func=cmd_method, verb_name=f"{verb}-{name}")
    p.set_defaults(func=_need_test(p))


def _need_test(parser: argparse.ArgumentParser):
    def f(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return int(ExitCode.BAD_INPUT)

    return f


def _common(p: argparse.ArgumentParser, *, repeats: int, cores_option: bool = True) -> None:
    """The options every methodology verb has: the profile, the trial, the DUT, output."""
    p.add_argument("profile", metavar="PROFILE", help="profile YAML (e.g. profiles/lab.yaml)")
    add_preflight_option(p)
    g = p.add_argument_group("trial")
    _trial_options(g, repeats)
    p.set_defaults(default_repeats=repeats)
    _validity_options(g, cores_option)
    _dut_options(p.add_argument_group("DUT"))
    _output_options(p.add_argument_group("output"))
    try:
        from tgen_tui.results.record import add_store_options

        add_store_options(p)
    except ImportError:  # the results store is optional at this layer
        pass


def _trial_options(g, repeats: int) -> None:
    """Lengths, repeats, rates, frame sizes, loss tolerance, direction, seed."""
    g.add_argument("--duration", "-d", help="trial length (default: 60s; --quick: 2s)")
    g.add_argument(
        "--search-duration",
        help="length of search trials (default: --duration); l is confirmed at full length",
    )
    g.add_argument(
        "--timeout", help="keep counting after sending (default: 2000ms; --quick: 500ms)"
    )
    g.add_argument(
        "--settle", help="pause for the DUT between trials (default: 2s; --quick: 500ms)"
    )
    g.add_argument(
        "--repeats",
        type=int,
        help=f"whole searches/runs (default: {repeats}; --quick: 3)",
    )
    g.add_argument(
        "--max-rate",
        help="highest rate tried, e.g. 200k or 1.5M fps (default: the port's line rate at "
        "the frame size: 14,880,952 fps for 64 B at 10 Gbit/s)",
    )
    g.add_argument("--error", default="1000", help="search stopping width, fps (default: 1000)")
    g.add_argument(
        "--frame-sizes",
        help="comma-separated bytes incl. FCS, or 'rfc2544' for 64,128,256,512,1024,1280,1518 "
        "(default: the profile's sizes)",
    )
    g.add_argument(
        "--loss-tolerance",
        default="0",
        help="frames (e.g. 10) or percent (0.001%%) a passing trial may lose (default: 0; "
        "non-zero is reported as a deviation)",
    )
    g.add_argument(
        "--direction",
        choices=("forward", "reverse", "bidirectional"),
        default="forward",
        help="forward: streams of the profile's first port; reverse: the others; "
        "bidirectional: both, each at the full rate (default: %(default)s)",
    )
    g.add_argument("--seed", type=int, help="PRNG seed (default: the profile's)")


def _validity_options(g, cores_option: bool) -> None:
    """Validity and re-runs, cores, early stop, --quick, the latency/loss knobs, --cluster."""
    g.add_argument(
        "--tolerance",
        type=float,
        default=1e-3,
        help="validity: sending may take duration x (1 + tolerance) (default: 1e-3)",
    )
    g.add_argument(
        "--max-late",
        default="10ms",
        help="a failing trial whose sender stalled longer than this (it then sends the "
        "backlog as a burst) is invalid and run again (default: 10ms; 0 = off)",
    )
    g.add_argument("--retries", type=int, default=2, help="re-runs of such a trial (default: 2)")
    if cores_option:
        add_cores_option(g)
    add_pacing_option(g)
    g.add_argument(
        "--no-early-stop",
        dest="early_stop",
        action="store_false",
        help="run every trial to the end even once its loss already fails it",
    )
    g.add_argument(
        "--quick", action="store_true", help="2 s trials, 3 repeats (marked in the report)"
    )
    g.add_argument(
        "--rate", help="latency/pdv: rate to run at (default: search the throughput first)"
    )
    g.add_argument(
        "--delay", help="latency: tagging starts after this (default: 60s; --quick: 0.5s)"
    )
    g.add_argument(
        "--step", type=float, default=10.0, help="loss: load step in %% (default: 10, max 10)"
    )
    add_cluster_option(
        g,
        "run ports that name a host on that host's Ray node (the head's IP:PORT or 'auto'; "
        "see tgen run --help); every trial opens its engine there",
    )


def _dut_options(d) -> None:
    """--dut-netns, --dut-ssh, --dut-reset."""
    add_dut_options(
        d,
        netns_help="the DUT namespace (default: the profile's dut.netns)",
        ssh_help="remote DUT: command prefix, e.g. 'ssh root@dut'",
    )
    d.add_argument(
        "--dut-reset",
        metavar="COMMAND",
        help="shell command that empties the DUT's state, e.g. 'ssh root@dut conntrack -F'",
    )


def _output_options(o) -> None:
    """--json, --ndjson, --md, --csv, --plots and the terminal's."""
    o.add_argument("--json", metavar="FILE", help="report with every trial (- for stdout)")
    o.add_argument("--ndjson", metavar="FILE", help="one line per trial (- for stdout)")
    o.add_argument("--md", metavar="FILE", help="Markdown tables (USERS.md §1 layout)")
    o.add_argument("--csv", metavar="FILE", help="the same tables as CSV")
    o.add_argument(
        "--plots",
        metavar="DIR",
        help="write the plots here as files (created if missing; scaleup: scaleup-plots/)",
    )
    o.add_argument("--plot-format", choices=("svg", "png"), default="svg")
    o.add_argument("--no-plot", action="store_true", help="no terminal plot")
    add_quiet_option(o, "no progress, no tables")


def _stateful(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("RFC 9693")
    g.add_argument("-N", dest="n", help="connections per trial (default: the unique port space)")
    g.add_argument(
        "-M",
        dest="m",
        help="Responder state table size: a ring that keeps the latest M distinct tuples "
        "learned in phase 1; fewer than M fail the trial (default: N)",
    )
    g.add_argument("-R", dest="r", help="teardown: phase-1 load rate (default: 50k or max)")
    g.add_argument("-T", dest="t", default="500ms", help="phase-1 receive timeout (default: 500ms)")
    g.add_argument(
        "-D",
        dest="dd",
        help="phase-2 start after phase 1 started (default and minimum: 1000 x N/R + T ms)",
    )
    g.add_argument("--alpha", type=float, default=1.0, help="phase-2 rate factor (default: 1)")
    g.add_argument("--beta", type=float, default=0.2, help="capacity doubling (default: 0.2)")
    g.add_argument("--gamma", type=float, default=0.4, help="capacity search (default: 0.4)")
    g.add_argument("-E", dest="e", default="1000", help="capacity width, connections (1000)")
    g.add_argument(
        "--phase2",
        choices=("off", "final", "every"),
        default="final",
        help="phase 2: the Responder replies (alpha x rate) to the tuples it learned in "
        "phase 1 and all must come back through the NAT: after each search at l (final, "
        "default), in every trial (every: RFC 9693's optional validation), or never",
    )
    g.add_argument(
        "--responder-order",
        choices=("fixed", "increasing", "decreasing", "random"),
        default="random",
        help="how the Responder picks learned tuples (default: random)",
    )
    g.add_argument(
        "--proto",
        choices=("udp", "tcp"),
        default="udp",
        help="tcp: each connection is a TCP handshake (SYN, SYN-ACK from the Responder to "
        "the learned tuple, ACK) and its teardown (--tcp-teardown), in batches; a trial "
        "passes when the DUT's conntrack holds N ESTABLISHED entries after the handshakes",
    )
    g.add_argument(
        "--tcp-teardown",
        choices=("fin", "rst", "none"),
        default="fin",
        help="--proto tcp: FIN/ACK both ways (7 packets per connection, as CSIT counts), "
        "RST, or none (default: fin)",
    )
    g.add_argument(
        "--c0",
        default="1000000",
        help="capacity: first table size (default: 1,000,000; use e.g. 5000 in the lab)",
    )


# ---------------------------------------------------------------------------- parsing


def _count(text: str | None, what: str) -> float | None:
    """``200k``, ``1.5M``, ``40000`` → number."""
    if text is None:
        return None
    t = str(text).strip().lower().replace(",", "").replace("_", "")
    for suf in ("fps", "pps", "/s", "cps"):
        t = t.removesuffix(suf)
    mult = 1.0
    if t and t[-1] in "kmg":
        mult = {"k": 1e3, "m": 1e6, "g": 1e9}[t[-1]]
        t = t[:-1]
    try:
        v = float(t) * mult
    except ValueError:
        raise BadInput(f"{what}: {text!r} is not a number (e.g. 50000, 50k, 1.5M)") from None
    if not (v > 0 and math.isfinite(v)):
        raise BadInput(f"{what}: must be > 0, got {text!r}")
    return v


def _dur(text: str, what: str) -> float:
    try:
        v = parse_duration(text)
    except ValueError as e:
        raise BadInput(f"{what}: {e}") from None
    if v < 0:
        raise BadInput(f"{what}: must not be negative")
    return v


def _loss_tol(text: str | None):
    from tgen_tui.methodology.kit.verdict import LossTolerance

    t = (text or "0").strip()
    try:
        if t.endswith("%"):
            v = float(t[:-1])
            if not 0 <= v < 100:
                raise ValueError
            return LossTolerance(percent=v)
        v = int(t)
        if v < 0:
            raise ValueError
        return LossTolerance(frames=v)
    except ValueError:
        raise BadInput(
            f"--loss-tolerance: {text!r}: give frames (10) or a percentage (0.01%)"
        ) from None


def _sizes(text: str | None) -> list[int] | None:
    from tgen_tui.methodology.kit.params import RFC2544_SIZES

    if not text:
        return None
    if text.strip().lower() == "rfc2544":
        return list(RFC2544_SIZES)
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"--frame-sizes: {text!r}: give bytes such as 64,128,1518") from None
    bad = [s for s in out if not 64 <= s <= 9216]
    if bad or not out:
        raise BadInput(f"--frame-sizes: sizes must be 64..9216 bytes, got {text!r}")
    return out


def params_from_args(args: argparse.Namespace) -> Params:
    """The verb's options as :class:`Params` (METHODOLOGY.md's defaults, --quick's)."""
    p = _trial_params(args)
    if getattr(args, "cores", None):
        p.cores = parse_cores_option(args.cores)
    if getattr(args, "cluster", None):
        from tgen_tui.cluster.transport import cluster_transport
        from tgen_tui.engine.cli_options import check_cluster_option

        check_cluster_option(args.cluster)
        p.cluster = args.cluster
        p.transport = cluster_transport(args.cluster)
    if p.duration_s <= 0 or (p.search_duration_s is not None and p.search_duration_s <= 0):
        raise BadInput("--duration and --search-duration must be > 0")
    if not 0 < p.step_pct <= 10:
        raise BadInput("--step must be in (0, 10] %")
    if hasattr(args, "c0"):
        _stateful_params(p, args)
    if p.delay_s >= p.duration_s and args.verb_name == "rfc2544-latency":
        raise BadInput(
            f"--delay ({p.delay_s:g} s) must be shorter than --duration ({p.duration_s:g} s)"
        )
    return p


def _retries(n: int) -> int:
    if n < 0:
        raise BadInput(f"--retries: {n}: give 0 (no re-runs) or more")
    return n


def _trial_params(args: argparse.Namespace) -> Params:
    """The options every verb has: trial lengths, repeats, rates, validity, the DUT."""
    from tgen_tui.methodology.kit.params import Params

    quick = args.quick
    duration = args.duration or ("2s" if quick else getattr(args, "default_duration", "60s"))
    repeats = args.repeats if args.repeats is not None else (3 if quick else args.default_repeats)
    timeout = args.timeout or ("500ms" if quick else "2000ms")
    settle = args.settle or ("500ms" if quick else "2s")
    delay = args.delay or ("500ms" if quick else "60s")
    if repeats < 1:
        raise BadInput("--repeats must be at least 1")
    if not (0 <= args.tolerance < 1):
        raise BadInput("--tolerance must be in [0, 1)")
    check_dut_ssh(args.dut_ssh)
    for opt in ("json", "ndjson", "md", "csv"):
        check_output_file(getattr(args, opt, None), f"--{opt}")
    _check_plots_dir(getattr(args, "plots", None))
    return Params(
        profile=args.profile,
        duration_s=_dur(duration, "--duration"),
        search_duration_s=_dur(args.search_duration, "--search-duration")
        if args.search_duration
        else None,
        timeout_s=_dur(timeout, "--timeout"),
        settle_s=_dur(settle, "--settle"),
        repeats=repeats,
        max_rate=_count(args.max_rate, "--max-rate"),
        error=_count(args.error, "--error") or 1000.0,
        frame_sizes=_sizes(args.frame_sizes),
        loss_tolerance=_loss_tol(args.loss_tolerance),
        direction=args.direction,
        seed=args.seed,
        tolerance=args.tolerance,
        early_stop=args.early_stop,
        max_late_s=_dur(args.max_late, "--max-late"),
        retries=_retries(args.retries),
        quick=args.quick,
        rate=_count(args.rate, "--rate"),
        delay_s=_dur(delay, "--delay"),
        step_pct=10.0 if args.step is None else args.step,
        dut_netns=args.dut_netns,
        dut_ssh=args.dut_ssh,
        dut_reset=args.dut_reset,
        pacing=getattr(args, "pacing", None),
    )


def _stateful_params(p: Params, args: argparse.Namespace) -> None:
    """RFC 9693's options (-N, -M, -R, -T, -D, alpha/beta/gamma, -E, --c0, phase 2, TCP)."""
    p.n = _whole(args.n, "-N") if args.n else None
    p.m = _whole(args.m, "-M") if args.m else None
    p.r = _count(args.r, "-R") or p.rate
    p.t_ms = _dur(args.t, "-T") * 1000
    p.d_ms = _dur(args.dd, "-D") * 1000 if args.dd else None
    p.alpha, p.beta, p.gamma = args.alpha, args.beta, args.gamma
    if not (p.alpha > 0 and math.isfinite(p.alpha)):
        raise BadInput(f"--alpha: {args.alpha:g}: the phase-2 rate factor must be > 0")
    if p.d_ms is not None and p.d_ms <= p.t_ms:
        raise BadInput(
            f"-D {args.dd}: phase 2 starts after phase 1 has ended, at least 1000 x N/R + T "
            f"ms after it began: give more than -T ({p.t_ms:g} ms)"
        )
    p.e = _whole(args.e, "-E")
    p.c0 = _whole(args.c0, "--c0")
    p.phase2, p.responder_order = args.phase2, args.responder_order
    p.proto, p.tcp_teardown = args.proto, args.tcp_teardown
    if not (0 < p.beta < 1 and 0 < p.gamma < 1):
        raise BadInput("--beta and --gamma must be between 0 and 1")


def _check_plots_dir(path: str | None) -> None:
    """--plots DIR: a folder, or one that can be made (its nearest existing parent is
    a writable folder)."""
    if not path:
        return
    p = os.path.abspath(path)
    if os.path.exists(p):
        if not os.path.isdir(p):
            raise BadInput(f"--plots {path}: not a folder")
        if not os.access(p, os.W_OK | os.X_OK):
            raise BadInput(f"--plots {path}: the folder is not writable")
        return
    parent = os.path.dirname(p)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(
            f"--plots {path}: cannot make the folder ({parent} is not a writable folder)"
        )


def _whole(text: str, what: str) -> int:
    """A count that must be given (``4M``, ``5000``) as a whole number."""
    v = _count(text, what)
    if v is None:
        raise BadInput(f"{what}: give a number (e.g. 5000, 5k)")
    return int(v)


# ---------------------------------------------------------------------------- running


def _open_out(path: str | None):
    if not path:
        return None
    if path == "-":
        return sys.stdout
    return open(path, "w")  # noqa: SIM115 - closed by the caller


def method_owner(args: argparse.Namespace, test: str, params):
    """The run owner of a methodology run (tgen_tui.session): its preflight, its
    before_run/after_run hooks, its signals; every trial's engine and hooks go through it."""
    from tgen_tui.results.record import StoreOptions
    from tgen_tui.session.options import RunOptions
    from tgen_tui.session.owner import RunOwner

    opts = RunOptions(
        profile=args.profile,
        cores=tuple(params.cores) if params.cores else None,
        pacing=params.pacing,
        dut_netns=args.dut_netns,
        dut_ssh=args.dut_ssh,
        cluster=params.cluster,
        transport=params.transport,
        preflight=bool(getattr(args, "preflight", False)),
        tcp_handshake=False,  # the procedures open their own TCP connections per trial
        quiet=args.quiet,
        store=StoreOptions.from_args(args),
        test=test,
        front_end=f"tgen {test.replace('-', ' ')}",
    )
    owner = RunOwner(opts, on_preflight=None if args.quiet else _print_preflight)
    params.owner, params.hooks = owner, owner.hooks
    return owner


def _print_preflight(checks: list) -> None:
    from tgen_tui.engine.preflight import render_table

    print(render_table(checks), file=sys.stderr)


def _execute(owner, state, args) -> MethodologyReport:
    """Run the state's procedure as the owner's run (begin, the procedure, end; a stop
    signal ends it cleanly); the report (partial when a signal ended it)."""
    from tgen_tui.methodology.kit.progress import Progress
    from tgen_tui.methodology.registry import build_report, procedure

    nd = _open_out(args.ndjson)
    state.progress = Progress(1, ndjson=nd, quiet=args.quiet)
    try:
        owner.run(lambda _: procedure(state.test).run(state))
    finally:
        state.progress.end_line()
        if nd is not None and nd is not sys.stdout:
            nd.close()
    return build_report(state, partial=owner.signal is not None, signal_name=owner.signal)


def cmd_method(args: argparse.Namespace) -> int:
    return run_procedure(args, args.verb_name, params_from_args(args))


def run_procedure(args: argparse.Namespace, test: str, params, **body) -> int:
    """Every methodology verb's run: root, the run owner (--preflight, the DUT hooks, the
    signals), the procedure (with ``body`` in its state), the report, the exit code."""
    from tgen_tui.methodology.kit.state import RunState

    owner = method_owner(args, test, params)  # the profile, the DUT: bad input first
    check_runnable(owner.profile, test, body)
    _need_root(f"tgen {test.replace('-', ' ')}")
    state = RunState(test=test, params=params)
    state.body.update(body)
    report = _execute(owner, state, args)
    _finish(args, report, state)
    return _exit(owner)


def check_runnable(profile, test: str, body: dict) -> None:
    """BadInput for a profile the test cannot run, before root or the lab is looked at:
    a procedure searches the rate of frame streams, so a profile of only ``transport:``
    flows (kernel sockets) has nothing to search; a sweep's largest session count must
    fit the Initiator's port space."""
    verb = f"tgen {test.replace('-', ' ')}"
    kind = getattr(body.get("config"), "kind", None)
    if kind in ("cps", "concurrent") and test.startswith("rfc9411-"):
        from tgen_tui.methodology.procedures.mlr.appsearch import base_load

        base_load(profile, kind)  # app flows of the searched load, or BadInput
        return
    if not any(s.enabled for s in profile.streams):
        what = (
            "only transport: flows (kernel TCP/UDP sockets), no frame streams"
            if profile.transport
            else "no enabled frame stream"
        )
        raise BadInput(
            f"{profile.name}: {what}: {verb} measures frame streams (run socket flows "
            "with tgen run)"
        )
    sessions = body.get("sessions")
    if sessions:
        from tgen_tui.methodology.procedures.sweep.sessions import with_sessions

        with_sessions(profile, max(sessions))


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        from tgen_tui.diagnostics import EnvironmentProblem

        raise EnvironmentProblem(f"{what} needs root (AF_PACKET, namespaces)")


def _exit(owner) -> int:
    """One rule (tgen_tui.session.exits): a failed after_run hook is raised once the
    report is written and stored; a stop signal is 128 + its number."""
    from tgen_tui.session.exits import signal_exit

    if owner.record.hook_failure is not None:
        raise owner.record.hook_failure
    return signal_exit(owner.signal) if owner.signal else 0


def _finish(args: argparse.Namespace, report: MethodologyReport, state) -> None:
    """The report written (JSON: its model's document), shown (tables, lines, plots) and
    stored."""
    from tgen_tui.methodology import registry
    from tgen_tui.methodology.kit.tables import write_tables

    doc = report.to_doc()
    if args.json:
        write_json_output(args.json, doc)
    text = registry.render(report)
    plots_text, plot_files = registry.plots(report, args.plots, args.plot_format)
    write_tables(args.md, args.csv, registry.tables(report))
    if not args.quiet:
        out = sys.stderr if args.json == "-" or args.ndjson == "-" else sys.stdout
        print(text, file=out)
        if plots_text and not args.no_plot:
            print(plots_text, file=out)
        for f in plot_files:
            print(f"plot: {f}", file=out)
    _store(args, doc, state)


def _store(args: argparse.Namespace, doc: dict, state) -> None:
    """Record the run in the results store (tgen_tui.results), with every trial."""
    from tgen_tui.methodology.registry import flat_trials
    from tgen_tui.results.record import StoreOptions, store_result

    params = {k: v for k, v in (doc.get("parameters") or {}).items() if k != "profile"}
    opts = StoreOptions.from_args(args)
    store_result(doc, opts, test=doc["test"], params=params, trials=flat_trials(state))


def cmd_scaleup(args: argparse.Namespace) -> int:

    try:
        counts = sorted({int(x) for x in args.core_counts.split(",") if x.strip()})
    except ValueError:
        raise BadInput(f"--cores: {args.core_counts!r}: give core counts such as 1,2,4") from None
    avail = sorted(os.sched_getaffinity(0))
    if not counts or counts[0] < 1 or counts[-1] > len(avail):
        raise BadInput(
            f"--cores: core counts must be 1..{len(avail)} on this machine, got {args.core_counts!r}"
        )
    args.verb_name = args.scale_test
    params = params_from_args(args)
    body: dict = {"counts": counts, "avail": avail}
    if getattr(args, "over_lanes", False):
        body["over"] = "lanes"
    return run_procedure(args, f"scaleup-{args.scale_test}", params, **body)
