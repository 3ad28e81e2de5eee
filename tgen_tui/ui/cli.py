"""``tgen tui [PROFILE]``: the console. Textual is imported only inside the command."""

from __future__ import annotations

import argparse
import sys

from tgen_tui.engine.cli_options import (
    add_cluster_option,
    add_cores_option,
    add_dut_options,
    add_lanes_option,
    add_preflight_option,
    parse_cores_option,
    parse_lanes_option,
)

TUI_EPILOG = """\
examples:
  tgen lab up && tgen tui profiles/lab.yaml     # the demo: two ports through the NAT44 DUT
  tgen tui                                      # choose a profile from profiles/
  tgen tui profiles/nat44-stateful.yaml --json session.json
  tgen tui profiles/lab.yaml --keymap my-keys.toml
  tgen tui profiles/lab.yaml --fake             # simulated engine: no root, no lab

keys (every port starts idle; nothing is sent until you say so):
  0-9 select a port   s/t start/stop it   S/T start/stop all   c clear counters
  +/- rate one step (1-2-5 series)   r exact rate: 50kpps, 200Mbit, 10% (of line rate)
  m main  f streams  d DUT  w workers  l log  ? help  e editor  p pause a stream (streams)
  o or enter: the selected port's page   g charts: last 60 s / last 10 min (from 100x30)
  R results store (recent runs, trends, regressions)   ctrl+p command palette
  q quit (asks when traffic runs; stops ports, writes --json, records the session
    unless nothing was sent)

keymap: ~/.config/tgen/keymap.toml (or --keymap FILE) remaps a binding by its id, e.g.
  "port.start" = "ctrl+s"
  "view.streams" = "f,F2"
ids are listed on the Help screen (?).
Exit codes: 0 ok, 2 bad input (profile, keymap), 3 environment (not root, no lab).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tui",
        help="the console: live per-port dashboard, start/stop ports from the keyboard",
        description="Open the Textual console on a profile. Every port starts idle.",
        epilog=TUI_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "profile", metavar="PROFILE", nargs="?", help="profile YAML (default: choose one)"
    )
    p.add_argument(
        "--json", metavar="FILE", help="on quit, write the session's result (tgen run's shape)"
    )
    p.add_argument(
        "--keymap", metavar="FILE", help="keymap TOML (default: ~/.config/tgen/keymap.toml)"
    )
    add_cores_option(p)
    add_lanes_option(p)
    add_dut_options(p)
    add_preflight_option(p)
    p.add_argument(
        "--profiles-dir",
        default="profiles",
        help="where the picker and palette look (default: profiles)",
    )
    p.add_argument("--fake", action="store_true", help="simulated engine (demo, no root, no lab)")
    add_cluster_option(
        p,
        "run ports that name a host on that host's Ray node: the head's IP:PORT or "
        "'auto' (see tgen run --help)",
    )
    from tgen_tui.results.record import add_store_options

    add_store_options(p)  # the session is recorded on quit (not with --fake)
    p.set_defaults(func=cmd_tui)


def _compile(path: str):
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile

    return compile_profile(load_profile(path))


def _check_environment(compiled, cluster: str | None = None) -> None:
    """Same checks as ``tgen run``: root, and every port's namespace exists."""
    from tgen_tui.engine.cli_options import check_environment

    check_environment(
        compiled,
        cluster,
        needs_root="tgen tui needs root (AF_PACKET sockets, network namespaces); --fake runs a simulation",
    )


def make_host_builder(args: argparse.Namespace):
    """Profile path -> (host, compiled): the real engine in guest mode, or the fake."""
    cores = parse_cores_option(args.cores)
    lanes = parse_lanes_option(getattr(args, "lanes", None))

    def build(path: str):
        compiled = _compile(path)
        if args.fake:
            from tgen_tui.ui.fake import FakeEngine
            from tgen_tui.ui.host import AsyncioEngineHost, fake_engine_cm

            eng = FakeEngine(compiled, cores=cores)
            return AsyncioEngineHost(lambda: fake_engine_cm(eng)), compiled
        from tgen_tui.engine.cli_options import check_cluster_option

        cluster = getattr(args, "cluster", None)
        check_cluster_option(cluster)
        _check_environment(compiled, cluster)
        from tgen_tui.engine.controller import open_engine
        from tgen_tui.engine.options import EngineOptions
        from tgen_tui.ui.host import GuestEngineHost

        opts = EngineOptions(
            cores=cores, dut_netns=args.dut_netns, dut_ssh=args.dut_ssh, cluster=cluster
        )
        opts.lanes = lanes
        if cluster:  # the engine reaches other hosts through the cluster's transport
            from tgen_tui.cluster.transport import cluster_transport

            opts.transport = cluster_transport(cluster)
        return GuestEngineHost(lambda: open_engine(compiled, opts)), compiled

    return build


def cmd_tui(args: argparse.Namespace) -> int:
    from tgen_tui.ui.keymap import load_keymap

    keymap = load_keymap(args.keymap)
    if args.profile and not getattr(args, "fake", False):
        from tgen_tui.profiles.loader import load_profile

        prof = load_profile(args.profile)
        if prof.transport:  # kernel TCP/UDP flows: their own console (ui/transport_app.py)
            from tgen_tui.ui.transport_app import run_transport_console

            return run_transport_console(args, prof)
    build = make_host_builder(args)
    host = compiled = None
    if args.profile:
        host, compiled = build(args.profile)  # bad profile: exit 2; no root/lab: exit 3
        if getattr(args, "preflight", False) and not args.fake:  # exit 1 on a failed check
            from tgen_tui.engine.cli_options import run_preflight

            run_preflight(
                compiled,
                cores=parse_cores_option(args.cores),
                dut_netns=args.dut_netns,
                dut_ssh=args.dut_ssh,
            )
    from tgen_tui.ui.app import TgenApp

    app = TgenApp(
        host,
        compiled=compiled,
        profile_path=args.profile,
        host_builder=build,
        keymap=keymap,
        json_path=args.json,
        profiles_dir=args.profiles_dir,
        results_db=getattr(args, "db", None),
    )
    app.cli_dut = (args.dut_netns, args.dut_ssh)  # --dut-netns/--dut-ssh for key x
    if not args.fake:
        from tgen_tui.ui.record import store_session

        app.on_forced_exit = lambda result: store_session(args, result)
    rc = app.run()
    if app.exit_message:
        print(app.exit_message, file=sys.stderr)
    if app.result is not None and not args.fake:
        from tgen_tui.ui.record import store_session

        store_session(args, app.result)  # an idle session stores no run and says so
    return int(rc or 0)


__all__ = ["cmd_tui", "register"]
