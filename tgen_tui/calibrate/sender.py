"""The calibration sender: one send path flat out for a while (``python -m``, one process).

Reads one JSON object from stdin: ``{"program": <program dict>, "netns", "interface",
"tx_path", "batch", "cpu", "seconds", "prebuilt": false}``; prints ``{"event": "ready"}``
once the socket is open and the builder warm, then ``{"sent", "errors", "elapsed_s"}``
at the end. Frames are built fresh for every batch exactly as the worker does it
(BatchBuilder, then one ``send`` of the batch), unless ``prebuilt`` (the kernel's ceiling:
one batch sent again and again). Imports: the standard library, numpy and the worker's
modules only, like the worker.
"""

from __future__ import annotations

import json
import os
import sys
import time


def run(cfg: dict) -> dict:
    from tgen_tui.packets.batch import BatchBuilder
    from tgen_tui.packets.program import program_from_dict
    from tgen_tui.worker.netns import enter
    from tgen_tui.worker.txpath import open_tx

    if cfg.get("cpu") is not None:
        os.sched_setaffinity(0, {int(cfg["cpu"])})
    if cfg.get("netns"):
        enter(cfg["netns"])
    prog = program_from_dict(cfg["program"])
    batch = int(cfg["batch"])
    b = BatchBuilder(prog, max_batch=batch)
    if cfg.get("random_chunk") is not None:  # benchmarks: the builder before/after
        b.RANDOM_CHUNK = int(cfg["random_chunk"])
    kw = {"max_batch": batch}
    if cfg["tx_path"] == "tx_ring":
        kw["max_len"] = len(prog.template)
    tx = open_tx(cfg["interface"], cfg["tx_path"], **kw)
    ts_every = int(cfg.get("ts_every") or 0)  # benchmarks: kernel TX timestamps on
    if ts_every:
        tx.enable_tx_timestamps(ts_every)
    stamps = 0
    try:
        buf, lens = b.build(0, batch)
        print(json.dumps({"event": "ready"}), flush=True)
        prebuilt = bool(cfg.get("prebuilt"))
        t0 = time.monotonic()
        end = t0 + float(cfg["seconds"])
        k = sent = 0
        while time.monotonic() < end:
            if not prebuilt:
                buf, lens = b.build(k, batch)
            sent += tx.send(buf, lens)
            k += batch
            if ts_every:
                stamps += len(tx.read_tx_timestamps()[0])
        out = {"sent": sent, "errors": tx.errors, "elapsed_s": time.monotonic() - t0}
        return out | ({"tx_timestamps": stamps, "ts_lost": tx.ts_lost} if ts_every else {})
    finally:
        tx.close()


def main() -> int:
    cfg = json.loads(sys.stdin.readline())
    try:
        out = run(cfg)
    except OSError as e:
        out = {"error": f"{type(e).__name__}: {e}", "sent": 0}
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
