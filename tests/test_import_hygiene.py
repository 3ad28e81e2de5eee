"""DESIGN rules 1 and 2: the core never imports Textual; workers import only stdlib + numpy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _loaded(modules: list[str]) -> set[str]:
    code = (
        "import sys, json\n"
        + "".join(f"import {m}\n" for m in modules)
        + "print(json.dumps(sorted({k.split('.')[0] for k in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize(
    "module",
    [
        "tgen_tui.engine.controller",
        "tgen_tui.commands.run_cmd",
        "tgen_tui.profiles.loader",
        "tgen_tui.packets.compile",
        "tgen_tui.lab.topology",
        "tgen_tui.cli",
    ],
)
def test_core_never_imports_textual(module: str) -> None:
    loaded = _loaded([module])
    assert "tgen_tui" in loaded
    assert "textual" not in loaded


def test_worker_is_import_light() -> None:
    loaded = _loaded(
        ["tgen_tui.worker.main", "tgen_tui.packets.batch", "tgen_tui.packets.schedule"]
    )
    assert "numpy" in loaded
    for heavy in ("textual", "trio", "scapy", "pydantic", "psutil", "ruamel"):
        assert heavy not in loaded, f"worker imports {heavy}"


def test_cli_help_runs_without_textual() -> None:
    code = "import sys; from tgen_tui.cli import build_parser; build_parser(); print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_verb_map_names_what_each_module_registers() -> None:
    """tgen_tui.cli.VERB_MODULES says which verbs each module registers (a command line
    imports only its verb's module): it must be what register() really adds."""
    import argparse
    import importlib

    from tgen_tui.cli import VERB_MODULES

    for name, verbs in VERB_MODULES.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        assert tuple(sub.choices) == verbs, name


def test_validate_imports_no_engine_store_or_console() -> None:
    """``tgen validate`` builds the parser of its verb only: no run, results or console
    module is imported for it (they cost half a second of every validate)."""
    code = (
        "import sys; from tgen_tui.cli import build_parser; build_parser('validate');"
        "print(sorted(m for m in sys.modules if m.startswith(('tgen_tui.results', "
        "'tgen_tui.commands.run_cmd', 'tgen_tui.ui', 'textual'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
