"""The ``tgen`` command line: one verb per task, each with --help that teaches by example.

Verbs import their modules lazily so that ``tgen --help`` is fast and so that the
headless verbs never import Textual (DESIGN rule 1). Every error reaches the user as
one line and a fixed exit code (see :mod:`tgen_tui.diagnostics`), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tgen_tui.diagnostics import ExitCode, TgenError, report

DESCRIPTION = """\
tgen-tui: a traffic generator and live dashboard for benchmarking NAT gateways,
firewalls and routers on stock Linux (AF_PACKET, network namespaces, nftables).

Typical session:
  tgen lab up                               # namespaces + NAT44 DUT, no hardware needed
  tgen tui profiles/lab.yaml                # the console: 0 s starts p0, ? lists every key
  tgen validate profiles/lab.yaml           # check a profile: file:line:col errors
  tgen run profiles/lab.yaml --duration 10  # headless: send, count, print, exit code for CI
  tgen rfc2544 throughput profiles/lab.yaml --quick   # the lossless rate, binary search
  tgen results list                         # every run is stored; results check flags regressions
  tgen lab down

Exit codes: 0 ok, 1 test failed (threshold breached), 2 bad input, 3 environment.
"""

# verb modules, each exposing register(subparsers), and the verbs each registers (a test
# checks the two agree): a command line names its verb, so only that module is imported
VERB_MODULES = {
    "tgen_tui.commands.profile_cmds": ("validate", "schema", "pcap"),
    "tgen_tui.lab.cli": ("lab",),
    "tgen_tui.commands.run_cmd": ("run", "send"),
    "tgen_tui.commands.methodology_cmds": ("rfc2544", "rfc9693", "scaleup"),
    "tgen_tui.commands.sweep_cmd": ("sweep",),
    "tgen_tui.commands.search_cmd": ("search",),
    "tgen_tui.commands.rfc9411_cmd": ("rfc9411",),
    "tgen_tui.commands.results_cmd": ("results",),
    "tgen_tui.web.cli": ("serve",),
    "tgen_tui.commands.calibrate_cmd": ("calibrate",),
    "tgen_tui.commands.preflight_cmd": ("preflight",),
    "tgen_tui.commands.capture_cmd": ("capture",),
    "tgen_tui.commands.campaign_cmd": ("campaign",),
    "tgen_tui.commands.dut_cmd": ("dut",),
    "tgen_tui.ui.cli": ("tui",),
}


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb, or of ``verb`` alone when it is a known one (``tgen
    validate`` then imports no engine, store or console module: half a second less)."""
    parser = argparse.ArgumentParser(
        prog="tgen", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version="tgen-tui 0.1.0")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    mine = [m for m, verbs in VERB_MODULES.items() if verb in verbs]
    for name in mine or VERB_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _verb(argv: list[str]) -> str | None:
    """The command line's verb: its first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(_verb(words))  # imports the verb's module: a Ctrl-C may come here
        args = parser.parse_args(words)
        if not getattr(args, "func", None):
            parser.print_help()
            return int(ExitCode.BAD_INPUT)
        rc = args.func(args)
    except TgenError as e:
        rc = report(e)
    except KeyboardInterrupt:  # a verb without a run owner (one exit rule: session.exits)
        print("tgen: interrupted", file=sys.stderr)
        rc = _sigint_exit()
    except BrokenPipeError:
        rc = 0
    except BaseExceptionGroup as eg:  # errors raised inside trio nurseries arrive grouped
        rc = _report_group(eg)
    except Exception as e:  # noqa: BLE001 - a bug: one line, the traceback only on request
        rc = _internal_error(e)
    sys.stdout.flush()
    return int(rc or 0)


def _leaves(eg: BaseException) -> list[BaseException]:
    if isinstance(eg, BaseExceptionGroup):
        out: list[BaseException] = []
        for e in eg.exceptions:
            out.extend(_leaves(e))
        return out
    return [eg]


def _report_group(eg: BaseExceptionGroup) -> int:
    leaves = _leaves(eg)
    for e in leaves:
        if isinstance(e, TgenError):
            return report(e)
    if any(isinstance(e, KeyboardInterrupt) for e in leaves):
        print("tgen: interrupted", file=sys.stderr)
        return _sigint_exit()
    return _internal_error(next((e for e in leaves if isinstance(e, Exception)), eg))


def _sigint_exit() -> int:
    from tgen_tui.session.exits import signal_exit

    return signal_exit("SIGINT")


def _internal_error(e: BaseException) -> int:
    """Unexpected exceptions are bugs: say so in one line; TGEN_DEBUG=1 shows the traceback."""
    import os
    import traceback

    if os.environ.get("TGEN_DEBUG"):
        traceback.print_exception(e)
    print(
        f"tgen: internal error: {type(e).__name__}: {e} (please report it; TGEN_DEBUG=1 shows the traceback)",
        file=sys.stderr,
    )
    return int(ExitCode.ENVIRONMENT)


if __name__ == "__main__":
    sys.exit(main())
