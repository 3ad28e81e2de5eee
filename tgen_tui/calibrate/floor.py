"""The tester's own latency floor: tgen back to back on a veth pair, no DUT in between.

RFC 2544 asks that the tester be measured back to back. This sends one stream at a
modest rate from one end of a veth pair of its own to the other, with the same worker,
signature and receive ring as a real run, and reads the latency the receiver measured.
What it measures is what every tgen latency figure includes besides the DUT: with kernel
transmit timestamps (the default send path), the time from the sending driver's
timestamp across the veth pair to the kernel's receive timestamp; with signature stamps,
also the time from stamping the frame in the batch builder through the send call. It is cached per host next to the
send-path choice and recorded in every result as ``latency_floor_ns`` (the median).
"""

from __future__ import annotations

import os
import secrets
import time

from tgen_tui.calibrate import cache
from tgen_tui.calibrate.measure import SinkPair, sink_program

# how tgen measures latency, recorded with every result ("kernel" or "signature" per
# stream, see tgen_tui/worker/txstamps.py)
KERNEL_SOURCE = (
    "kernel: tx = the kernel's software transmit timestamp (SO_TIMESTAMPING, taken as the "
    "driver takes the frame) of every K-th frame of a stream (K from its rate, StreamStats."
    "latency_every), joined to the receive time by stream and sequence number; rx = the "
    "kernel's receive timestamp on the TPACKET_V3 ring"
)
SIGNATURE_SOURCE = (
    "signature: tx = CLOCK_MONOTONIC stamped into every frame's signature by the batch "
    "builder just before the send call (user space: includes the tester's send path; used "
    "for the tx_ring and AF_XDP send paths and for streams from another host); rx = the "
    "kernel's receive timestamp on the TPACKET_V3 ring"
)
SOURCES = {"kernel": KERNEL_SOURCE, "signature": SIGNATURE_SOURCE}
FLOOR_KEY = "latency_floor"


def measure_floor(pps: float = 20_000.0, seconds: float = 1.0, cpu: int | None = None) -> dict:
    """Send ``pps`` 64-byte frames for ``seconds`` across a fresh veth pair and return
    the receiver's latency summary (ns) with how it was measured."""
    from tgen_tui.worker import counters as C
    from tgen_tui.worker.client import WorkerClient
    from tgen_tui.worker.rxstats import hist_percentile_ns

    if cpu is None:
        cpu = max(os.sched_getaffinity(0))
    prog = sink_program(64)
    prog["schedule"]["pps"] = float(pps)
    shm = f"/dev/shm/tgen-{os.getpid()}-floor-{secrets.token_hex(3)}"
    with SinkPair("tgfl") as pair:
        w = WorkerClient(core=cpu)
        try:
            w.expect("hello")
            w.send(
                cmd="configure",
                shm=shm,
                n_streams=1,
                ports=[
                    {"name": "a", "interface": pair.if_a, "netns": pair.ns_a, "rx": False,
                     "tx_streams": [prog], "tx_path": "sendmmsg",
                     "tx_stamps": 1},  # every frame timed: a floor from all of them
                    {"name": "b", "interface": pair.if_b, "netns": pair.ns_b, "rx": True,
                     "tx_streams": []},
                ],
            )  # fmt: skip
            w.expect("ready")
            w.send(cmd="start", ports=["a"], t0_ns=time.monotonic_ns() + 20_000_000)
            w.expect("started")
            time.sleep(seconds)
            w.send(cmd="stop", drain_ms=200)
            w.expect("stopped", timeout=10)
            w.expect("stopped", timeout=10)
            view = C.CounterView.open(shm)
            try:
                row = view.rx[0][0].copy()
            finally:
                view.close()
        finally:
            w.close()
            try:
                os.unlink(shm)
            except OSError:
                pass
    n = int(row[C.R_LAT_COUNT])
    if n == 0:
        raise RuntimeError("no frame arrived across the veth pair")
    hist = row[C.R_HIST :]
    return {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": cache.host_facts(),
        "how": f"one 64 B stream at {pps:,.0f} fps for {seconds:g} s across a veth pair of "
        "its own (back to back, no DUT), sendmmsg, receive ring",
        "frames": n,
        "min_ns": float(row[C.R_LAT_MIN]),
        "p50_ns": hist_percentile_ns(hist, 0.50),
        "p99_ns": hist_percentile_ns(hist, 0.99),
        "max_ns": float(row[C.R_LAT_MAX]),
        "source": "kernel" if row[C.R_LAT_EVERY] else "signature",
        "sample_every": int(row[C.R_LAT_EVERY]),
    }


def floor_key() -> str:
    return f"{cache.host_id()}|{FLOOR_KEY}"


def store_floor(entry: dict) -> None:
    cache.store(entry, [floor_key()])


def cached_floor() -> dict | None:
    """This host's measured floor, or None (not measured, or the kernel/CPU changed)."""
    e = cache.load()["entries"].get(floor_key())
    if not isinstance(e, dict) or "p50_ns" not in e:
        return None
    facts = cache.host_facts()
    h = e.get("host") or {}
    if any(h.get(f) != facts.get(f) for f in ("kernel", "cpu_model")):
        return None
    if e.get("source") not in SOURCES:  # measured before kernel tx stamps: another floor
        return None
    return e


def source_of(sources) -> str | None:
    """The result's latency_source from the sources its streams used ("kernel",
    "signature"): the one source, "mixed" (each stream then says its own), or None when
    no stream measured latency."""
    used = set(sources)
    if len(used) == 1:
        return used.pop()
    return "mixed" if used else None


def result_fields(sources=()) -> dict:
    """What every result records about latency: its source and the tester's floor."""
    e = cached_floor()
    src = source_of(sources)
    return {
        "latency_source": src,
        "latency_source_detail": SOURCES.get(
            src or "", "per stream (streams.*.latency_source)" if src else "no latency measured"
        ),
        "latency_floor_ns": e["p50_ns"] if e else None,
        "latency_floor": e
        if e
        else {"note": "not measured on this host: run tgen calibrate (it measures the floor)"},
    }
