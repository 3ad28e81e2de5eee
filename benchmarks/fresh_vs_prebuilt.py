"""Where fresh frames lose against prebuilt ones (issue 11), and what the builder change gained.

One sender process per measurement (``tgen calibrate``'s sender: the worker's builder and
send path), pinned to one CPU, sending flat out into a veth sink; each figure is the
sink's ``rx_packets`` delta over a window. Interleaved, ``--rounds`` times, at each batch
size: prebuilt frames (one batch sent again and again), fresh frames with the builder as
it was (``RANDOM_CHUNK = 0``: random fields hashed every batch: *before*), and as it is
(cached chunk: *after*).

Then, in this process, the split of a fresh-frame loop into build and send time (ns per
frame, ``perf_counter_ns`` around each call) against the builder alone in a tight loop:
the difference is what the kernel's send does to the builder's caches.

``--pyspy`` also records each sender with ``py-spy record --native --idle`` and reports
the share of samples in the builder and in ``sendmmsg``.

Run as root: ``.venv/bin/python benchmarks/fresh_vs_prebuilt.py [--rounds 3 --seconds 3]``.
Writes ``benchmarks/results/fresh_vs_prebuilt.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tgen_tui.calibrate import iface  # noqa: E402
from tgen_tui.calibrate.measure import SinkPair, run_sender, sink_program  # noqa: E402

MODES = {"prebuilt": {"prebuilt": True}, "fresh_before": {"random_chunk": 0},
         "fresh_after": {}}  # fmt: skip


def split_timing(pair: SinkPair, batch: int, cpu: int, seconds: float) -> dict:
    """ns/frame in build and in send, inside a fresh-frame loop, and the builder alone."""
    from tgen_tui.packets.batch import BatchBuilder
    from tgen_tui.packets.program import program_from_dict
    from tgen_tui.worker.netns import netns
    from tgen_tui.worker.txpath import open_tx

    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    out = {}
    try:
        prog = program_from_dict(sink_program())
        with netns(pair.ns_a):
            tx = open_tx(pair.if_a, "sendmmsg", max_batch=batch)
        try:
            for label, chunk in (("before", 0), ("after", None)):
                b = BatchBuilder(prog, max_batch=batch)
                if chunk is not None:
                    b.RANDOM_CHUNK = chunk
                reps = max(200, 200_000 // batch)
                for i in range(20):
                    b.build(i * batch, batch)
                t = time.perf_counter_ns()
                for i in range(reps):
                    b.build(i * batch, batch)
                alone = (time.perf_counter_ns() - t) / reps / batch
                tb = ts = n = k = 0
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    t0 = time.perf_counter_ns()
                    buf, lens = b.build(k, batch)
                    t1 = time.perf_counter_ns()
                    n += tx.send(buf, lens)
                    ts += time.perf_counter_ns() - t1
                    tb += t1 - t0
                    k += batch
                out[label] = {"build_alone_ns_per_frame": round(alone, 1),
                              "build_in_loop_ns_per_frame": round(tb / max(1, n), 1),
                              "send_ns_per_frame": round(ts / max(1, n), 1),
                              "build_share_pct": round(100 * tb / max(1, tb + ts), 2)}  # fmt: skip
        finally:
            tx.close()
    finally:
        os.sched_setaffinity(0, old)
    return out


def pyspy(pair: SinkPair, batch: int, cpu: int, prebuilt: bool) -> dict | None:
    """Shares of py-spy samples (Python and native frames, idle included) in the sender."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not os.path.exists(exe):
        return None
    raw = tempfile.mktemp(prefix="wb-pyspy-", suffix=".txt")
    cfg = {"program": sink_program(), "netns": pair.ns_a, "interface": pair.if_a,
           "tx_path": "sendmmsg", "batch": batch, "cpu": cpu, "seconds": 4,
           "prebuilt": prebuilt}  # fmt: skip
    p = subprocess.Popen([exe, "record", "--native", "--idle", "-r", "200", "-f", "raw", "-o",
                          raw, "--", sys.executable, "-m", "tgen_tui.calibrate.sender"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)  # fmt: skip
    p.stdin.write(json.dumps(cfg) + "\n")
    p.stdin.flush()
    p.communicate(timeout=60)
    tot, incl = 0, collections.Counter()
    try:
        for line in Path(raw).read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            frames = [f.split(" (")[0] for f in stack.split(";")]
            if "run" not in frames:
                continue  # start-up and imports
            tot += int(n)
            for f in set(frames):
                incl[f] += int(n)
    finally:
        if os.path.exists(raw):
            os.unlink(raw)
    keys = ("BatchBuilder.build", "BatchBuilder.field_values", "MmsgTx.send", "sendmmsg")
    return {"samples": tot, **{k: round(100 * incl[k] / max(1, tot), 1) for k in keys}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--batches", default="64,256,1024")
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--pyspy", action="store_true")
    ap.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "fresh_vs_prebuilt.json")
    )
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    from tx_vs_trafgen import host_facts

    batches = [int(x) for x in a.batches.split(",")]
    host = host_facts()
    runs: dict[str, list[dict]] = {f"{m}_{b}": [] for b in batches for m in MODES}
    split, spy = {}, {}
    with SinkPair("tgfp") as pair:
        prog = sink_program()
        for r in range(a.rounds):
            for b in batches:
                for m, extra in MODES.items():
                    cfg = {"program": prog, "netns": pair.ns_a, "interface": pair.if_a,
                           "tx_path": "sendmmsg", "batch": b, "cpu": a.cpu, **extra}  # fmt: skip
                    pps, rep = run_sender(
                        cfg, lambda: iface.counters(pair.if_b, pair.ns_b)[0], a.warm, a.seconds
                    )
                    runs[f"{m}_{b}"].append({"pps": pps, "load": os.getloadavg()[0], **rep})
                    print(f"round {r} batch {b:5d} {m:13s} {pps / 1e3:8.1f} kpps", flush=True)
        for b in batches:
            split[b] = split_timing(pair, b, a.cpu, 2.0)
            print("split", b, split[b], flush=True)
        if a.pyspy:
            for pre in (False, True):
                spy["prebuilt" if pre else "fresh"] = pyspy(pair, 1024, a.cpu, pre)
            print("py-spy", spy, flush=True)
    med = {k: statistics.median(x["pps"] for x in v) / 1e3 for k, v in runs.items()}
    gaps = {}
    for b in batches:
        pre = med[f"prebuilt_{b}"]
        gaps[b] = {"before_over_prebuilt": med[f"fresh_before_{b}"] / pre,
                   "after_over_prebuilt": med[f"fresh_after_{b}"] / pre,
                   "after_over_before": med[f"fresh_after_{b}"] / med[f"fresh_before_{b}"]}  # fmt: skip
    res = {
        "benchmark": "fresh_vs_prebuilt",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": host | {"loadavg_after": list(os.getloadavg())},
        "setup": {
            "frame_bytes_with_fcs": 64,
            "fields": "UDP src/dst ports random (RFC 4814)",
            "path": "sendmmsg",
            "sender_cpu": a.cpu,
            "rounds": a.rounds,
            "seconds": a.seconds,
            "order": "interleaved per round",
            "before": "RANDOM_CHUNK = 0 (hash every batch)",
            "after": "RANDOM_CHUNK = 4096 (cached chunk)",
        },  # fmt: skip
        "median_kpps": med,
        "ratios": gaps,
        "split_ns_per_frame": split,
        "pyspy_shares_pct": spy or None,
        "runs": runs,
    }
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({"median_kpps": med, "ratios": gaps}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
