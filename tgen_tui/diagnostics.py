"""Error rendering and exit codes, shared by every command (DESIGN rule 9).

Errors are data until the edge: loaders return positioned problems and only the
CLI renders them, once, as ``file:line:col: field: message``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """Fixed process exit codes of every ``tgen`` verb."""

    OK = 0
    TEST_FAILED = 1
    BAD_INPUT = 2
    ENVIRONMENT = 3


@dataclass(frozen=True)
class Problem:
    """One positioned problem in an input file."""

    file: str
    line: int
    col: int
    field: str
    message: str

    def render(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}"
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class TgenError(Exception):
    """An error that the CLI reports as one line and an exit code, never a traceback."""

    code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, code: ExitCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class BadInput(TgenError):
    """The user's input (profile, option, expression) is wrong: exit 2."""

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message, ExitCode.BAD_INPUT)
        self.problems = problems or []

    def lines(self) -> list[str]:
        return [p.render() for p in self.problems] or [str(self)]


class EnvironmentProblem(TgenError):
    """The machine cannot do what was asked (not root, no interface, no namespace): exit 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.ENVIRONMENT)


def report(err: TgenError, stream=None) -> int:
    """Print an error as one line per problem on stderr and return its exit code."""
    out = stream or sys.stderr
    if isinstance(err, BadInput):
        for line in err.lines():
            print(line, file=out)
    else:
        print(f"tgen: error: {err}", file=out)
    return int(err.code)


def check_output_file(path: str | None, option: str) -> None:
    """Refuse an output path before anything runs (BadInput, exit 2): a directory, a
    folder that does not exist or is not writable, a file that cannot be written, and
    /dev/full (every write fails). None and ``-`` (stdout) pass; so do /dev/null, a
    named pipe and a terminal, which take what is written."""
    import os
    import stat

    if path is None or path == "-":
        return
    if not path:
        raise BadInput(f"{option}: give a file name (or - for stdout)")
    where = f"{option} {path}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise BadInput(f"{where}: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise BadInput(f"{where}: is a directory; give a file name in it")
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7):
            raise BadInput(f"{where}: every write to /dev/full fails (no space left)")
        if not os.access(path, os.W_OK):
            raise BadInput(f"{where}: not writable")
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        missing = os.path.dirname(path) or parent
        raise BadInput(f"{where}: the folder {missing} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(f"{where}: the folder {os.path.dirname(path) or '.'} is not writable")
