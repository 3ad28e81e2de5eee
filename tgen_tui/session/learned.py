"""Learned-tuple tables: the files in which a learning port's worker leaves the tuples
it learned (the RFC 9693 Responder in phase 1, a TCP handshake's SYN batch), and the
``EngineOptions.learn`` entry that asks for one.

A table is ``/dev/shm/tgen-learn-PID-XXXXXXXX.npy`` (an int64 array, one row per tuple,
:mod:`tgen_tui.worker.learn`); tables of tgen processes that are gone are removed the
next time one is made.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets

from tgen_tui.engine.options import LearnSpec

LEARN_DIR = "/dev/shm"


def new_table_path() -> str:
    """A fresh path for one run's learned-tuple table (removed by :func:`remove_table`);
    tables left by runs that were killed are removed first."""
    remove_stale_tables()
    return os.path.join(LEARN_DIR, f"tgen-learn-{os.getpid()}-{secrets.token_hex(4)}.npy")


def remove_stale_tables(directory: str = LEARN_DIR) -> list[str]:
    """Remove learned-tuple tables (and temporary files) of tgen processes that are gone."""
    from tgen_tui.engine.transport import remove_files_of_gone_processes

    return remove_files_of_gone_processes(os.path.join(directory, "tgen-learn-*"), 2)


def remove_table(path: str | None) -> None:
    """Delete a learned-tuple table and any temporary file a worker left beside it."""
    if not path:
        return
    for f in [path, *glob.glob(glob.escape(path) + ".tmp*")]:
        with contextlib.suppress(OSError):
            os.unlink(f)


def learn_options(port: str, path: str, streams: list[int], max_rows: int) -> dict[str, LearnSpec]:
    """EngineOptions.learn for a phase-1 trial: ``port`` learns the tuples of ``streams``."""
    return {port: LearnSpec(path, tuple(int(s) for s in streams), int(max_rows))}


def learned_count(path: str) -> int:
    """Rows of the table the Responder wrote (0 when there is none)."""
    import numpy as np

    try:
        t = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return 0
    return int(t.shape[0]) if t.ndim == 2 else 0


__all__ = [
    "LEARN_DIR",
    "learn_options",
    "learned_count",
    "new_table_path",
    "remove_stale_tables",
    "remove_table",
]
