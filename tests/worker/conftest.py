"""Fixtures for worker tests: a veth pair between two fresh, uniquely named namespaces."""

from __future__ import annotations

import os

import pytest
from wk_helpers import destroy_pair, make_pair


@pytest.fixture
def veth():
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    p = make_pair()
    try:
        yield p
    finally:
        destroy_pair(p)
