"""Result documents in the ``tgen run --json`` shape, for store tests that need no lab."""

from __future__ import annotations

import copy

_BASE = {
    "tool": "tgen-tui",
    "profile": "lab",
    "profile_path": "/nonexistent/lab.yaml",
    "profile_hash": "ab" * 32,
    "seed": 5,
    "duration_s": 2.0,
    "partial": False,
    "passed": True,
    "thresholds": [],
    "breached": [],
    "environment": {"tester": "tgen-tui 0.1.0", "kernel": "6.1"},
    "warnings": [],
    "events": [],
}


def result(
    rx_pps: float = 10_000.0,
    *,
    tx_pps: float = 10_000.0,
    p99_ns: float = 50_000.0,
    partial: bool = False,
    dut_source: str = "none",
) -> dict:
    """A two-port, one-stream result whose headline figures are the given ones."""
    r = copy.deepcopy(_BASE)
    dur = r["duration_s"]
    tx, rx = int(tx_pps * dur), int(rx_pps * dur)
    r["partial"] = partial
    r["ports"] = {
        "p0": {
            "tx_frames": tx,
            "rx_frames": 0,
            "tx_pps_mean": tx / dur,
            "rx_pps_mean": 0.0,
            "requested_pps": tx_pps,
            "achieved_pps": tx_pps,
            "achieved_pct": 100.0,
        },
        "p1": {
            "tx_frames": 0,
            "rx_frames": rx,
            "tx_pps_mean": 0.0,
            "rx_pps_mean": rx / dur,
            "requested_pps": 0.0,
            "achieved_pps": 0.0,
            "achieved_pct": None,
        },
    }
    lost = tx - rx
    r["streams"] = {
        "up": {
            "tx_frames": tx,
            "rx_frames": rx,
            "lost": lost,
            "loss_pct": 100.0 * lost / tx if tx else 0.0,
            "out_of_order": 0,
            "duplicates": 0,
            "latency_ns": {
                "min": 9000.0,
                "avg": 20000.0,
                "p50": 18000.0,
                "p99": p99_ns,
                "p999": p99_ns * 2,
                "max": p99_ns * 3,
                "jitter": 1000.0,
            },
        },
    }
    r["dut"] = {
        "source": dut_source,
        "conntrack_peak": 64,
        "conntrack_start": 0,
        "conntrack_rise": 64,
        "conntrack_max": 262144,
    }
    return r
