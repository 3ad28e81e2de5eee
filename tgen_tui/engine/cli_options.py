"""What every front end shares to ask for an engine: argparse options declared once, and the
environment checks made before one opens (root, namespaces, the --cluster option).

Each helper adds the option to a parser or an argument group with the same name, default
and meaning everywhere; ``help`` may be worded for the verb where its context differs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tgen_tui.diagnostics import BadInput, EnvironmentProblem

CORES_HELP = "cores for workers, e.g. 1 or 1-3 (default: all but core 0)"
DUT_NETNS_HELP = "probe conntrack in this namespace (default: the profile's dut.netns)"
DUT_SSH_HELP = "probe a remote DUT: command prefix, e.g. 'ssh root@dut'"


def add_cores_option(p, help: str = CORES_HELP) -> None:
    """--cores: the cores the workers run on (parse with :func:`parse_cores_option`)."""
    p.add_argument("--cores", help=help)


def parse_cores_option(text: str | None) -> list[int] | None:
    """The --cores value as core numbers, None where not given; a bad one is BadInput."""
    if not text:
        return None
    from tgen_tui.engine.assignment import parse_cores

    try:
        return parse_cores(text)
    except ValueError as e:
        why = str(e)
        if "invalid literal" in why:  # int() on a word: say what a core list looks like
            why = "give core numbers and ranges, e.g. 1, 1-3 or 0,2-3"
        raise BadInput(f"--cores: {text!r}: {why}") from None


LANES_HELP = (
    "sender lanes per port: N workers, each on its own core, share every port "
    "(default: each port's lanes in the profile, else 1)"
)


def add_lanes_option(p, help: str = LANES_HELP) -> None:
    """--lanes N: sender lanes of every port (tgen_tui.engine.lanes); parse with
    :func:`parse_lanes_option`."""
    p.add_argument("--lanes", metavar="N", help=help)


def parse_lanes_option(text: str | None) -> int | None:
    """The --lanes value, None where not given; anything but a whole number 1..64 is BadInput."""
    if text is None:
        return None
    try:
        n = int(str(text).strip())
    except ValueError:
        raise BadInput(f"--lanes: {text!r} is not a whole number") from None
    if not 1 <= n <= 64:
        raise BadInput(f"--lanes: {n}: give 1 to 64")
    return n


def add_dut_options(p, *, netns_help: str = DUT_NETNS_HELP, ssh_help: str = DUT_SSH_HELP) -> None:
    """--dut-netns and --dut-ssh: where the DUT is (a lab namespace, or a remote prefix)."""
    p.add_argument("--dut-netns", help=netns_help)
    p.add_argument("--dut-ssh", type=_dut_ssh_arg, help=ssh_help)


def _dut_ssh_arg(text: str) -> str:
    """argparse type of --dut-ssh: BadInput (not argparse's usage text) is one line, exit 2."""
    check_dut_ssh(text)
    return text


def check_dut_ssh(text: str | None, option: str = "--dut-ssh") -> None:
    """--dut-ssh: a command prefix that splits into words (shell quoting), e.g. 'ssh root@dut'."""
    if text is None:
        return
    import shlex

    try:
        words = shlex.split(text)
    except ValueError as e:
        raise BadInput(f"{option} {text!r}: {str(e).lower()} (e.g. 'ssh root@dut')") from None
    if not words:
        raise BadInput(f"{option}: give a command prefix, e.g. 'ssh root@dut'")


def write_json_output(dest: str, doc: dict) -> None:
    """A --json FILE option's output: ``doc`` indented, to that file or to stdout for ``-``.
    A file that cannot be written (a full disk) is one line, exit 3."""
    body = json.dumps(doc, indent=2, default=str) + "\n"
    if dest == "-":
        sys.stdout.write(body)
        return
    try:
        Path(dest).write_text(body)
    except OSError as e:
        raise EnvironmentProblem(f"--json {dest}: {e.strerror or e}") from None


def add_quiet_option(p, help: str) -> None:
    """--quiet/-q: no progress output."""
    p.add_argument("--quiet", "-q", action="store_true", help=help)


def add_cluster_option(p, help: str) -> None:
    """--cluster ADDRESS: ports that name a host run on that host's Ray node."""
    p.add_argument("--cluster", metavar="ADDRESS", help=help)


def check_cluster_option(cluster: str | None) -> None:
    """--cluster: an address, and Ray installed (checked without importing it)."""
    if cluster is None:
        return
    if not cluster.strip() or any(c.isspace() for c in cluster):
        raise BadInput(f"--cluster: {cluster!r}: give the Ray head's IP:PORT, or 'auto'")
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise EnvironmentProblem(
            "--cluster needs Ray, which is not installed: pip install 'tgen-tui[cluster]'"
        )


def check_environment(
    compiled,
    cluster: str | None = None,
    *,
    needs_root: str = "tgen run needs root (AF_PACKET sockets, network namespaces)",
) -> None:
    """Root, and every port's namespace exists (with a cluster, a port on its own host is checked there)."""
    if os.geteuid() != 0:
        raise EnvironmentProblem(needs_root)
    for spec in compiled.ports.values():
        if cluster and getattr(spec, "host", None):
            continue  # its namespace is on its host: the engine checks there
        if spec.netns and not os.path.exists(f"/run/netns/{spec.netns}"):
            raise EnvironmentProblem(
                f"port {spec.name}: network namespace {spec.netns!r} does not exist (bring the lab up: tgen lab up)"
            )
    for f in getattr(compiled, "flows", ()):
        for side, ns in (("port", f.src_netns), ("rx_port", f.dst_netns)):
            if ns and not os.path.exists(f"/run/netns/{ns}"):
                port = f.port if side == "port" else f.rx_port
                raise EnvironmentProblem(
                    f"flow {f.name}: the transport host of port {port}, network namespace "
                    f"{ns!r}, does not exist (the lab makes them: tgen lab up --transport-hosts)"
                )


def add_preflight_option(p) -> None:
    """--preflight: run ``tgen preflight``'s checks first; stop (exit 1) on a failure."""
    p.add_argument(
        "--preflight",
        action="store_true",
        help="check the path first (links, MTU, gateways, the DUT channel, a short burst "
        "per stream: tgen preflight); stop with exit 1 when a check fails",
    )


def run_preflight(
    compiled,
    *,
    cores: list[int] | None = None,
    ports: list[str] | None = None,
    dut_netns: str | None = None,
    dut_ssh: str | None = None,
    bursts: bool = True,
    quiet: bool = False,
) -> list:
    """The preflight checks of ``compiled`` (engine/preflight.py), in their own trio run;
    prints the table unless ``quiet``; raises PreflightFailed (exit 1) on a failure."""
    import trio

    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.engine.preflight import preflight, render_table

    opts = EngineOptions(
        cores=cores, ports=ports, dut_netns=dut_netns, dut_ssh=dut_ssh, neighbours={}
    )
    checks = trio.run(preflight, compiled, opts, bursts)
    if not quiet:
        print(render_table(checks), file=sys.stderr)
    bad = [c for c in checks if not c.ok]
    if bad:
        raise PreflightFailed(bad)
    return checks


class PreflightFailed(EnvironmentProblem):
    """A preflight check failed: exit 1 (the test's path is not ready)."""

    def __init__(self, bad: list) -> None:
        from tgen_tui.diagnostics import ExitCode

        lines = [f"preflight: {c.scope}: {c.check}: {c.detail}" for c in bad]
        super().__init__("\n".join(lines))
        self.code = ExitCode.TEST_FAILED
        self.checks = bad


PACING_HELP = (
    "how frames are spaced on the wire, for every port: auto (space them where this host "
    "can: a TBF qdisc for constant rates, a timer for drawn gaps and bursts, else burst), "
    "qdisc, timer, or burst (every due frame at once: the peak rate) (default: each "
    "port's pacing in the profile, else auto)"
)


def add_pacing_option(p, help: str = PACING_HELP) -> None:
    """--pacing METHOD for every port (the profile's ``ports.X.pacing``)."""
    p.add_argument("--pacing", choices=("auto", "qdisc", "timer", "burst"), help=help)


CAPTURE_HELP = """\
capture (tgen run, tgen tui):
  --capture PORT[,PORT][:FILTER]   capture what the ports send and receive into -w FILE
      (pcapng: one interface per port and direction, ns kernel stamps, a comment per
      frame with its stream, sequence number and lane). FILTER: a tcpdump expression
      ('udp and dst port 7', 'vlan 35', 'not arp'), or 'stream NAME', 'other' (frames
      without a signature), 'arpnd' (ARP and Neighbour Discovery). Repeatable: with
      several, -w cap.pcapng becomes cap-p0.pcapng, cap-p1.pcapng, ...
  --capture-lost   keep the tx copies of exactly the frames that never arrived, with the
      run's loss line as the file's comment (-w FILE when there is no --capture, else
      FILE-lost.pcapng; default lost-frames.pcapng)
  The send path is untouched: a capture is a separate tap; what it could not keep
  (ring full, over --capture-budget) is counted in the result's "captures"."""


def add_capture_options(p) -> None:
    """--capture, -w, --capture-lost and the capture's bounds (parse_capture_options)."""
    g = p.add_argument_group("capture", CAPTURE_HELP)
    g.add_argument(
        "--capture",
        action="append",
        metavar="PORT[:FILTER]",
        help="capture PORT(s), filtered (repeatable)",
    )
    g.add_argument(
        "-w", "--write", metavar="FILE", help="the capture's pcapng file (default: capture.pcapng)"
    )
    g.add_argument(
        "--capture-lost", action="store_true", help="keep the tx copies of the lost frames"
    )
    g.add_argument(
        "--capture-direction", choices=("both", "rx", "tx"), default="both", help="default: both"
    )
    g.add_argument(
        "--capture-count",
        type=int,
        default=0,
        metavar="N",
        help="stop after N frames (default: no limit)",
    )
    g.add_argument(
        "--capture-snaplen",
        type=int,
        default=262144,
        metavar="BYTES",
        help="bytes kept per frame (default: all)",
    )
    g.add_argument(
        "--capture-budget",
        type=int,
        default=200_000,
        metavar="FPS",
        help="frames kept per second at most (default: 200000; 0: no limit)",
    )
    g.add_argument(
        "--capture-ring",
        type=int,
        default=32,
        metavar="MiB",
        help="kernel ring per port (default: 32 MiB)",
    )
    g.add_argument(
        "--capture-trigger",
        choices=("loss", "dut-event"),
        help="start capturing when a port first loses a frame (loss) or when the first --dut-event runs",
    )


def parse_capture_options(args, ports: list[str]) -> tuple:
    """The capture options as CaptureSpecs (checked later against the profile)."""
    from tgen_tui.engine.capture import CaptureSpec, parse_capture_arg

    caps = list(getattr(args, "capture", None) or [])
    lost = bool(getattr(args, "capture_lost", False))
    write = getattr(args, "write", None)
    if write and not caps and not lost:
        raise BadInput(
            "-w/--write: nothing to capture (give --capture PORT[:FILTER] or --capture-lost)"
        )
    kw = dict(
        direction=args.capture_direction,
        count=args.capture_count,
        snaplen=args.capture_snaplen,
        budget_pps=args.capture_budget,
        ring_mb=args.capture_ring,
        trigger=args.capture_trigger,
    )
    base = write or "capture.pcapng"
    stem, dot, ext = base.rpartition(".") if "." in Path(base).name else (base, "", "")
    ext = dot + ext if dot else ".pcapng"
    specs = []
    for text in caps:
        file = base if len(caps) == 1 else f"{stem}-{text.partition(':')[0].replace(',', '-')}{ext}"
        specs.append(parse_capture_arg(text, file, **kw))
    if len({s.file for s in specs}) < len(specs):
        raise BadInput("--capture: two captures of the same ports; give each port once")
    if lost:
        file = (write if not caps else f"{stem}-lost{ext}") if write else "lost-frames.pcapng"
        specs.append(
            CaptureSpec(ports=tuple(ports), file=file, lost=True, ring_mb=args.capture_ring)
        )
    return tuple(specs)
