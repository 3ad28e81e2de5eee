"""Fixtures for the `tgen serve` tests: a direct lab with a unique prefix."""

from __future__ import annotations

import os
import secrets

import pytest


@pytest.fixture
def web_lab():
    """A direct lab (p0 <-> p1 veth in one tester namespace); yields its prefix."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces and sends on AF_PACKET sockets")
    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig

    prefix = "w" + secrets.token_hex(3)[:5]
    try:
        topology.up(LabConfig(prefix=prefix, topology="direct"))
        yield prefix
    finally:
        topology.down(prefix)
