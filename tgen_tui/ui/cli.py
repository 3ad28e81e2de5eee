"""``tgen tui [PROFILE]``: the console. Textual is imported only inside the command."""

from __future__ import annotations

import argparse
import sys

from tgen_tui.engine.cli_options import (
    add_cluster_option,
    add_cores_option,
    add_dut_options,
    add_lanes_option,
    add_pacing_option,
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
    (a UDP flow's on the Flows screen, or a port's with only UDP flows: a bit rate, 2M)
  m main  f streams  n flows  d DUT  w workers  l log  ? help  e editor
  p pause a stream (streams)
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
    add_pacing_option(p)
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


NEEDS_ROOT = "tgen tui needs root (AF_PACKET sockets, network namespaces); --fake runs a simulation"


def console_options(args: argparse.Namespace, path: str):
    """The console's command line for one profile, as typed RunOptions: the console's run
    has no duration (it runs until the ports stop) and is filed as ``tui``."""
    from tgen_tui.results.record import StoreOptions
    from tgen_tui.session.options import RunOptions

    cores = parse_cores_option(args.cores)
    cluster = getattr(args, "cluster", None)
    transport = None
    if cluster:  # the engine reaches other hosts through the cluster's transport
        from tgen_tui.cluster.transport import cluster_transport

        transport = cluster_transport(cluster)
    return RunOptions(
        profile=path,
        cores=tuple(cores) if cores else None,
        lanes=parse_lanes_option(getattr(args, "lanes", None)),
        pacing=getattr(args, "pacing", None),
        dut_netns=args.dut_netns,
        dut_ssh=args.dut_ssh,
        cluster=cluster,
        transport=transport,
        preflight=bool(getattr(args, "preflight", False)),
        store=StoreOptions.from_args(args),
        test="tui",
        front_end="tgen tui",
    )


def make_host_builder(args: argparse.Namespace):
    """Profile path -> (host, compiled): the run owner's whole run in trio guest mode
    (its hooks, TCP handshakes and engine: tgen_tui.session), or the fake engine."""
    cores = parse_cores_option(args.cores)

    def build(path: str):
        if args.fake:
            from tgen_tui.ui.fake import FakeEngine
            from tgen_tui.ui.host import AsyncioEngineHost, fake_engine_cm

            compiled = _compile(path)
            eng = FakeEngine(compiled, cores=cores)
            return AsyncioEngineHost(lambda: fake_engine_cm(eng, path)), compiled
        from tgen_tui.session.owner import RunOwner
        from tgen_tui.ui.host import GuestEngineHost

        owner = RunOwner(console_options(args, path))  # bad profile or options: exit 2
        owner.check_environment(needs_root=NEEDS_ROOT)  # no root, no lab: exit 3
        return GuestEngineHost(owner.open, owner=owner), owner.compiled

    return build


def _preflight_now(owner) -> None:
    """--preflight before the console takes the terminal: the table on stderr, exit 1
    when a check fails (the owner then skips it when the run begins)."""
    import trio

    from tgen_tui.engine.preflight import render_table

    owner.on_preflight = lambda checks: print(render_table(checks), file=sys.stderr)
    trio.run(owner.preflight)


def cmd_tui(args: argparse.Namespace) -> int:
    from tgen_tui.ui.keymap import load_keymap

    keymap = load_keymap(args.keymap)
    build = make_host_builder(args)
    host = compiled = None
    if args.profile:
        host, compiled = build(args.profile)  # bad profile: exit 2; no root/lab: exit 3
        if host.owner is not None and host.owner.opts.preflight:
            _preflight_now(host.owner)  # exit 1 on a failed check
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
        app.on_forced_exit = lambda result: _store(app)
    rc = app.run()
    if app.exit_message:
        print(app.exit_message, file=sys.stderr)
    if not args.fake:
        _store(app)
    failure = getattr(app.host.owner, "record", None) if app.host is not None else None
    if failure is not None and failure.hook_failure is not None:
        raise failure.hook_failure  # after the result is written and stored
    return int(rc or 0)


def _store(app) -> None:
    """File the console's run in the results store, once."""
    owner = app.host.owner if app.host is not None else None
    if owner is None or app.run_result is None or app.stored:
        return
    app.stored = True
    store_console_run(app.run_result, owner.opts.store, owner.opts.params())


def store_console_run(result, opts, params: dict | None = None) -> int | None:
    """Store a console run (a typed RunResult) as ``tui``, unless nothing was sent: then
    say so and store nothing (an idle console leaves no run). Returns the run id."""
    from tgen_tui.results.record import store_result
    from tgen_tui.session.record import sent_nothing

    if sent_nothing(result.to_doc()):
        if not opts.no_store and not opts.quiet:
            print("tgen tui: nothing was sent: no run stored", file=sys.stderr)
        return None
    return store_result(result, opts, test="tui", params=params)


__all__ = ["cmd_tui", "console_options", "make_host_builder", "register", "store_console_run"]
