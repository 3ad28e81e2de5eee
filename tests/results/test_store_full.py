"""A results store whose folder is full (issue 36's soak): storing a run costs one warning
line that says the folder has no space, never a traceback or a changed exit code, and
the store stays intact (``PRAGMA integrity_check``, no partial run). Root: a small tmpfs
is mounted for the folder, filled with a file, and unmounted."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.results.rs_helpers import result
from tgen_tui.results import store
from tgen_tui.results.record import record_run

pytestmark = pytest.mark.root


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str = "1m"):
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def _fill(path: Path) -> None:
    """Write zeros to ``path`` until the device is full."""
    block = bytes(65536)
    with open(path, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(block)
            f.flush()
    assert os.statvfs(path.parent).f_bavail == 0


def test_a_full_store_folder_is_one_warning_and_the_store_stays_intact(tmp_path, capsys):
    with _tmpfs(tmp_path / "store") as folder:
        db = folder / "results.db"
        first = record_run(result(), db=str(db), dut="d", build="b1")
        assert first == 1
        capsys.readouterr()
        _fill(folder / "fill")
        assert record_run(result(), db=str(db), dut="d", build="b2") is None
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1, err
        assert err[0].startswith(f"tgen: warning: result not stored: {db}")
        assert err[0].endswith(f"(no space left in {folder}: 0 bytes free)"), err
        (folder / "fill").unlink()
        conn = sqlite3.connect(db)
        try:
            assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
            assert [r[0] for r in conn.execute("SELECT build FROM runs")] == ["b1"]
            assert store.verify(conn) == []
        finally:
            conn.close()
