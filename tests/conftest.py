"""Every test process writes results to a temporary database, never the user's own."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _tmp_results_db(tmp_path_factory):
    """TGEN_DB for the whole session (subprocesses inherit it): tgen run records every run."""
    os.environ["TGEN_DB"] = str(tmp_path_factory.mktemp("results") / "results.db")
    yield
