"""Fixtures for engine and `tgen run` tests: a real lab with a unique prefix, and profiles for it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces, veths and AF_PACKET sockets")


def _lab(topology: str, **kw):
    _require_root()
    from tgen_tui.lab import topology as topo
    from tgen_tui.lab.config import LabConfig

    prefix = "e" + secrets.token_hex(3)[:5]
    try:
        topo.up(LabConfig(prefix=prefix, topology=topology, **kw))
        yield prefix
    finally:
        topo.down(prefix)


@pytest.fixture
def nat_lab():
    """A NAT44 lab (tester + DUT namespaces); yields its prefix."""
    yield from _lab("nat")


@pytest.fixture
def direct_lab():
    """A direct lab (p0 <-> p1 veth, no DUT); yields its prefix."""
    yield from _lab("direct")


@pytest.fixture
def write_profile(tmp_path: Path):
    def write(text: str, name: str = "p.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p

    return write
