"""How evenly each pacing method spaces frames on this host, and up to which rate.

``tgen calibrate`` sends one constant 64 B stream per (method, rate) across a veth pair of
its own, with the same worker, pacer and receive ring as a run, and reads the receiver's
spacing counters: the share of gaps within 10 % of the asked gap (from the kernel's
receive stamps). A method's ceiling is the highest rate at which that share is at least
90 % (issue 30's bar); ``tx_path: auto``'s pacing choice (calibrate.pacing.ceilings)
reads it from the cache instead of the defaults. Measured only on the pair: a NIC of the
user's has no receiver here.
"""

from __future__ import annotations

import os
import secrets
import time

from tgen_tui.calibrate.measure import SinkPair, sink_program

RATES = (10_000.0, 20_000.0, 50_000.0, 100_000.0)
METHODS = ("qdisc", "timer")
SHARE = 0.90  # a method spaces a rate when this share of gaps is within 10 % of the gap


def _one(pair: SinkPair, method: str, pps: float, seconds: float, cpus: tuple[int, int]) -> dict:
    """One point, as a run has it: a sending worker and a receiving one (on another core
    where there is one) sharing a stamp table, so the receiver knows the asked gap."""
    from tgen_tui.worker import counters as C
    from tgen_tui.worker.client import WorkerClient
    from tgen_tui.worker.txstamps import StampTable

    prog = sink_program(64)
    prog["schedule"]["pps"] = float(pps)
    tag = f"{os.getpid()}-spacing-{secrets.token_hex(3)}"
    stamps, shm = f"/dev/shm/tgen-{tag}-stamps", [f"/dev/shm/tgen-{tag}-{i}" for i in (0, 1)]
    table = StampTable.create(stamps, 1)
    ws = [WorkerClient(core=cpus[0]), WorkerClient(core=cpus[1])]
    try:
        tx, rx = ws
        for w, ctr, port in (
            (tx, shm[0], {"name": "a", "interface": pair.if_a, "netns": pair.ns_a, "rx": False,
                          "tx_streams": [prog], "tx_path": "sendmmsg", "pacing": method}),
            (rx, shm[1], {"name": "b", "interface": pair.if_b, "netns": pair.ns_b, "rx": True,
                          "tx_streams": []}),
        ):  # fmt: skip
            w.expect("hello")
            w.send(cmd="configure", shm=ctr, n_streams=1, ports=[port], stamps=stamps)
            w.expect("ready")
        rx.send(cmd="start")
        rx.expect("started")
        tx.send(cmd="start", t0_ns=time.monotonic_ns() + 20_000_000)
        tx.expect("started")
        time.sleep(seconds)
        tx.send(cmd="stop", drain_ms=100)
        tx.expect("stopped", timeout=10)
        rx.send(cmd="stop", drain_ms=200)
        rx.expect("stopped", timeout=10)
        view = C.CounterView.open(shm[1])
        try:
            row = view.rx[0][0].copy()
        finally:
            view.close()
    finally:
        for w in ws:
            w.close()
        table.close()
        for p in (stamps, *shm):
            try:
                os.unlink(p)
            except OSError:
                pass
    known = int(row[C.R_IAT_ASKED_COUNT])
    share = float(row[C.R_IAT_WITHIN]) / known if known else 0.0
    return {"method": method, "pps": pps, "gaps": known, "within_10pct": round(share, 4)}


def measure_spacing(
    rates=RATES, methods=METHODS, seconds: float = 0.5, cpu: int | None = None, progress=None
) -> dict:
    """Every (method, rate) once on a pair of its own: the points and each method's
    ceiling (0 when it spaces none of the rates)."""
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1] if cpu is None else cpu
    cpus = (cpu, next((c for c in allowed if c != cpu), cpu))  # sender, receiver
    points = []
    with SinkPair("tgsp") as pair:
        for m in methods:
            for pps in rates:
                pt = _one(pair, m, pps, seconds, cpus)
                points.append(pt)
                if progress:
                    progress(pt)
    ceiling = {
        m: max((p["pps"] for p in points if p["method"] == m and p["within_10pct"] >= SHARE),
               default=0.0)
        for m in methods
    }  # fmt: skip
    return {
        "how": f"one constant 64 B stream per method and rate for {seconds:g} s across a veth "
        f"pair of its own, sender on CPU {cpus[0]}, receiver on CPU {cpus[1]}; share of gaps "
        "within 10 % of the asked gap at the receiver (kernel receive stamps)",
        "share": SHARE,
        "points": points,
        "ceiling_pps": ceiling,
    }


__all__ = ["METHODS", "RATES", "SHARE", "measure_spacing"]
