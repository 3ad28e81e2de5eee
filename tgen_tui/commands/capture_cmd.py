"""``tgen capture PROFILE PORT``: capture a port's frames while a run goes on elsewhere
(the console, ``tgen run``, or anything else that sends through the port).

It opens the same capture process the engine uses (:mod:`tgen_tui.engine.capture`): a
tap on the port's interface in its namespace, the filter compiled by libpcap and run in
the kernel, a pcapng file with a comment per test frame (stream, sequence number, lane,
named from the profile). It prints the frames it kept as one decoded line each (a
sample: the last few of every quarter second; every frame is in the file) and, at the
end, one line with what it kept and what it could not. Ctrl-C or SIGTERM stops it and
the file is complete.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import signal
import sys

from tgen_tui.diagnostics import BadInput

EPILOG = """\
examples:
  tgen capture profiles/lab.yaml p1 --filter 'udp and dst port 7' --count 1000 -w p1.pcapng
  tgen capture profiles/lab.yaml p0 --filter 'stream up' --direction tx --duration 5s
  tgen capture profiles/lab.yaml p1 --filter other          # frames without a signature
  tgen capture profiles/lab.yaml p0 --filter arpnd          # the responder's ARP and ND

FILTER: a tcpdump expression (libpcap compiles it, the kernel runs it), or tgen's own:
'stream NAME' (that stream's test frames), 'other' (frames without a signature), 'arpnd'.
The file: pcapng, one interface per port and direction ("p1 rx", "p1 tx"), nanosecond
kernel stamps, a comment per frame ("stream up seq 1234 lane 0"); tshark and Wireshark
read it. Bounds: the kernel ring (--ring MiB; overflow is reported as "ring full"), a
frame budget per second (--budget), --count, --duration. Exit: 0 done, 2 bad input
(an unknown port, a filter tcpdump rejects), 3 environment (not root, no namespace).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "capture",
        help="capture a port's frames into pcapng (filtered, decoded, while a run goes on)",
        description="Capture what a port sends and receives, filtered, into a pcapng file.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("profile", metavar="PROFILE", help="the profile that names the port")
    p.add_argument("port", metavar="PORT", help="the port (several: p0,p1)")
    p.add_argument("--filter", "-f", default="", metavar="EXPR", help="what to keep (see below)")
    p.add_argument("--direction", choices=("both", "rx", "tx"), default="both")
    p.add_argument("--count", "-c", type=int, default=0, metavar="N", help="stop after N frames")
    p.add_argument("--duration", "-d", metavar="TIME", help="stop after TIME (e.g. 10s)")
    p.add_argument(
        "--snaplen",
        "-s",
        type=int,
        default=262144,
        metavar="BYTES",
        help="bytes kept per frame (default: all)",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=200_000,
        metavar="FPS",
        help="frames kept per second at most (default: 200000; 0: no limit)",
    )
    p.add_argument(
        "--ring", type=int, default=32, metavar="MiB", help="kernel ring per port (default: 32)"
    )
    p.add_argument("--stop-on-full", action="store_true", help="stop when the ring first overflows")
    p.add_argument(
        "-w", "--write", metavar="FILE", help="pcapng file (default: capture-PORT-TIME.pcapng)"
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no frame lines, only the summary")
    p.set_defaults(func=cmd_capture)


def _setup(profile_path: str):
    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.engine.setup import Setup
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile

    return Setup.build(compile_profile(load_profile(profile_path)), EngineOptions())


def frame_line(f) -> str:
    """One decoded line: time, port, direction, comment, addresses and ports, length."""
    from tgen_tui.packets.decode import summary

    t = _dt.datetime.fromtimestamp(f.ts_ns / 1e9).strftime("%H:%M:%S.%f")
    return f"{t} {f.port} {f.direction} {summary(f.data)} len {f.length}  [{f.comment}]"


def cmd_capture(args: argparse.Namespace) -> int:
    import trio

    from tgen_tui.engine.capture import CaptureProc, CaptureSpec, check_spec
    from tgen_tui.engine.cli_options import check_environment
    from tgen_tui.profiles.units import parse_duration

    duration = 0.0
    if args.duration:
        try:
            duration = parse_duration(args.duration)
        except ValueError as e:
            raise BadInput(f"--duration: {e}") from None
        if duration <= 0:
            raise BadInput("--duration must be > 0")
    setup = _setup(args.profile)
    ports = tuple(p.strip() for p in args.port.split(",") if p.strip())
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    spec = CaptureSpec(
        ports=ports,
        file=args.write or f"capture-{'-'.join(ports)}-{stamp}.pcapng",
        filter=args.filter,
        direction=args.direction,
        count=args.count,
        duration_s=duration,
        snaplen=args.snaplen,
        budget_pps=args.budget,
        ring_mb=args.ring,
        stop_on_full=args.stop_on_full,
    )
    check_spec(spec, list(setup.port_names), [p.name for p in setup.programs])
    check_environment(
        setup.compiled, needs_root="tgen capture needs root (AF_PACKET sockets, network namespaces)"
    )
    out = {"view": None}

    async def main() -> None:
        proc = CaptureProc(1, spec, setup)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as sigs:
            async with trio.open_nursery() as nursery:
                await nursery.start(proc.run)
                if proc.view.state == "failed":
                    out["view"] = proc.view
                    return

                async def on_signal() -> None:
                    async for _ in sigs:
                        await proc.stop("stopped by signal")
                        return

                nursery.start_soon(on_signal)
                print(
                    f"tgen: capturing {spec.describe()} into {spec.file} (Ctrl-C stops)",
                    file=sys.stderr,
                )
                shown: set = set()
                while not proc.done.is_set():
                    with trio.move_on_after(0.25):
                        await proc.done.wait()
                    if not args.quiet:
                        for f in proc.view.recent:
                            key = (f.port, f.direction, f.ts_ns, f.comment)
                            if key not in shown:
                                print(frame_line(f), flush=True)
                        shown = {
                            (f.port, f.direction, f.ts_ns, f.comment) for f in proc.view.recent
                        }
                out["view"] = proc.view
                nursery.cancel_scope.cancel()

    trio.run(main)
    v = out["view"]
    print(f"tgen: {v.line()}", file=sys.stderr)
    if v.state == "failed":
        from tgen_tui.diagnostics import EnvironmentProblem

        raise EnvironmentProblem(f"capture: {v.message}")
    return 0
