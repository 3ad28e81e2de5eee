"""``tgen run PROFILE``: headless replay for scripts and CI (trio, never Textual).

Streams one NDJSON snapshot per interval, prints a live progress line on stderr when it
is a terminal, writes the final JSON, prints a summary table, and exits 0 (pass), 1 (a
--fail-on threshold was breached), 2 (bad input) or 3 (environment). SIGINT and SIGTERM
stop the ports cleanly and write the result marked ``"partial": true``.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time

from tgen_tui import fmt
from tgen_tui.diagnostics import BadInput, ExitCode
from tgen_tui.dut.channel import pick_dut
from tgen_tui.engine.cli_options import (
    add_cluster_option,
    add_cores_option,
    add_dut_options,
    add_lanes_option,
    add_preflight_option,
    add_quiet_option,
    check_cluster_option,
    check_environment,
    parse_cores_option,
    parse_lanes_option,
    run_preflight,
    write_json_output,
)
from tgen_tui.profiles.units import parse_duration
from tgen_tui.results.record import add_store_options, record_from_args

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

Latency: on the sendmmsg path (the default) the kernel stamps every K-th frame of a stream
as the driver sends it (SO_TIMESTAMPING; K from the rate: every frame up to 8 kfps, 1 in 4
at 20 kfps, 1 in 16 at 100 kfps) and the receive ring gives the kernel's receive time; the
two are joined by stream and sequence number. The result says latency_source "kernel"
(per stream: latency_source, latency_every = K, latency_unstamped). The tx_ring and AF_XDP
paths and streams from another host use the frame's signature stamp instead ("signature":
user space, just before the send call, so it includes the tester's send path).
latency_floor_ns is the tester's own back-to-back median on this host (measured by tgen
calibrate; null until then): a DUT's latency is the figure minus it.

Output: NDJSON and tables on stdout (NDJSON only, if --ndjson -); progress on stderr.
Exit codes: 0 pass, 1 threshold breached, 2 bad input, 3 environment (not root, no lab,
a worker died: its port is marked failed, the other ports keep running). Ctrl-C or
SIGTERM: the ports stop, the result is written with "partial": true, exit 130 / 143.
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
    add_quiet_option(p, "no progress line, no table")
    add_store_options(p)
    p.set_defaults(func=cmd_run)


def progress_line(snap) -> str:
    parts = [f"t={snap.t:6.1f}s"]
    for p in snap.ports:
        flag = "" if p.state not in ("failed",) else " FAILED"
        parts.append(
            f"{p.name} tx {fmt.rate_short(p.tx_pps)}pps rx {fmt.rate_short(p.rx_pps)}pps{flag}"
        )
    lost = sum(s.lost for s in snap.streams)
    parts.append(f"lost {lost}")
    if snap.dut and snap.dut.conntrack_count is not None:
        parts.append(f"conntrack {snap.dut.conntrack_count:,}/{snap.dut.conntrack_max or 0:,}")
    return " | ".join(parts)


def _lat_cell(v: float | None) -> str:
    return fmt.ns(v).replace(" ", "")


def loss_lines(result: dict) -> list[str]:
    """``why up: lost 912: 640 nft rule drop on dut (...); unexplained 0``, per stream
    with loss or causes."""
    from tgen_tui.dut.attribution import LossCause, why_line

    out = []
    for name, s in result["streams"].items():
        causes = tuple(LossCause(**c) for c in s.get("loss_causes") or ())
        if s.get("lost") or causes:
            line = why_line(s["lost"], causes, s.get("loss_unexplained", 0))
            out.append(f"why {name}: {line}")
    note = (result.get("dut") or {}).get("counters_note")
    if note:
        out.append(f"DUT counters: {note}")
    return out


def summary_table(result: dict) -> str:
    """Plain-text per-port and per-stream tables with units."""
    from tgen_tui.engine.figures import l2_bps

    lines = [
        f"profile {result['profile']}  duration {result['duration_s']:.2f} s  seed {result['seed']}"
        + ("  (PARTIAL: interrupted)" if result["partial"] else "")
    ]
    lines.append(
        f"{'port':<8}{'tx frames':>12}{'rx frames':>12}{'if tx':>12}{'if rx':>12}"
        f"{'req fps':>11}{'achieved':>11}{'tx Mbit/s':>11}{'rx Mbit/s':>11}  state"
    )
    for name, p in result["ports"].items():
        dur = result["duration_s"] or 1
        lines.append(
            f"{name:<8}{p['tx_frames']:>12,}{p['rx_frames']:>12,}{p['if_tx_frames']:>12,}{p['if_rx_frames']:>12,}"
            f"{p['requested_pps']:>11,.0f}{p['achieved_pps']:>11,.0f}"
            f"{l2_bps(p['tx_bytes'] / dur, p['tx_frames'] / dur) / 1e6:>11.2f}"
            f"{l2_bps(p['rx_bytes'] / dur, p['rx_frames'] / dur) / 1e6:>11.2f}  {p['state']}"
            + (f" ({p['failure']})" if p.get("failure") else "")
        )
    lines.append(
        f"{'stream':<16}{'tx':>11}{'rx':>11}{'lost':>9}{'loss %':>9}{'ooo':>6}{'dup':>6}"
        f"{'lat min':>10}{'avg':>10}{'p99':>10}{'max':>10}"
    )
    for name, s in result["streams"].items():
        lat = s["latency_ns"]
        lines.append(
            f"{name[:15]:<16}{s['tx_frames']:>11,}{s['rx_frames']:>11,}{s['lost']:>9,}{s['loss_pct']:>9.4f}"
            f"{s['out_of_order']:>6}{s['duplicates']:>6}{_lat_cell(lat['min']):>10}{_lat_cell(lat['avg']):>10}"
            f"{_lat_cell(lat['p99']):>10}{_lat_cell(lat['max']):>10}"
        )
    lines += _stateful_lines(result["streams"])
    if result.get("tcp"):
        from tgen_tui.session.tcprun import summary

        lines += summary(result["tcp"])
    floor = result.get("latency_floor_ns")
    src = result.get("latency_source")
    how = {
        "kernel": "latency from the kernel's tx and rx timestamps (sampled frames)",
        "signature": "latency from the frames' user-space send stamps (includes the send path)",
        "mixed": "latency: kernel timestamps for some streams, signature stamps for others",
    }.get(src or "", "latency")
    lines.append(
        f"{how}; the tester's own floor is {_lat_cell(floor)} (p50, back to back; "
        "tgen calibrate measured it)"
        if floor is not None
        else f"{how}; run tgen calibrate to measure the tester's own floor"
    )
    if result.get("dut"):
        d = result["dut"]
        full = f", full at {d['full_at_s']:.2f} s" if d.get("full_at_s") is not None else ""
        if d.get("conntrack_rise") is not None:
            full = f" (+{d['conntrack_rise']:,} during the run{full})"
        lines.append(
            f"DUT conntrack peak {d['conntrack_peak']:,} of max {d['conntrack_max'] or 0:,}{full}"
        )
    lines += loss_lines(result)
    for h in (result.get("cluster") or {}).get("hosts", []):
        clock = (
            f"clock offset {h['clock_offset_ns'] / 1e3:+.1f} us +/- {h['uncertainty_ns'] / 1e3:.1f} us"
            if h.get("clock_offset_ns") is not None
            else f"clock offset not measured ({h.get('clock_error')})"
        )
        lost = f"; LOST: {h['lost']}" if h.get("lost") else ""
        lines.append(f"host {h['host']} ({h.get('hostname')}): {clock}{lost}")
    if result.get("dut_events"):
        from tgen_tui.engine.dut_events import event_line

        lines += [event_line(r) for r in result["dut_events"]]
    for b in result.get("breached", []):
        lines.append(f"FAIL {b['threshold']}: {b['where']} = {b['value']:.6g}")
    for w in result.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def _stateful_lines(streams: dict) -> list[str]:
    """Flows verified, setup latency, learned tuples (engine.stateful); the outage of a
    stream only when it lost frames or a DUT event ran."""
    out = []
    for name, s in streams.items():
        parts = []
        if s.get("flows_verified") is not None:
            parts.append(f"flows verified {s['flows_verified']:,} of {s['flows']:,}")
            lat = s.get("setup_latency_ns") or {}
            if lat:
                parts.append(
                    f"setup latency p50 {_lat_cell(lat.get('p50'))} p99 {_lat_cell(lat.get('p99'))}"
                    f" max {_lat_cell(lat.get('max'))}"
                )
        if s.get("learned") is not None:
            parts.append(
                f"learned {s['learned']:,} tuples, e.g. {', '.join(s.get('learned_samples', [])[:2])}"
            )
        if s.get("outage_ms") is not None and s.get("lost"):
            parts.append(f"longest receive gap {s['outage_ms']:.1f} ms at {s.get('outage_at_s')} s")
        if parts:
            out.append(f"stream {name}: " + "; ".join(parts))
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from tgen_tui.engine.thresholds import parse_thresholds
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile

    prof = load_profile(args.profile)
    if prof.transport:  # kernel TCP/UDP flows (commands/transport_cmd.py)
        from tgen_tui.commands.transport_cmd import run_transport

        return run_transport(args, prof)
    from tgen_tui.session.tcprun import data_profile, tcp_plan

    tcp = tcp_plan(prof)  # tcp.handshake: connections opened before the run, closed after
    if tcp is not None:
        prof = data_profile(tcp)
    if not (args.rate_scale > 0 and math.isfinite(args.rate_scale)):
        raise BadInput("--rate-scale must be > 0")
    try:
        duration = parse_duration(args.duration) if args.duration is not None else prof.duration
        interval = parse_duration(args.interval)
        drain = parse_duration(args.drain)
    except ValueError as e:
        raise BadInput(f"tgen run: {e}") from None
    if interval <= 0:
        raise BadInput("--interval must be > 0")
    _check_dut_event_times(args, duration)  # bad input before any environment check
    thresholds = parse_thresholds(args.fail_on)
    cores = parse_cores_option(args.cores)
    lanes = parse_lanes_option(args.lanes)
    ports = [p.strip() for p in args.ports.split(",")] if args.ports else None
    compiled = compile_profile(prof, rate_scale=args.rate_scale)
    if ports:
        unknown = [p for p in ports if p not in compiled.ports]
        if unknown:
            raise BadInput(
                f"--ports: unknown port(s) {', '.join(unknown)} (profile has: {', '.join(compiled.ports)})"
            )
    check_cluster_option(args.cluster)
    check_environment(compiled, args.cluster)

    import trio

    from tgen_tui.engine.options import EngineOptions

    opts = EngineOptions(
        cores=cores,
        lanes=lanes,
        interval=interval,
        drain_ms=int(drain * 1000),
        ports=ports,
        dut_netns=args.dut_netns,
        dut_ssh=args.dut_ssh,
        cluster=args.cluster,
        transport=_cluster_transport(args.cluster),
    )
    args.dut_events = _dut_events(args, compiled)
    if args.flush_dut:
        _flush_dut(*pick_dut(args.dut_netns, args.dut_ssh, compiled.dut_netns, compiled.dut_ssh))
    from tgen_tui.dut.hooks import profile_hooks

    hooks = profile_hooks(prof, args.dut_netns, args.dut_ssh)
    if args.preflight:
        run_preflight(
            compiled,
            cores=cores,
            ports=ports,
            dut_netns=args.dut_netns,
            dut_ssh=args.dut_ssh,
            quiet=args.quiet,
        )
    hooks.run("before_run")  # HookFailed stops the run with the hook's output
    out = _Outputs(args)
    channel = _tcp_handshake(tcp, opts, compiled) if tcp is not None else None
    try:
        result = trio.run(_run, compiled, opts, duration, thresholds, args, out)
    finally:
        out.close()
    if tcp is not None:
        from tgen_tui.session.tcprun import teardown

        trio.run(teardown, tcp, opts, channel)
        result["tcp"] = tcp.report
    after_failed = _after_run(hooks, result)
    if args.json:
        write_json_output(args.json, result)
    record_from_args(args, result)  # prints "stored as run N in DB" on stderr unless --quiet
    if not args.quiet:
        table = summary_table(result)
        print(table, file=sys.stderr if (args.ndjson == "-" or args.json == "-") else sys.stdout)
    if after_failed is not None:
        raise after_failed
    if result["partial"]:
        return (
            130
            if result.get("signal") == "SIGINT"
            else 143
            if result.get("signal")
            else int(ExitCode.ENVIRONMENT)
        )
    failed_ports = [n for n, p in result["ports"].items() if p["state"] == "failed"]
    if result["breached"]:
        return int(ExitCode.TEST_FAILED)
    if tcp is not None and tcp.report.get("error"):  # the connections did not all open
        print(
            f"tgen: TCP handshake failed at {tcp.report['error']}: the run fails", file=sys.stderr
        )
        return int(ExitCode.TEST_FAILED)
    if failed_ports:
        print(f"tgen: port(s) {', '.join(failed_ports)} failed", file=sys.stderr)
        return int(ExitCode.ENVIRONMENT)
    return 0


def _after_run(hooks, result: dict):
    """Run the after_run hook; every hook run goes into the result (``dut_hooks``); a
    failed after_run is returned, to be raised once the result is written and stored."""
    from tgen_tui.dut.hooks import HookFailed

    failed = None
    try:
        hooks.run("after_run")
    except HookFailed as e:
        failed = e
    if hooks.records:
        result["dut_hooks"] = hooks.to_doc()
    return failed


def _tcp_handshake(tcp, opts, compiled):
    """Open the connections of a tcp.handshake stream (methodology.tcprun); the DUT channel."""
    import trio

    from tgen_tui.dut.channel import DutChannel
    from tgen_tui.session.tcprun import handshake

    channel = DutChannel.of(
        *pick_dut(opts.dut_netns, opts.dut_ssh, compiled.dut_netns, compiled.dut_ssh)
    )
    if channel is None:
        raise BadInput("tcp.handshake reads the DUT's conntrack: give dut.netns or --dut-ssh")
    trio.run(handshake, tcp, opts, channel)
    if tcp.report.get("error"):
        print(f"tgen: TCP handshake failed at {tcp.report['error']}", file=sys.stderr)
    return channel


def _cluster_transport(address: str | None):
    """``EngineOptions.transport`` for --cluster (the engine never imports the cluster)."""
    if not address:
        return None
    from tgen_tui.cluster.transport import cluster_transport

    return cluster_transport(address)


def _check_dut_event_times(args: argparse.Namespace, duration: float | None) -> None:
    """Each --dut-event parses, and falls inside the run (one past its end would never run)."""
    from tgen_tui.engine.dut_events import parse_dut_event

    for text in getattr(args, "dut_event", None) or ():
        ev = parse_dut_event(text)
        if duration is not None and ev.at_s >= duration:
            raise BadInput(
                f"--dut-event {text!r}: at {ev.at_s:g} s, but the run sends for {duration:g} s"
            )


def _dut_events(args: argparse.Namespace, compiled):
    """(channel, events, records) for --dut-event, or None."""
    if not getattr(args, "dut_event", None):
        return None
    from tgen_tui.dut.channel import DutChannel
    from tgen_tui.engine.dut_events import parse_dut_event

    events = [parse_dut_event(t) for t in args.dut_event]
    channel = DutChannel.of(
        *pick_dut(args.dut_netns, args.dut_ssh, compiled.dut_netns, compiled.dut_ssh)
    )
    if channel is None:
        raise BadInput(
            "--dut-event needs a DUT: dut.netns in the profile, --dut-netns or --dut-ssh"
        )
    return channel, events, []


def _flush_dut(netns: str | None, ssh: str | None) -> None:
    """Empty the DUT's conntrack table so that the run's conntrack rise counts only its flows."""
    from tgen_tui.dut.channel import DutChannel
    from tgen_tui.dut.conntrack import flush

    channel = DutChannel.of(netns, ssh)
    if channel is None:
        raise BadInput(
            "--flush-dut needs a DUT: dut.netns in the profile, --dut-netns or --dut-ssh"
        )
    flush(channel, timeout=15)


class _Outputs:
    """NDJSON sink and the progress line."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.nd = None
        if args.ndjson == "-":
            self.nd = sys.stdout
        elif args.ndjson:
            self.nd = open(args.ndjson, "w")  # noqa: SIM115 - closed in close()
        self.progress = (not args.quiet) and sys.stderr.isatty()
        self._last_progress = 0.0

    def snapshot(self, snap) -> None:
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


async def _run(compiled, opts, duration, thresholds, args, out: _Outputs) -> dict:
    import trio

    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.thresholds import evaluate

    interrupted: list[str] = []
    main_scope = trio.CancelScope()

    async def watch_signals(sigs) -> None:
        # installed before the workers start: a Ctrl-C while they start still ends
        # in a clean stop and a (partial) result, never a traceback
        async for s in sigs:
            interrupted.append(signal.Signals(s).name)
            main_scope.cancel()
            return

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
        async with trio.open_nursery() as outer:
            outer.start_soon(watch_signals, sigs)
            async with open_engine(compiled, opts) as eng:
                final, sent_for = await _drive(eng, duration, args, out, interrupted, main_scope)
                report = eng.report(
                    final,
                    duration_s=sent_for,
                    partial=bool(interrupted),
                    profile_path=args.profile,
                    thresholds=[t.text for t in thresholds],
                )
            outer.cancel_scope.cancel()
    report.breached = evaluate(thresholds, report.to_doc())
    report.passed = not report.breached
    from tgen_tui.engine.api import ThresholdBreached

    for b in report.breached:
        out.event(ThresholdBreached(sent_for, b["threshold"], b["where"], float(b["value"])))
    if interrupted:
        report.signal = interrupted[0]
    doc = report.to_doc()
    if getattr(args, "dut_events", None):
        from tgen_tui.engine.dut_events import attach_outages

        records = args.dut_events[2]
        attach_outages(records, doc["streams"])
        doc["dut_events"] = records
    return doc


async def _drive(eng, duration, args, out: _Outputs, interrupted: list[str], main_scope):
    """Start every port, wait for the duration (or the end of finite streams, or a
    signal), stop, and return the final snapshot."""
    import trio

    for line in eng.plan_text():
        if not args.quiet:
            print(line, file=sys.stderr)
    snaps = eng.snapshots()
    events = eng.subscribe_events()
    for ev in eng.events_since(0)[1]:  # what happened while the workers started
        out.event(ev)
    finite = eng.finite_total() is not None
    if duration is None and not finite:
        raise BadInput("the profile runs until stopped: give --duration (e.g. --duration 10s)")

    async def consume() -> None:
        async for snap in snaps:
            out.snapshot(snap)

    async def consume_events() -> None:
        async for ev in events:
            out.event(ev)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        nursery.start_soon(consume_events)
        t_start = time.monotonic()
        with main_scope:
            if not interrupted:
                await eng.start()
            dut_ev = getattr(args, "dut_events", None)
            if dut_ev and not interrupted:  # --dut-event: its own task, ended with the run
                from tgen_tui.engine.dut_events import run_events

                nursery.start_soon(run_events, dut_ev[0], dut_ev[1], t_start, dut_ev[2])
            deadline = t_start + duration if duration is not None else math.inf
            while time.monotonic() < deadline and not interrupted:
                await trio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                if finite and eng.ports_done_sending():
                    break
                if all(s == "failed" for s in eng.port_states().values()):
                    break
        sent_for = time.monotonic() - t_start
        with trio.CancelScope(shield=True):
            await eng.stop()
            final = await eng.final_snapshot()
        # drain the last snapshots, then stop the consumers
        await trio.sleep(0)
        nursery.cancel_scope.cancel()
    out.snapshot(final)
    return final, sent_for
