"""``tgen run`` of a profile with ``transport:`` streams (kernel TCP/UDP through the DUT).

Same options and outputs as a raw-frame run: one NDJSON line per interval (``"kind":
"transport"``, per flow goodput, RTT, cwnd, retransmits, delivery rate, UDP loss and
jitter, Jain's index), the final JSON (``transport.streams.NAME.goodput_bps``, ``rtt_ms``,
``retransmits``; Mathis's prediction for Reno flows; headline ``metrics``), a table, and
a row in the results store (``--dut``/``--build``) that ``tgen results check`` judges.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import signal
import sys

from tgen_tui.diagnostics import BadInput, ExitCode
from tgen_tui.engine.cli_options import parse_cores_option, write_json_output
from tgen_tui.profiles.units import parse_duration
from tgen_tui.results.record import record_from_args


def _mbit(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:.3f}"


def _f(v, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def summary_table(result: dict) -> str:
    tr = result["transport"]
    lines = [
        f"profile {result['profile']}  duration {result['duration_s']:.2f} s  transport streams"
        + ("  (PARTIAL: interrupted)" if result["partial"] else "")
    ]
    lines.append(
        f"{'stream':<14}{'proto':<11}{'goodput Mbit/s':>15}{'rtt ms':>9}{'min rtt ms':>12}"
        f"{'retrans':>9}{'retr %':>8}{'loss %':>8}{'jitter ms':>10}{'tx bytes':>13}{'rx bytes':>13}"
    )
    for name, s in tr["streams"].items():
        proto = s["protocol"] + (f"/{s['cc']}" if s.get("cc") else "")
        lines.append(
            f"{name[:13]:<14}{proto:<11}{_mbit(s['goodput_bps']):>15}{_f(s.get('rtt_ms')):>9}"
            f"{_f(s.get('min_rtt_ms')):>12}{_f(s.get('retransmits'), 'd'):>9}"
            f"{_f(s.get('retransmit_pct'), '.3f'):>8}{_f(s.get('loss_pct'), '.3f'):>8}"
            f"{_f(s.get('jitter_ms'), '.3f'):>10}{s['tx_bytes']:>13,}{s['rx_bytes']:>13,}"
        )
    for name, s in tr["streams"].items():
        if s.get("mathis_bps"):
            lines.append(
                f"Mathis (Reno) for {name}: predicted {_mbit(s['mathis_bps'])} Mbit/s from MSS "
                f"{s['mss']} B, RTT {s['rtt_ms']:.1f} ms, p = {s['retransmit_pct'] / 100:.4f}; "
                f"measured {_mbit(s['goodput_bps'])} Mbit/s, ratio {s['mathis_ratio']:.2f}"
            )
    m = tr["metrics"]
    lines.append(
        f"total goodput {_mbit(m.get('goodput_bps'))} Mbit/s, Jain's fairness "
        f"{_f(m.get('fairness_jain'), '.3f')}"
    )
    for w in result.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def progress_line(snap: dict) -> str:
    parts = [f"t={snap['t']:6.1f}s"]
    for name, f in snap["flows"].items():
        rtt = f" rtt {f['rtt_ms']:.1f}ms" if "rtt_ms" in f else ""
        parts.append(f"{name} {f['goodput_bps'] / 1e6:.2f}Mbit/s{rtt}")
    return " | ".join(parts)


def run_transport(args: argparse.Namespace, prof) -> int:
    """``tgen run`` for a profile whose streams are all transport streams."""
    from tgen_tui.engine.transport_run import TransportRun, plan_flows, result_doc

    if prof.streams:
        raise BadInput(
            f"{args.profile}: streams: and transport: in one profile are not supported yet; "
            "run them as two profiles"
        )
    from tgen_tui.engine.transport_run import refuse_options

    refuse_options(
        ("--ports", args.ports),
        ("--lanes", getattr(args, "lanes", None)),
        ("--rate-scale", args.rate_scale != 1.0),
        ("--fail-on", args.fail_on),
        ("--flush-dut", args.flush_dut),
        ("--dut-event", args.dut_event),
        ("--cluster", args.cluster),
        ("--preflight", getattr(args, "preflight", False)),
        ("--dut-netns", args.dut_netns),
        ("--dut-ssh", args.dut_ssh),
    )
    try:
        duration = parse_duration(args.duration) if args.duration is not None else prof.duration
        interval = parse_duration(args.interval)
    except ValueError as e:
        raise BadInput(f"tgen run: {e}") from None
    if interval < 0.1:
        raise BadInput("--interval: transport flows report at most every 100ms (give >= 0.1s)")
    if duration is None:
        raise BadInput("the profile runs until stopped: give --duration (e.g. --duration 10s)")
    groups = plan_flows(prof)
    if not groups:
        raise BadInput(f"{args.profile}: transport: every stream is disabled")
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
    run = TransportRun(groups, duration=duration, interval=interval,
                       cores=parse_cores_option(args.cores))  # fmt: skip
    run.start()
    if not args.quiet:
        for line in run.plan_text():
            print(line, file=sys.stderr)
    interrupted: list[str] = []

    def on_signal(signum, _frame) -> None:
        interrupted.append(signal.Signals(signum).name)
        run.stop()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    nd = sys.stdout if args.ndjson == "-" else open(args.ndjson, "w") if args.ndjson else None  # noqa: SIM115
    progress = (not args.quiet) and sys.stderr.isatty()
    try:
        while (snap := run.next_snapshot()) is not None:
            if nd is not None:
                nd.write(json.dumps(snap, separators=(",", ":")) + "\n")
                nd.flush()
            if progress:
                sys.stderr.write("\r\x1b[K" + progress_line(snap))
        run_s = min(duration, run.t_end) if run.t_end else duration
        tr = run.summary(run_s)
        if nd is not None:
            nd.write(json.dumps({"final": True, "transport": tr}, separators=(",", ":")) + "\n")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        run.kill()
        if progress:
            sys.stderr.write("\r\x1b[K")
        if nd is not None and nd is not sys.stdout:
            nd.close()
    result = result_doc(prof, args.profile, run, tr, run_s, started,
                        interrupted[0] if interrupted else None)  # fmt: skip
    if args.json:
        write_json_output(args.json, result)
    record_from_args(args, result)
    if not args.quiet:
        table = summary_table(result)
        print(table, file=sys.stderr if (args.ndjson == "-" or args.json == "-") else sys.stdout)
    if interrupted:
        return 130 if interrupted[0] == "SIGINT" else 143
    return 0 if not run.errors else int(ExitCode.ENVIRONMENT)
