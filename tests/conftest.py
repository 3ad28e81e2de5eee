"""Shared by every test: a temporary results database and send-path cache (never the
user's own; ``tx_path: auto`` takes the default unless a test measures and caches one),
the one way to bring up a lab with a unique prefix (``make_lab``, ``nat_lab``,
``direct_lab``), taken down even on failure, and the one way to skip root-only tests.

Root-only tests: mark them ``@pytest.mark.root`` (or ``pytestmark = pytest.mark.root``).
A test that uses a fixture of ``ROOT_FIXTURES`` (directly or through another fixture)
is marked for you. When not root, every marked test is skipped with ``ROOT_REASON``;
as root nothing is skipped for that reason.
"""

from __future__ import annotations

import contextlib
import os
import secrets

import pytest

ROOT_REASON = "needs root: creates network namespaces, veths and AF_PACKET sockets"
# fixtures that build namespaces (tests/conftest.py, tests/worker, tests/integration)
ROOT_FIXTURES = frozenset({"make_lab", "nat_lab", "direct_lab", "veth", "lab_prefix"})


@pytest.hookimpl(tryfirst=True)  # before -m selects on the markers
def pytest_collection_modifyitems(config, items):
    """Mark the users of a root fixture ``root``; skip every ``root`` test when not root."""
    for item in items:
        if ROOT_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.root)
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason=ROOT_REASON)
    for item in items:
        if item.get_closest_marker("root") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _tmp_results_db(tmp_path_factory):
    """TGEN_DB for the whole session (subprocesses inherit it): tgen run records every run."""
    os.environ["TGEN_DB"] = str(tmp_path_factory.mktemp("results") / "results.db")
    os.environ["TGEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("tgen-cache"))
    yield


@contextlib.contextmanager
def _lab(topology: str = "nat", letter: str = "l", **config):
    """Bring a lab up with a unique prefix (``letter`` + 5 hex); yield the prefix; take
    it down even on failure. Root only: its users are marked ``root`` (see above)."""
    from tgen_tui.lab import topology as topo
    from tgen_tui.lab.config import LabConfig

    prefix = letter + secrets.token_hex(3)[:5]
    try:
        topo.up(LabConfig(prefix=prefix, topology=topology, **config))
        yield prefix
    finally:
        topo.down(prefix)


@pytest.fixture(scope="session")
def make_lab():
    """``with make_lab("nat", "x", conntrack_max=3000) as prefix:`` for any scope."""
    return _lab


@pytest.fixture
def nat_lab():
    """A NAT44 lab (tester + DUT namespaces); yields its prefix."""
    with _lab("nat", "e") as prefix:
        yield prefix


@pytest.fixture
def direct_lab():
    """A direct lab (p0 <-> p1 veth, no DUT); yields its prefix."""
    with _lab("direct", "d") as prefix:
        yield prefix
