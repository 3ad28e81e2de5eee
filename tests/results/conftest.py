"""Fixtures for results-store tests: a temporary database, result documents, a real lab."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh database path; TGEN_DB points at it too (for verbs run without --db)."""
    path = tmp_path / "results.db"
    monkeypatch.setenv("TGEN_DB", str(path))
    return path
