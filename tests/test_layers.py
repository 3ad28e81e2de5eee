"""The architecture's rules as tests: the DESIGN.md layers (import-linter, lazy imports
included) and the size limits of issue 18 (no function over 80 lines in engine/,
methodology/ and ui/, and in the methodology verbs' commands; no module over 450 lines
in engine/)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "tgen_tui"
MAX_FUNCTION_LINES = 80
FUNCTION_PACKAGES = ("engine", "methodology", "ui")
# the methodology verbs' front end (issue 29): every function, the argparse blocks too
FUNCTION_MODULES = (
    "commands/methodology_cmds.py",
    "commands/search_cmd.py",
    "commands/sweep_cmd.py",
)
MAX_ENGINE_MODULE_LINES = 450

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


def test_no_function_over_80_lines():
    over = []
    paths = [p for package in FUNCTION_PACKAGES for p in _modules(package)]
    for path in paths + [PKG / m for m in FUNCTION_MODULES]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    over.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {n}")
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(over)


def test_no_engine_module_over_450_lines():
    over = [
        f"{path.relative_to(REPO)}: {n}"
        for path in _modules("engine")
        if (n := len(path.read_text().splitlines())) > MAX_ENGINE_MODULE_LINES
    ]
    assert not over, f"engine modules over {MAX_ENGINE_MODULE_LINES} lines:\n" + "\n".join(over)
