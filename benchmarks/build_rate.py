"""Frames built per second by the numpy batch builder, and streaming 4,000,000 unique pairs.

Measures, on one core (pinned to the last CPU):
1. 64 B UDP frames with RFC 4814 random source and destination ports and the signature,
   built in batches of 256 and 1024: frames/s (best of 5 runs of ~1 s); and the cost of
   one call at batches of 1, 4 and 64 frames (µs), which paced low rates pay per wake-up.
2. The time and peak memory (tracemalloc peak and RSS growth) to stream N unique port pairs
   (the RFC 9693 phase-1 permutation) in chunks of 65,536, for N = 40,000 / 400,000 /
   4,000,000, to show memory stays flat in N.

Writes benchmarks/results/build_rate.json and prints a summary.

    .venv/bin/python benchmarks/build_rate.py
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_stream
from tgen_tui.packets.prng import FeistelPermutation
from tgen_tui.profiles.models import Port, Stream

OUT = Path(__file__).parent / "results" / "build_rate.json"


def _stream(src, dst) -> Stream:
    return Stream.model_validate(
        {
            "name": "bench",
            "port": "p0",
            "ipv4": {"src": "198.18.0.2", "dst": "198.19.0.2"},
            "udp": {"src_port": src, "dst_port": dst},
            "size": 64,
        }
    )


def frames_per_second(batch: int, seconds: float = 1.0, runs: int = 5) -> float:
    prog = compile_stream(
        _stream(
            {"min": 1024, "max": 65535, "mode": "random"},
            {"min": 1, "max": 49151, "mode": "random"},
        ),
        0,
        Port(interface="x"),
        seed=1,
    )
    b = BatchBuilder(prog, max_batch=batch)
    best = 0.0
    for _ in range(runs):
        k = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(50):
                b.build(k, batch)
                k += batch
        best = max(best, k / (time.perf_counter() - t0))
    return best


def stream_unique(n_src: int, n_dst: int, chunk: int = 65536) -> dict:
    prog = compile_stream(
        _stream(
            {"min": 1024, "max": 1024 + n_src - 1, "mode": "unique"},
            {"min": 1, "max": n_dst, "mode": "unique"},
        ),
        0,
        Port(interface="x"),
        seed=9693,
    )
    n = n_src * n_dst
    b = BatchBuilder(prog, max_batch=chunk)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    t0 = time.perf_counter()
    xor = np.uint64(0)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        vals = b.field_values(np.arange(start, start + k, dtype=np.uint64))
        xor ^= np.bitwise_xor.reduce((vals[0] << np.uint64(16)) | vals[1])
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "pairs": n,
        "seconds": round(dt, 3),
        "pairs_per_s": round(n / dt),
        "tracemalloc_peak_bytes": peak,
        "maxrss_growth_kib": rss1 - rss0,
    }


def main() -> int:
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    res = {
        "benchmark": "build_rate",
        "host": platform.node(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "frame": "64 B IPv4/UDP, RFC 4814 random src+dst ports, 12 B signature, checksums",
        "frames_per_s": {str(bs): round(frames_per_second(bs)) for bs in (256, 1024)},
        # per-call cost at small batches: what a paced low-rate stream pays per wake-up
        "us_per_call": {
            str(bs): round(1e6 * bs / frames_per_second(bs, 0.3, 3), 2) for bs in (1, 4, 64)
        },
        "unique_stream": [
            stream_unique(400, 100),
            stream_unique(4000, 100),
            stream_unique(4000, 1000),
        ],
        "feistel_only_4M_s": None,
    }
    perm = FeistelPermutation(4_000_000, 1)
    t0 = time.perf_counter()
    for s in range(0, 4_000_000, 65536):
        perm(np.arange(s, min(s + 65536, 4_000_000), dtype=np.uint64))
    res["feistel_only_4M_s"] = round(time.perf_counter() - t0, 3)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
