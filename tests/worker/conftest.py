"""Fixtures for worker tests: a veth pair between two fresh, uniquely named namespaces."""

from __future__ import annotations

import pytest

from .wk_helpers import destroy_pair, make_pair


@pytest.fixture
def veth():
    p = make_pair()
    try:
        yield p
    finally:
        destroy_pair(p)
