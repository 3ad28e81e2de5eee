"""The tester's latency floor: tgen back to back on a veth pair of its own, cached per
host and recorded in every result with the latency source."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TGEN_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.root
def test_floor_is_measured_cached_and_recorded(own_cache):
    from tgen_tui.calibrate.floor import (
        cached_floor,
        measure_floor,
        result_fields,
        store_floor,
    )

    before = result_fields()
    assert (
        before["latency_floor_ns"] is None and "tgen calibrate" in before["latency_floor"]["note"]
    )
    fl = measure_floor(pps=5000, seconds=0.5)
    assert fl["frames"] >= 2000  # 0.5 s at 5 kfps, every frame received and timed
    assert fl["source"] == "kernel" and fl["sample_every"] == 1  # kernel tx stamp on each
    assert 0 <= fl["min_ns"] <= fl["p50_ns"] <= fl["p99_ns"]
    assert fl["p50_ns"] < 50_000_000  # a back-to-back veth is not a 50 ms path
    store_floor(fl)
    assert cached_floor()["p50_ns"] == fl["p50_ns"]
    after = result_fields()
    assert after["latency_floor_ns"] == fl["p50_ns"]
    assert after["latency_source"] is None  # no stream measured latency
    k = result_fields(["kernel", "kernel"])
    assert k["latency_source"] == "kernel" and "SO_TIMESTAMPING" in k["latency_source_detail"]
    assert result_fields(["kernel", "signature"])["latency_source"] == "mixed"
    assert not any(n.startswith(f"tgen-{os.getpid()}-floor") for n in os.listdir("/dev/shm"))
