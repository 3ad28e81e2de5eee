"""``tgen validate``, ``tgen schema`` and ``tgen pcap``: profile checking and offline export."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tgen_tui.diagnostics import BadInput, EnvironmentProblem, ExitCode, check_output_file

#: frames per stream tgen pcap writes at most, and frames in all
MAX_PCAP_COUNT = 1_000_000
MAX_PCAP_FRAMES = 10_000_000
SCHEMA_DEFAULT = "profiles/schema.json"

VALIDATE_EPILOG = """\
Each problem is printed once as  FILE:LINE:COL: FIELD: MESSAGE  and the exit code is 2.
A valid profile prints a one-line summary per stream: rate, frame size, distinct flows.

examples:
  tgen validate profiles/*.yaml
  tgen validate my.yaml --quiet && echo ok
"""

SCHEMA_EPILOG = """\
The JSON schema lets editors (VS Code's YAML extension, for one) complete and check
profiles as you type: add  # yaml-language-server: $schema=schema.json  to a profile.

examples:
  tgen schema                       # writes profiles/schema.json
  tgen schema --output -            # prints it
"""

PCAP_EPILOG = """\
Writes the first COUNT frames of every enabled stream, interleaved in schedule order,
each stamped with its due time (seconds from the port start). The bytes are exactly what
the workers send, signature included, except the timestamp field, which carries the due
time so the same profile and seed always give the same file.

examples:
  tgen pcap profiles/lab.yaml --count 100 --output lab.pcap
  tshark -r lab.pcap -V -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE | less
"""


def register(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "validate",
        help="check profiles; errors as file:line:col: field: message",
        description="Validate one or more profiles.",
        epilog=VALIDATE_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="profile YAML files")
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "schema",
        help="write the profile JSON schema (profiles/schema.json)",
        description="Write the JSON schema of profiles.",
        epilog=SCHEMA_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument(
        "--output",
        "-o",
        default=SCHEMA_DEFAULT,
        help="file to write, or - for stdout (default: %(default)s)",
    )
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser(
        "pcap",
        help="export the frames a profile sends to a pcap file",
        description="Export the first COUNT frames of each enabled stream to pcap.",
        epilog=PCAP_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("profile", metavar="PROFILE")
    p.add_argument(
        "--count",
        "-c",
        type=int,
        default=100,
        help=f"frames per stream (default: %(default)s; at most {MAX_PCAP_COUNT:,}, and "
        f"{MAX_PCAP_FRAMES:,} in all)",
    )
    p.add_argument("--output", "-o", required=True, metavar="FILE", help="pcap file to write")
    p.add_argument("--streams", help="comma-separated stream names (default: all enabled)")
    p.set_defaults(func=cmd_pcap)


def schema_json() -> str:
    """The profile JSON schema, as committed in profiles/schema.json."""
    from tgen_tui.profiles.models import Profile

    return (
        json.dumps(Profile.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )


def cmd_schema(args: argparse.Namespace) -> int:
    if args.output == SCHEMA_DEFAULT:  # the repository's file: its folder is made
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    check_output_file(args.output, "--output")
    text = schema_json()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        _write(args.output, lambda: Path(args.output).write_text(text, encoding="utf-8"))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _write(path: str, write) -> int:
    """``write()`` to ``path``; a failed write (a full disk) is one line, exit 3, and
    leaves no partial regular file behind."""
    try:
        return write()
    except OSError as e:
        p = Path(path)
        if p.is_file():
            p.unlink(missing_ok=True)
        raise EnvironmentProblem(f"{path}: {e.strerror or e}") from None


def _fps(pps: float) -> str:
    """A frame rate as a user reads it: whole frames from 10/s up, else 2 decimals."""
    return f"{pps:,.0f}" if pps >= 10 else f"{pps:.2f}"


def _idt(s) -> str:
    """The stream's inter-departure law when it is not a constant rate ("idt quake3 ")."""
    law = getattr(s.idt, "dist", "constant")
    return "" if law == "constant" else f"idt {law} "


def _summary(profile) -> list[str]:
    from tgen_tui.profiles.models import size_bounds

    lines = []
    for s in profile.streams:
        state = "" if s.enabled else " (disabled)"
        lo, hi, mean = size_bounds(s.size)
        speed = profile.ports[s.port].speed
        pps = s.mean_pps(speed)
        size = f"{lo} B" if lo == hi else f"{lo}-{hi} B (mean {mean:.0f})"
        if s.pcap is not None:
            lines.append(f"  {s.name}: {s.port}->{s.rx_port or '-'} pcap {s.pcap.file}{state}")
            continue
        state = "" if s.enabled else " (disabled)"
        peak = " peak" if s.shape is not None else " mean" if s.burst_text(speed) else ""
        lines.append(
            f"  {s.name}: {s.port}->{s.rx_port or '-'} {s.l4_kind} {size} {_fps(pps)} fps{peak} "
            f"{_idt(s)}{pps * (mean + 20) * 8 / 1e6:,.2f} Mbit/s(L1) "
            f"flows={s.distinct_flows():,}{state}"
        )
        if s.shape is not None:
            lines.append(f"    shape: {s.shape_text(speed)}")
        if s.burst_text(speed):
            lines.append(f"    bursts: {s.burst_text(speed)}")
    return lines


def cmd_validate(args: argparse.Namespace) -> int:
    from tgen_tui.profiles.loader import load_profile_checked

    failed = False
    for f in args.files:
        try:
            prof, warnings = load_profile_checked(f)
        except BadInput as e:
            failed = True
            for line in e.lines():
                print(line, file=sys.stderr)
            continue
        replays, bad = _replay_reports(prof, f)
        if bad:
            failed = True
            for p in bad:
                print(p.render(), file=sys.stderr)
            continue
        if not args.quiet:
            print(
                f"{f}: ok: {len(prof.ports)} ports, {len(prof.streams)} streams, seed {prof.seed}"
                + (f", {len(prof.transport)} transport streams" if prof.transport else "")
            )
            for line in _summary(prof):
                print(line)
                for more in replays.get(line.split(":")[0].strip(), []):
                    print(f"    {more}")
        for w in warnings:  # never silenced, not even by --quiet
            print(w.render(), file=sys.stderr)
        for line in _lane_warnings(prof):
            print(f"{f}: warning: {line}", file=sys.stderr)
    return int(ExitCode.BAD_INPUT) if failed else 0


def _replay_reports(profile, filename: str) -> tuple[dict[str, list[str]], list]:
    """Per pcap: stream, its summary lines (by stream name); the problems of those that
    cannot be sent, positioned at their field."""
    if not any(s.pcap is not None for s in profile.streams):
        return {}, []
    from tgen_tui.packets.replaycompile import ReplayError, stream_report
    from tgen_tui.profiles.loader import position_of

    out: dict[str, list[str]] = {}
    bad = []
    for i, s in enumerate(profile.streams):
        if s.pcap is None:
            continue
        try:
            out[s.name] = stream_report(s, i, profile.ports[s.port], profile.seed)
        except ReplayError as e:
            bad.append(position_of(filename, ("streams", i, *e.field.split(".")), e.message))
    return out, bad


def _lane_warnings(profile) -> list[str]:
    """Streams on ports with several lanes whose flows cannot each keep to one lane."""
    lanes = {n: p.lanes for n, p in profile.ports.items() if getattr(p, "lanes", 1) > 1}
    if not lanes or not profile.streams:
        return []
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.packets.flowsplit import split_warnings

    return split_warnings(compile_profile(profile).streams, lanes)


def cmd_pcap(args: argparse.Namespace) -> int:
    if not 1 <= args.count <= MAX_PCAP_COUNT:
        raise BadInput(f"--count: {args.count:,}: give 1 to {MAX_PCAP_COUNT:,} frames per stream")
    check_output_file(args.output, "--output")
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.packets.pcap import iter_scheduled_frames, write_pcap
    from tgen_tui.profiles.loader import load_profile

    prof = load_profile(args.profile)
    if not prof.streams and prof.transport:
        raise BadInput(
            f"{args.profile}: only transport streams (kernel TCP/UDP sockets): no frames to export"
        )
    compiled = compile_profile(prof)
    streams = compiled.streams
    if args.streams:
        want = [x.strip() for x in args.streams.split(",") if x.strip()]
        unknown = [w for w in want if w not in compiled.all_stream_names]
        if unknown:
            raise BadInput(
                f"--streams: unknown stream(s) {', '.join(unknown)} (have: {', '.join(compiled.all_stream_names)})"
            )
        streams = [s for s in streams if s.name in want]
    if args.count * len(streams) > MAX_PCAP_FRAMES:
        raise BadInput(
            f"--count: {args.count:,} frames of {len(streams)} streams is more than "
            f"{MAX_PCAP_FRAMES:,} frames in all: lower --count or pick --streams"
        )
    n = _write(
        args.output, lambda: write_pcap(args.output, iter_scheduled_frames(streams, args.count))
    )
    print(f"wrote {n} frames from {len(streams)} streams to {args.output}", file=sys.stderr)
    return 0
