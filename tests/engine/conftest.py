"""Fixtures for engine and `tgen run` tests (labs: nat_lab/direct_lab in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def write_profile(tmp_path: Path):
    def write(text: str, name: str = "p.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return write
