"""Argparse options that several verbs share, declared once.

Each helper adds the option to a parser or an argument group with the same name, default
and meaning everywhere; ``help`` may be worded for the verb where its context differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tgen_tui.diagnostics import BadInput

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
        raise BadInput(f"--cores: {e}") from None


def add_dut_options(p, *, netns_help: str = DUT_NETNS_HELP, ssh_help: str = DUT_SSH_HELP) -> None:
    """--dut-netns and --dut-ssh: where the DUT is (a lab namespace, or a remote prefix)."""
    p.add_argument("--dut-netns", help=netns_help)
    p.add_argument("--dut-ssh", help=ssh_help)


def write_json_output(dest: str, doc: dict) -> None:
    """A --json FILE option's output: ``doc`` indented, to that file or to stdout for ``-``."""
    body = json.dumps(doc, indent=2, default=str) + "\n"
    if dest == "-":
        sys.stdout.write(body)
    else:
        Path(dest).write_text(body)


def add_quiet_option(p, help: str) -> None:
    """--quiet/-q: no progress output."""
    p.add_argument("--quiet", "-q", action="store_true", help=help)


def add_cluster_option(p, help: str) -> None:
    """--cluster ADDRESS: ports that name a host run on that host's Ray node."""
    p.add_argument("--cluster", metavar="ADDRESS", help=help)
