"""The architecture's rules as tests: the DESIGN.md layers (import-linter, lazy imports
included) and the size limits (no function over 80 lines anywhere in tgen_tui/, but for
argparse registration blocks; no module over 450 lines in engine/)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "tgen_tui"
MAX_FUNCTION_LINES = 80
MAX_ENGINE_MODULE_LINES = 450
#: calls that make a function an argparse registration block (a list of options, exempt)
ARGPARSE_CALLS = frozenset(
    {"add_argument", "add_parser", "add_argument_group", "add_subparsers", "set_defaults"}
    | {"add_mutually_exclusive_group"}
)

# `lint-imports` reads [tool.importlinter] in pyproject.toml; it puts the current folder
# first on sys.path, so the tree under test is the one analysed
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _modules(package: str) -> list[Path]:
    return sorted((PKG / package).rglob("*.py"))


def test_import_contracts_are_kept():
    cp = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 0, cp.stdout[cp.stdout.find("Contracts") :] + cp.stderr


def registration_block(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Most of the function's lines are argparse declarations (options listed one by one)."""
    lines: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ARGPARSE_CALLS or node.func.attr.startswith("add_"):
                lines.update(range(node.lineno, node.end_lineno + 1))
    return len(lines) >= 0.6 * (fn.end_lineno - fn.lineno + 1)


def long_functions(paths) -> list[str]:
    over = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and not registration_block(node):
                    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
                    over.append(f"{where}:{node.lineno} {node.name}: {n}")
    return over


def test_no_function_over_80_lines():
    over = long_functions(sorted(PKG.rglob("*.py")))
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(over)


def test_the_length_rule_finds_a_long_function(tmp_path):
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * 90)
    reg = tmp_path / "reg.py"
    reg.write_text("def register(p):\n" + "    p.add_argument('--x')\n" * 90)
    assert [x.split()[-1] for x in long_functions([long, reg])] == ["91"]


def test_no_engine_module_over_450_lines():
    over = [
        f"{path.relative_to(REPO)}: {n}"
        for path in _modules("engine")
        if (n := len(path.read_text().splitlines())) > MAX_ENGINE_MODULE_LINES
    ]
    assert not over, f"engine modules over {MAX_ENGINE_MODULE_LINES} lines:\n" + "\n".join(over)


#: what only the trio supervisor may do in engine/: start processes and threads
FORBIDDEN_IN_ENGINE = {
    ("threading", "Thread"),
    ("subprocess", "Popen"),
    ("subprocess", "run"),
    ("subprocess", "call"),
    ("subprocess", "check_call"),
    ("subprocess", "check_output"),
    ("os", "fork"),
    ("os", "system"),
    ("os", "popen"),
}


def spawns_outside_trio(paths) -> list[str]:
    """Calls that start a thread or a process other than through trio (its supervisor
    opens worker processes with trio.lowlevel.open_process; blocking reads go through
    trio.to_thread)."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                )
                if any((m or "").split(".")[0] in ("multiprocessing", "concurrent") for m in mods):
                    found.append(f"{path.name}:{node.lineno} imports {mods}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                base = node.func.value
                if isinstance(base, ast.Name) and (base.id, node.func.attr) in FORBIDDEN_IN_ENGINE:
                    found.append(f"{path.name}:{node.lineno} {base.id}.{node.func.attr}")
    return found


def test_the_engine_starts_no_thread_or_process_outside_the_trio_supervisor(tmp_path):
    assert spawns_outside_trio(sorted((PKG / "engine").rglob("*.py"))) == []
    bad = tmp_path / "bad.py"
    bad.write_text("import subprocess, threading\nsubprocess.Popen(['x'])\nthreading.Thread()\n")
    assert len(spawns_outside_trio([bad])) == 2  # the check itself finds them
