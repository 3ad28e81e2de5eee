"""What the receiver's latency accounting costs per frame, by latency source.

``RxStats.add`` on batches of 8,192 frames of one stream (sequence numbers in order, as a
receive ring delivers them), three receivers fed the same batches in turn:

- ``signature``: no stamp table (latency from every frame's 32-bit signature stamp);
- ``kernel``: the sender's kernel stamps every 16th frame (``every`` = 16): only those
  frames are looked up and timed;
- ``widened``: signature stamps widened to 64 bits from the sender's reference of every
  16th frame (``every`` = -16; the tx_ring and AF_XDP paths).

The figure is the best of ``--reps`` batches, in ns per frame (a shared machine is noisy:
compare the ratios of one run). Writes ``benchmarks/results/rx_latency_cost.json``.
Run: ``.venv/bin/python benchmarks/rx_latency_cost.py``; ``--tree DIR`` measures another
checkout's code (for a before/after).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--tree", default=str(ROOT), help="checkout whose tgen_tui is measured")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rx_latency_cost.json"))
    a = ap.parse_args()
    sys.path.insert(0, a.tree)
    from tgen_tui.packets.program import SIG_MAGIC
    from tgen_tui.worker import counters as C
    from tgen_tui.worker.rxring import RxBatch
    from tgen_tui.worker.rxstats import RxStats
    from tgen_tui.worker.txstamps import StampTable

    n = a.batch

    def receiver(every: int | None):
        t = np.zeros((1, C.RX_STRIDE), dtype=np.int64)
        t[:, C.R_MAX_SEQ] = -1
        t[:, C.R_LAT_MIN] = C.INT64_MAX
        t[:, C.R_LAT_MAX] = -1
        t[:, C.R_VLAN_LAST] = -1
        st = None
        if every is not None:
            st = StampTable.private(1)
            st.begin_stream(0, every)
        return RxStats(t, stamps=st), st

    modes = {"signature": None, "kernel": 16, "widened": -16}
    rx = {m: receiver(e) for m, e in modes.items()}
    best = dict.fromkeys(modes, float("inf"))
    for rep in range(a.reps):
        seq = np.arange(rep * n, (rep + 1) * n, dtype=np.int64)
        rx_ns = 10**12 + seq * 1000
        b = RxBatch(
            length=np.full(n, 60, np.uint32), snaplen=np.full(n, 60, np.uint32),
            magic=np.full(n, SIG_MAGIC, np.uint16), stream=np.zeros(n, np.uint16),
            seq=seq.astype(np.uint32), ts=((rx_ns - 5000) & 0xFFFFFFFF).astype(np.uint32),
            rx_ns=rx_ns, vlan=np.full(n, -1, np.int64),
        )  # fmt: skip
        for m, (rs, st) in rx.items():
            if st is not None:
                st.record(seq[::16].astype(np.uint64), rx_ns[::16] - 3000)
            t0 = time.perf_counter_ns()
            rs.add(b)
            best[m] = min(best[m], (time.perf_counter_ns() - t0) / n)
    doc = {"benchmark": "rx_latency_cost", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "tree": a.tree, "batch": n, "reps": a.reps,
           "ns_per_frame": {m: round(v, 1) for m, v in best.items()},
           "over_signature": {m: round(v / best["signature"], 2) for m, v in best.items()}}  # fmt: skip
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("ns_per_frame", "over_signature")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
