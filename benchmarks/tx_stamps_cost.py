"""What kernel transmit timestamps cost the sender: the worker flat out with them on and off.

The real worker (``python -m tgen_tui.worker``) sends one 64-byte stream on sendmmsg into
a sink veth pair (as ``benchmarks/tx_vs_trafgen.py``), pinned to one CPU, at a requested
rate above what it can reach. Variants, interleaved, ``--runs`` times:

- ``off``: ``tx_stamps: false`` (latency from the signature's user-space stamp);
- ``auto``: the default: the kernel stamps every K-th frame, K from the requested rate
  (``tgen_tui.worker.txstamps.sample_every``: about 1,024 stamped frames a second);
- ``every_16`` / ``every_1``: K forced to 16 and to 1 (every frame).

Each figure is the sink's ``rx_packets`` delta over a window after a warm-up; the ratios
are of medians in this run (machines differ: compare ratios, not rates). Writes
``benchmarks/results/tx_stamps_cost.json``. Run as root:
``.venv/bin/python benchmarks/tx_stamps_cost.py [--runs 3 --seconds 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from tx_vs_trafgen import Pair, host_facts, run_worker  # noqa: E402

from tgen_tui.worker.txstamps import sample_every  # noqa: E402

VARIANTS = {"off": False, "auto": True, "every_16": 16, "every_1": 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--warm", type=float, default=1.0)
    ap.add_argument("--pps", type=float, default=3e6, help="requested rate (above the path's)")
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tx_stamps_cost.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root", file=sys.stderr)
        return 3
    runs: dict[str, list] = {k: [] for k in VARIANTS}
    pair = Pair("wts").up()
    try:
        for i in range(a.runs):
            for name, v in VARIANTS.items():
                tx = {"tx_path": "sendmmsg", "max_batch": 1024, "tx_stamps": v}
                r = run_worker(pair, a.cpu, a.warm, a.seconds, pps=a.pps, tx=tx)
                runs[name].append(r)
                print(f"run {i + 1} {name:9s} {r['pps']:>12,.0f} fps", flush=True)
    finally:
        pair.down()
    med = {k: statistics.median(r["pps"] for r in v if r.get("valid")) for k, v in runs.items()}
    ratios = {f"{k}_over_off": round(med[k] / med["off"], 3) for k in VARIANTS if k != "off"}
    doc = {"benchmark": "tx_stamps_cost", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "host": host_facts(), "requested_pps": a.pps,
           "auto_every": sample_every(a.pps), "median_pps": med, "ratios": ratios,
           "runs": runs}  # fmt: skip
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"median_pps": med, "ratios": ratios, "auto_every": sample_every(a.pps)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
