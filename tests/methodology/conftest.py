"""Fixtures for the methodology tests: a NAT lab with a unique prefix and DUT limits."""

from __future__ import annotations

import os
import secrets

import pytest


def lab(**kw):
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces, veths and AF_PACKET sockets")
    from tgen_tui.lab import topology as topo
    from tgen_tui.lab.config import LabConfig

    prefix = "m" + secrets.token_hex(3)[:5]
    try:
        topo.up(LabConfig(prefix=prefix, topology="nat", **kw))
        yield prefix
    finally:
        topo.down(prefix)


@pytest.fixture
def limited_lab():
    """A NAT lab whose DUT forwards at most 5,000 frames/s (nftables limit)."""
    yield from lab(rate_limit_pps=5000)


@pytest.fixture
def ct_limited_lab():
    """A NAT lab whose DUT tracks at most 3,000 new flows (nftables ct count)."""
    yield from lab(ct_limit=3000)


@pytest.fixture
def small_table_lab():
    """A NAT lab with nf_conntrack_max = 3,000 (global while the lab is up; restored).

    The lab restores a global only when no other lab holds a record of it; on a machine
    where other labs are up, put back the value found before, so later tests (and other
    people's labs) do not run with a 3,000-entry table."""
    path = "/proc/sys/net/netfilter/nf_conntrack_max"
    before = open(path).read().strip() if os.path.exists(path) else None
    try:
        yield from lab(conntrack_max=3000)
    finally:
        if before is not None and open(path).read().strip() == "3000":
            with open(path, "w") as f:
                f.write(before)


@pytest.fixture
def plain_lab():
    """A NAT lab with no impairment."""
    yield from lab()
