"""The timer pacer's per-frame loop, compiled (``csrc/pace.c``, see its header): built
with the host's C compiler at bootstrap (``python -m tgen_tui.worker.cpace build``) or
on first use, loaded with ctypes. Without a compiler the pacer keeps its Python loop
(:func:`load` returns None), which cannot space frames closer than ~20 µs.

Imports: the standard library and numpy only (DESIGN rule 2).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys

import numpy as np

from tgen_tui.worker import cbuild

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "csrc", "pace.c")
LIB = os.path.join(HERE, "csrc", "pace.so")
CACHE_LIB = os.path.join(os.path.expanduser("~"), ".cache", "tgen", "pace.so")

_lib: ctypes.CDLL | None = None
_tried = False


def _compiler() -> str | None:
    for cc in ("cc", "gcc", "clang"):
        if shutil.which(cc):
            return cc
    return None


def lib_path() -> str:
    """The built library, if there and not older than its source; else ''."""
    return cbuild.fresh(SRC, (LIB, CACHE_LIB))


def build(force: bool = False) -> str:
    """Compile ``csrc/pace.c`` (if missing or stale): the library's path; OSError with
    one line when it cannot."""
    have = lib_path()
    if have and not force:
        return have
    cc = _compiler()
    if cc is None:
        raise OSError("no C compiler (cc, gcc or clang): apt-get install gcc")
    return cbuild.compile_to(
        SRC, (LIB, CACHE_LIB), lambda tmp: [cc, "-O2", "-Wall", "-shared", "-fPIC", SRC, "-o", tmp]
    )


_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_ARGS = [ctypes.c_int32, _P, _I64, _P, _P, _P, ctypes.c_int32, _I64, _I64, _I64, _I64, _P,
         ctypes.c_uint32, _P, _P, _P]  # fmt: skip


def load() -> ctypes.CDLL | None:
    """The library (built now if needed), or None where it cannot be built or loaded."""
    global _lib, _tried
    if _tried:
        return _lib
    _tried = True
    if os.environ.get("TGEN_NO_CPACE"):
        return None
    try:
        lib = ctypes.CDLL(build())
    except OSError:
        return None
    lib.tgen_pace_send.argtypes = _ARGS
    lib.tgen_pace_send.restype = ctypes.c_int32
    _lib = lib
    return lib


class PaceOut:
    """Reused output arrays of one call (send times, wake-up lateness, errno)."""

    def __init__(self, n: int) -> None:
        self.sent_ns = np.zeros(n, dtype=np.int64)
        self.wake_late = np.zeros(n, dtype=np.int64)
        self.err = np.zeros(1, dtype=np.int32)

    def grow(self, n: int) -> None:
        if n > len(self.sent_ns):
            self.__init__(n)  # type: ignore[misc]


def main(argv: list[str] | None = None) -> int:
    """``python -m tgen_tui.worker.cpace build``: compile the library (bootstrap.sh)."""
    return cbuild.build_main("tgen_tui.worker.cpace", lambda: build(force=True), argv)


if __name__ == "__main__":
    sys.exit(main())
