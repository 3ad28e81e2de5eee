"""Fixtures for the methodology tests: a NAT lab with a unique prefix and DUT limits."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def limited_lab(make_lab):
    """A NAT lab whose DUT forwards at most 5,000 frames/s (nftables limit)."""
    with make_lab("nat", "m", rate_limit_pps=5000) as prefix:
        yield prefix


@pytest.fixture
def ct_limited_lab(make_lab):
    """A NAT lab whose DUT tracks at most 3,000 new flows (nftables ct count)."""
    with make_lab("nat", "m", ct_limit=3000) as prefix:
        yield prefix


@pytest.fixture
def small_table_lab(make_lab):
    """A NAT lab with nf_conntrack_max = 3,000 (global while the lab is up; restored).

    The lab restores a global only when no other lab holds a record of it; on a machine
    where other labs are up, put back the value found before, so later tests (and other
    people's labs) do not run with a 3,000-entry table."""
    path = "/proc/sys/net/netfilter/nf_conntrack_max"
    before = open(path).read().strip() if os.path.exists(path) else None
    try:
        with make_lab("nat", "m", conntrack_max=3000) as prefix:
            yield prefix
    finally:
        if before is not None and open(path).read().strip() == "3000":
            with open(path, "w") as f:
                f.write(before)


@pytest.fixture
def plain_lab(make_lab):
    """A NAT lab with no impairment."""
    with make_lab("nat", "m") as prefix:
        yield prefix
