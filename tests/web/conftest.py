"""Fixtures for the `tgen serve` tests: a direct lab with a unique prefix."""

from __future__ import annotations

import pytest


@pytest.fixture
def web_lab(direct_lab):
    """A direct lab (p0 <-> p1 veth in one tester namespace); yields its prefix."""
    return direct_lab
