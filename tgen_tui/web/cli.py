"""``tgen serve [PROFILE]``: the console (``tgen tui``) in a browser, through textual-serve.

Only argument checks live here; aiohttp and textual-serve load in :mod:`tgen_tui.web`
when the verb runs, so ``tgen --help`` and the headless verbs stay light.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import shlex
import sys
from pathlib import Path

from tgen_tui.diagnostics import EnvironmentProblem, ExitCode, TgenError
from tgen_tui.engine.cli_options import add_cores_option, add_dut_options

SERVE_EPILOG = """\
examples:
  tgen serve profiles/lab.yaml                  # http://127.0.0.1:8000/, this machine only
  ssh -L 8000:127.0.0.1:8000 lab-host           # then open http://127.0.0.1:8000/ here
  tgen serve profiles/lab.yaml --host 0.0.0.0 --token auto
                                                # prints http://HOST:8000/?token=... once
  TGEN_SERVE_TOKEN=$(cat ~/.tgen-token) tgen serve lab.yaml --host 10.0.0.5
  tgen serve profiles/lab.yaml --fake           # simulated engine: try it without root

Safety: the page can start traffic. By default the server listens on 127.0.0.1 only
and answers only to loopback names. Any other --host needs a token: --token TOKEN
(16+ characters advised), --token auto (generated, printed once) or $TGEN_SERVE_TOKEN. Every
request must carry it (?token=... in the URL; the page keeps it in a cookie), else
the answer is 403 and nothing starts. Websockets from other sites are refused.
On a machine shared with other users, use a token on loopback too.

One console at a time: each browser session runs its own `tgen tui` process, and
that process owns the ports. A second browser is told who has the console (and
from where) instead of starting a second set of workers; the port locks also stop
a `tgen run` on the same ports. Closing the page quits its console, which stops
its workers. Ctrl-C or SIGTERM stops the server and every console it started.

Exit codes: 0 stopped, 2 bad input (profile, no token for a public --host),
3 environment (address in use, textual-serve not installed); a console's own errors
(not root, a port in use) appear in its page and in the server's log.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="the console in a web browser (one at a time); 127.0.0.1 unless --token",
        description="Serve `tgen tui [PROFILE]` to web browsers: one console process per page.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("profile", metavar="PROFILE", nargs="?", help="profile the console opens")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=8000, help="TCP port (default: 8000; 0 = any free port)"
    )
    p.add_argument(
        "--token",
        default=os.environ.get("TGEN_SERVE_TOKEN"),
        help="secret every request must carry; 'auto' generates one (default: $TGEN_SERVE_TOKEN)",
    )
    console = p.add_argument_group("passed to each console (see tgen tui --help)")
    console.add_argument("--fake", action="store_true", help="simulated engine: no root, no lab")
    add_cores_option(console)
    add_dut_options(console)
    p.set_defaults(func=cmd_serve)


def console_command(args: argparse.Namespace) -> str:
    """The shell command textual-serve runs for each browser session."""
    argv = [sys.executable, "-m", "tgen_tui", "tui"]
    if args.profile:
        argv.append(str(Path(args.profile).resolve()))
    if args.fake:
        argv.append("--fake")
    for opt in ("cores", "dut_netns", "dut_ssh"):
        if getattr(args, opt):
            argv += [f"--{opt.replace('_', '-')}", getattr(args, opt)]
    return shlex.join(argv)


def cmd_serve(args: argparse.Namespace) -> int:
    from tgen_tui.web.access import resolve_token, weak_token

    if not 0 <= args.port <= 65535:
        raise TgenError(f"--port {args.port}: must be 0..65535", ExitCode.BAD_INPUT)
    token = resolve_token(args.host, args.token)
    if warning := weak_token(token):
        print(f"tgen serve: warning: {warning}", file=sys.stderr)
    if args.profile:
        from tgen_tui.profiles.loader import load_profile

        load_profile(args.profile)  # bad profiles fail here (exit 2), not in the browser
    for module in ("textual_serve", "aiohttp"):
        if importlib.util.find_spec(module) is None:
            raise EnvironmentProblem(
                f"tgen serve needs {module}: pip install 'tgen-tui[web]' (or bash bootstrap.sh)"
            )
    from tgen_tui.web.server import ConsoleServer

    logging.basicConfig(
        level=logging.INFO,
        format="tgen serve: %(asctime)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for noisy in ("aiohttp.access", "aiohttp.server", "aiohttp.web", "textual-serve"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    name = Path(args.profile).name if args.profile else ""
    server = ConsoleServer(
        console_command(args),
        host=args.host,
        port=args.port,
        token=token,
        title=f"tgen tui {name}".strip(),
    )

    def ready(host: str, port: int) -> None:
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        shown = f"[{shown}]" if ":" in shown else shown
        query = f"?token={token}" if token else ""
        print(f"tgen serve: open http://{shown}:{port}/{query}", flush=True)
        if host != shown:
            print(
                f"tgen serve: listening on {host}:{port} (use this machine's address)", flush=True
            )
        if os.geteuid() != 0 and not args.fake:
            print("tgen serve: not root: each console will say it needs root (or use --fake)")
        print("tgen serve: Ctrl-C stops the server and every console it started", flush=True)

    asyncio.run(server.run(on_ready=ready))
    return int(ExitCode.OK)
