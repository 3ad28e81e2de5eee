"""Pacing accuracy of the worker: achieved against requested rate.

One worker (pinned to one CPU) sends one 64-byte UDP stream with a frame count of
``rate x seconds`` at 1 k, 10 k, 100 k pps and 90 % of the measured maximum (the median
``tgen_worker`` figure of ``results/tx_vs_trafgen.json``, or a quick measurement).
Per rate it records:

- the worker's own figure: frames over the time from the first due frame to the last
  send (``achieved_pps`` of the ``stopped`` event) and the relative error;
- the receiving veth's ``rx_packets`` rate over a window in the middle of the run;
- the total send duration against ``(count - 1) / rate``;
- late events (batches more than 1 ms behind their due time) and the worst lateness.

Writes ``benchmarks/results/pacing.json``. Run as root:
``.venv/bin/python benchmarks/pacing.py [--seconds 4 --runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tx_vs_trafgen import RESULTS, Pair, Worker, paced_rate, run_worker, udp64_program  # noqa: E402

from tgen_tui.packets.program import program_to_dict  # noqa: E402


def one(pair: Pair, cpu: int, rate: float, seconds: float) -> dict:
    count = int(rate * seconds)
    shm = tempfile.mktemp(prefix="tgen-pace-", dir="/dev/shm")
    w = Worker(cpu)
    window = {}
    try:
        w.send(cmd="configure", shm=shm, n_streams=1, ports=[
            {"name": "a", "interface": pair.if_a, "netns": pair.ns_a, "rx": False,
             "tx_streams": [program_to_dict(udp64_program(pps=rate, count=count))]}])  # fmt: skip
        w.expect("ready")
        t0 = time.monotonic_ns() + 50_000_000
        w.send(cmd="start", t0_ns=t0)
        w.expect("started")

        def sample():  # interface rate over the middle half of the run
            time.sleep(max(0.0, (t0 - time.monotonic_ns()) / 1e9) + seconds * 0.25)
            r0, a = pair.rx_packets(), time.monotonic()
            time.sleep(seconds * 0.5)
            r1, b = pair.rx_packets(), time.monotonic()
            window["pps"] = (r1 - r0) / (b - a)

        th = threading.Thread(target=sample)
        th.start()
        w.expect("tx_done")
        th.join()
        w.send(cmd="stop", drain_ms=0)
        st = w.expect("stopped")
        paced = paced_rate(shm)
    finally:
        w.close()
        if os.path.exists(shm):
            os.unlink(shm)
    s = st["streams"][0]
    c = st["counters"]
    return {
        "requested_pps": rate,
        "count": count,
        "tx_frames": s["tx_frames"],
        "achieved_pps": paced,
        "error_pct": 100.0 * (paced - rate) / rate,
        "interface_window_pps": window.get("pps"),
        "interface_error_pct": 100.0 * (window["pps"] - rate) / rate if "pps" in window else None,
        "late_events": c["late_events"],
        "late_max_ms": c["late_max_ns"] / 1e6,
        "busy_fraction": c["busy_ns"] / (seconds * 1e9),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--out", default=str(RESULTS / "pacing.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    pair = Pair("wp").up()
    load = os.getloadavg()
    try:
        src = RESULTS / "tx_vs_trafgen.json"
        if src.exists():
            max_pps = json.loads(src.read_text())["median_kpps"]["tgen_worker"] * 1e3
            max_from = str(src.name)
        else:
            max_pps = run_worker(pair, a.cpu, 1.0, 3.0)["pps"]
            max_from = "measured here (3 s)"
        rates = [1e3, 1e4, 1e5, round(0.9 * max_pps)]
        out = []
        for rate in rates:
            rs = [one(pair, a.cpu, rate, a.seconds) for _ in range(a.runs)]
            med = {
                k: statistics.median(r[k] for r in rs)
                for k in ("achieved_pps", "error_pct", "late_events")
            }
            print(f"{rate / 1e3:8.1f} kpps: achieved {med['achieved_pps'] / 1e3:9.2f} kpps "
                  f"({med['error_pct']:+.3f} %), late events {med['late_events']}", flush=True)  # fmt: skip
            out.append({"requested_pps": rate, "median": med, "runs": rs})
    finally:
        pair.down()
    res = {
        "benchmark": "pacing",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"kernel": platform.release(), "cpus": os.cpu_count(), "loadavg_at_start": load},
        "setup": {
            "seconds": a.seconds,
            "runs": a.runs,
            "cpu": a.cpu,
            "max_pps": max_pps,
            "max_from": max_from,
        },
        "rates": out,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
