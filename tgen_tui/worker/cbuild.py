"""Compiling a C source the worker ships (the XDP program, the timer pacer's loop): the
output next to its source, or in the user's cache when the package directory is
read-only, rebuilt when older than the source; and the ``python -m ... build`` command
bootstrap.sh runs. Imports: the standard library only (DESIGN rule 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence


class BuildError(OSError):
    """The source could not be compiled; the message is one line."""


def fresh(src: str, outs: Sequence[str]) -> str:
    """The first of ``outs`` that exists and is not older than ``src``; else ''."""
    for p in outs:
        if os.path.exists(p) and os.path.getmtime(p) >= os.path.getmtime(src):
            return p
    return ""


def compile_to(src: str, outs: Sequence[str], command: Callable[[str], list[str]]) -> str:
    """Run ``command(tmp)`` for the first writable place of ``outs`` and move the result
    there: its path. BuildError with the compiler's first line, or with nowhere to write."""
    for out in outs:
        try:
            os.makedirs(os.path.dirname(out), exist_ok=True)
            tmp = f"{out}.{os.getpid()}.tmp"
            r = subprocess.run(command(tmp), capture_output=True, text=True)
        except OSError:
            continue
        if r.returncode != 0:
            first = (r.stderr.strip().splitlines() or ["?"])[0]
            raise BuildError(f"{command(tmp)[0]} could not build {src}: {first}")
        os.replace(tmp, out)
        return out
    raise BuildError(f"nowhere to write the compiled {os.path.basename(src)} ({', '.join(outs)})")


def build_main(module: str, build: Callable[[], str], argv: list[str] | None = None) -> int:
    """``python -m MODULE build``: compile now and print where (exit 1 when it cannot)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["build"]:
        print(f"usage: python -m {module} build", file=sys.stderr)
        return 2
    try:
        print(build())
    except OSError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


__all__ = ["BuildError", "build_main", "compile_to", "fresh"]
