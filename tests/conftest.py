"""Every test process writes results to a temporary database, never the user's own, and
reads no send-path calibration cache of the user's (``tx_path: auto`` takes the default
unless a test measures and caches one itself)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _tmp_results_db(tmp_path_factory):
    """TGEN_DB for the whole session (subprocesses inherit it): tgen run records every run."""
    os.environ["TGEN_DB"] = str(tmp_path_factory.mktemp("results") / "results.db")
    os.environ["TGEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("tgen-cache"))
    yield
