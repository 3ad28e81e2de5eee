"""Fixtures for results-store tests: a temporary database, result documents, a real lab."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh database path; TGEN_DB points at it too (for verbs run without --db)."""
    path = tmp_path / "results.db"
    monkeypatch.setenv("TGEN_DB", str(path))
    return path


@pytest.fixture
def nat_lab_rs():
    """A NAT44 lab with a unique prefix (root only); yields the prefix and removes the lab."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces, veths and AF_PACKET sockets")
    from tgen_tui.lab import topology as topo
    from tgen_tui.lab.config import LabConfig

    prefix = "r" + secrets.token_hex(3)[:5]
    try:
        topo.up(LabConfig(prefix=prefix, topology="nat"))
        yield prefix
    finally:
        topo.down(prefix)
