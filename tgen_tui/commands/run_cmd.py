"""``tgen run PROFILE``: headless replay for scripts and CI (trio, never Textual).

The command line becomes typed :class:`~tgen_tui.session.options.RunOptions`; the run
owner (:mod:`tgen_tui.session`) runs it: preflight, hooks, flush, TCP handshakes, the
engine (frame streams and socket flows), DUT events, thresholds, the typed result, the
exit status, the clean end on Ctrl-C, SIGTERM and SIGHUP. This module renders: one
NDJSON snapshot per interval, a live progress line on stderr when it is a terminal, the
final JSON, a summary table (:mod:`tgen_tui.commands.run_render`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from tgen_tui.diagnostics import BadInput, check_output_file
from tgen_tui.engine.cli_options import (
    add_capture_options,
    add_cluster_option,
    add_cores_option,
    add_dut_options,
    add_lanes_option,
    add_pacing_option,
    add_preflight_option,
    add_quiet_option,
    check_dut_ssh,
    parse_capture_options,
    parse_cores_option,
    parse_lanes_option,
    write_json_output,
)
from tgen_tui.profiles.units import parse_duration
from tgen_tui.results.record import StoreOptions, add_store_options

RUN_EPILOG = """\
examples:
  tgen run profiles/lab.yaml --duration 10
  tgen run profiles/lab.yaml --duration 30 --json out.json --ndjson - | jq .ports.p1.rx_pps
  tgen run profiles/imix.yaml --rate-scale 0.5 --fail-on 'loss>0.01%' --fail-on 'p99>2ms'
  tgen run profiles/nat44-stateful.yaml --ports p0,p1 --fail-on 'conntrack>90%'

--fail-on METRIC OP VALUE (several allowed, or comma-separated):
  loss>0.1%   lost frames as % of sent, worst stream   lost>0  lost frames (count)
  p99>2ms     latency (p50 p99 p999 avg min max jitter; ns/us/ms/s, bare = us)
  achieved<99%   achieved send rate as % of requested, worst port
  conntrack>90%  DUT conntrack peak as % of its max (without %: entries)
  ooo>0, dup>0   out-of-order / duplicate frames
  goodput<50M    a socket flow's goodput over the run, bit/s (k, M, G), worst flow
  rtt>40ms, retrans>1%, udp_loss>0.5%   a TCP flow's mean RTT / retransmitted share,
                 a UDP flow's datagram loss

Socket flows (the profile's transport: entries): kernel TCP/UDP between the transport
hosts (tgen lab up --transport-hosts), through the DUT, beside the frame streams in the
same run: per flow goodput, RTT, cwnd, retransmits, UDP loss and jitter live in the
NDJSON ("flows"), and over the run in the result ("transport"). A flow starts and stops
with its port; --rate-scale scales UDP flows too.

Latency: on the sendmmsg path (the default) the kernel stamps every K-th frame of a stream
as the driver sends it (SO_TIMESTAMPING; K from the rate: every frame up to 1 kfps, 1 in 32
at 20 kfps, 1 in 128 at 100 kfps) and the receive ring gives the kernel's receive time; the
two are joined by stream and sequence number. The result says latency_source "kernel"
(per stream: latency_source, latency_every = K, latency_unstamped). The tx_ring and AF_XDP
paths and streams from another host use the frame's signature stamp instead ("signature":
user space, just before the send call, so it includes the tester's send path).
latency_floor_ns is the tester's own back-to-back median on this host (measured by tgen
calibrate; null until then): a DUT's latency is the figure minus it.

Output: NDJSON and tables on stdout (NDJSON only, if --ndjson -); progress on stderr.
Exit codes: 0 pass, 1 threshold breached (or the TCP handshake failed), 2 bad input,
3 environment (not root, no lab, a worker died: its port is marked failed, the other
ports keep running). Ctrl-C, SIGTERM or SIGHUP: the ports stop, the after_run hook
runs, the result is written and stored with "partial": true, exit 130 / 143 / 129.
Workers are pinned one per port to --cores (default: every core but the first); with
fewer cores than ports they share, and tgen says so.

Several tester hosts (--cluster, needs: pip install 'tgen-tui[cluster]'): a port that
says `host: tester-a` in the profile runs on the Ray node started on that host with
  ray start --address HEAD:6379 --resources '{"tgen:tester-a": 1}'
(the head: ray start --head --port 6379 --num-cpus 0). Then
  tgen run profiles/two-hosts.yaml --cluster HEAD:6379      (or --cluster auto)
Ports without a host run here. A lost host fails its ports and the others go on. The
result names each port's host and, per host, the measured clock offset and its
uncertainty; latency of a stream between two hosts has that offset subtracted (its
latency_note says so), or is left out when the offset could not be measured.
"""


def register(sub: argparse._SubParsersAction) -> None:
    for verb, helptext in (
        ("run", "run a profile headless: NDJSON stream, final JSON, CI exit code"),
        ("send", "same as run (the data-plane driver's name, kept for scripts)"),
    ):
        _add_run_parser(sub, verb, helptext)


def _add_run_parser(sub: argparse._SubParsersAction, verb: str, helptext: str) -> None:
    p = sub.add_parser(
        verb,
        help=helptext,
        description="Run a profile on the real data path and report per port and per stream.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("profile", metavar="PROFILE")
    p.add_argument(
        "--duration",
        "-d",
        help="how long to send, e.g. 10, 30s, 2min (default: the profile's duration)",
    )
    p.add_argument("--ports", help="comma-separated port names to use (default: all)")
    add_cores_option(p)
    add_lanes_option(p)
    add_pacing_option(p)
    p.add_argument(
        "--rate-scale", type=float, default=1.0, help="multiply every stream's rate (default: 1)"
    )
    p.add_argument("--json", metavar="FILE", help="write the final result JSON here (- for stdout)")
    p.add_argument(
        "--ndjson", metavar="FILE", help="write one snapshot per interval as NDJSON (- for stdout)"
    )
    p.add_argument("--interval", default="100ms", help="snapshot interval (default: 100ms = 10 Hz)")
    p.add_argument(
        "--drain", default="500ms", help="keep counting after sending stops (default: 500ms)"
    )
    p.add_argument(
        "--fail-on",
        action="append",
        metavar="EXPR",
        help="threshold, e.g. 'loss>0.1%%' (repeatable)",
    )
    add_dut_options(p)
    p.add_argument(
        "--flush-dut",
        action="store_true",
        help="flush the DUT's conntrack table before sending (lab namespace or --dut-ssh host)",
    )
    p.add_argument(
        "--dut-event",
        action="append",
        metavar="'TIME: COMMAND'",
        help="run COMMAND on the DUT (its namespace or --dut-ssh) TIME after sending began, "
        "e.g. '5s: nft -f reload.nft'; the outage it caused is reported next to it (repeatable)",
    )
    add_cluster_option(
        p,
        "run ports that name a host on that host's Ray node: the head's IP:PORT, "
        "or 'auto' for a cluster started on this machine (see below)",
    )
    add_preflight_option(p)
    add_quiet_option(p, "no progress line, no table, no preflight table")
    add_capture_options(p)
    add_store_options(p)
    p.set_defaults(func=cmd_run)


def _ports(text: str | None) -> tuple[str, ...] | None:
    return tuple(x.strip() for x in text.split(",") if x.strip()) if text else None


def _seconds(text: str, what: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise BadInput(f"tgen run: {what}: {e}") from None


def run_options(args: argparse.Namespace):
    """The command line as typed RunOptions (BadInput: one line, exit 2); the plain
    checks come before the engine's modules are imported, so a typo is refused at once."""
    if not (args.rate_scale > 0 and math.isfinite(args.rate_scale)):
        raise BadInput("--rate-scale must be > 0")
    interval = _seconds(args.interval, "--interval")
    if interval <= 0:
        raise BadInput("--interval must be > 0")
    duration = _seconds(args.duration, "--duration") if args.duration is not None else None
    if duration is not None and duration <= 0:
        raise BadInput(f"tgen run: --duration {args.duration}: must be > 0 (e.g. 10s)")
    for text in args.fail_on or ():
        if not any(part.strip() for part in text.split(",")):
            raise BadInput("--fail-on: empty: give METRIC OP VALUE, e.g. 'loss>0.1%'")
    check_dut_ssh(args.dut_ssh)
    check_output_file(args.json, "--json")
    check_output_file(args.ndjson, "--ndjson")
    from tgen_tui.engine.dut_events import parse_dut_event
    from tgen_tui.engine.thresholds import parse_thresholds
    from tgen_tui.session.options import RunOptions

    transport = None
    if args.cluster:  # the engine reaches other hosts through the cluster's transport
        from tgen_tui.cluster.transport import cluster_transport

        transport = cluster_transport(args.cluster)
    cores = parse_cores_option(args.cores)
    return RunOptions(
        profile=args.profile,
        duration_s=duration,
        ports=_ports(args.ports),
        cores=tuple(cores) if cores else None,
        lanes=parse_lanes_option(args.lanes),
        pacing=args.pacing,
        rate_scale=args.rate_scale,
        interval_s=interval,
        drain_s=_seconds(args.drain, "--drain"),
        thresholds=tuple(parse_thresholds(args.fail_on)),
        dut_netns=args.dut_netns,
        dut_ssh=args.dut_ssh,
        flush_dut=args.flush_dut,
        dut_events=tuple(parse_dut_event(t) for t in args.dut_event or ()),
        cluster=args.cluster,
        transport=transport,
        preflight=args.preflight,
        quiet=args.quiet,
        store=StoreOptions.from_args(args),
        captures=parse_capture_options(args, list(_ports(args.ports) or ())),
    )


def cmd_run(args: argparse.Namespace) -> int:
    from tgen_tui.session.headless import check_duration, drive
    from tgen_tui.session.owner import RunOwner

    opts = run_options(args)  # bad input before any environment check
    owner = RunOwner(opts, on_preflight=None if args.quiet else _print_preflight)
    check_duration(owner)
    owner.check_environment()
    out = _Outputs(args)
    try:
        owner.run(lambda o: drive(o, out))
        result = owner.result()
        if result is not None:
            _breach_events(out, result)
    finally:
        out.close()
    if result is None:  # a stop signal before the engine opened
        print(f"tgen: {owner.signal or 'stopped'} before the run began: no result", file=sys.stderr)
        return owner.status_without_result()
    return _finish(args, owner, result)


def _finish(args: argparse.Namespace, owner, result) -> int:
    """Write, store and show the result; the exit status (one rule: session.exits)."""
    from tgen_tui.commands.run_render import summary_table

    if args.json:
        write_json_output(args.json, result.to_doc())
    owner.store(result)  # "stored as run N in DB" on stderr unless --quiet
    if not args.quiet:
        dest = sys.stderr if (args.ndjson == "-" or args.json == "-") else sys.stdout
        print(summary_table(result), file=dest)
    for v in owner.record.captures:  # what each capture kept, and what it could not
        print(f"tgen: {v.line()}", file=sys.stderr)
    if owner.record.hook_failure is not None:
        raise owner.record.hook_failure
    status = owner.status(result)
    for line in status.why:
        print(f"tgen: {line}", file=sys.stderr)
    return status.code


def _print_preflight(checks: list) -> None:
    from tgen_tui.engine.preflight import render_table

    print(render_table(checks), file=sys.stderr)


def _breach_events(out: _Outputs, result) -> None:
    from tgen_tui.engine.api import ThresholdBreached

    t = float(result.duration_s or 0.0)
    for b in result.breached:
        out.event(ThresholdBreached(t, b["threshold"], b["where"], float(b["value"])))


class _Outputs:
    """NDJSON sink and the progress line (session.headless.Outputs)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.nd = None
        if args.ndjson == "-":
            self.nd = sys.stdout
        elif args.ndjson:
            try:
                self.nd = open(args.ndjson, "w")  # noqa: SIM115 - closed in close()
            except OSError as e:
                raise BadInput(f"--ndjson {args.ndjson}: {e.strerror or e}") from None
        self.quiet = args.quiet
        self.progress = (not args.quiet) and sys.stderr.isatty()
        self._last_progress = 0.0

    def plan(self, lines: list[str]) -> None:
        if not self.quiet:
            for line in lines:
                print(line, file=sys.stderr)

    def snapshot(self, snap) -> None:
        from tgen_tui.commands.run_render import progress_line

        if self.nd is not None:
            self.nd.write(json.dumps(snap.to_dict(), separators=(",", ":")) + "\n")
            self.nd.flush()
        if self.progress and time.monotonic() - self._last_progress > 0.25:
            self._last_progress = time.monotonic()
            sys.stderr.write("\r\x1b[K" + progress_line(snap))
            sys.stderr.flush()

    def event(self, ev) -> None:
        """A typed engine event as an ``{"event": ...}`` line between the snapshots."""
        if self.nd is not None:
            self.nd.write(json.dumps(ev.to_dict(), separators=(",", ":"), default=str) + "\n")
            self.nd.flush()

    def close(self) -> None:
        if self.progress:
            sys.stderr.write("\r\x1b[K")
        if self.nd is not None and self.nd is not sys.stdout:
            self.nd.close()
            self.nd = None
