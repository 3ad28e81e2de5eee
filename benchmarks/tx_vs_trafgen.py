"""Transmit rate of tgen's sender against netsniff-ng trafgen, on one core, same run.

A direct veth pair between two fresh namespaces (198.18.0.0/15). 64-byte frames
(60 without FCS), IPv4/UDP with random source and destination ports. The sender is
pinned to one CPU (default: the last one). The receiving veth drops the frames (foreign
destination MAC) and its ``rx_packets`` counts them; each figure is ``delta / seconds``
over a window after a warm-up. Variants, interleaved, ``--runs`` times each:

- ``tgen_worker``: the real worker process (``python -m tgen_tui.worker``) with one
  stream at an unreachable rate (so it sends flat out through its paced loop);
- ``raw_sendmmsg``: the worker's tx path in a bare loop (BatchBuilder batch of 1024 +
  ``MmsgTx.send``), no pacing;
- ``raw_tx_ring`` / ``raw_tx_ring_4096``: the same with ``RingTx`` (1024- and
  4096-frame flushes);
- ``raw_sendmmsg_prebuilt``: sendmmsg of one prebuilt batch again and again (the kernel's
  ceiling for this path);
- ``trafgen``: ``cpu(N): { ... drnd(2), drnd(2) ... }`` with ``-P 2`` (trafgen ignores
  taskset), stopped by signalling its process group.

Then an rx check: the worker receives on the far veth (rx ring, RPS to another CPU)
while another worker sends; its count is compared with the interface counter, and its
busy time per frame gives the rx cost. Writes ``benchmarks/results/tx_vs_trafgen.json``.

Run as root: ``.venv/bin/python benchmarks/tx_vs_trafgen.py [--runs 3 --seconds 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tgen_tui.packets.program import (  # noqa: E402
    StreamProgram,
    program_to_dict,
)

RESULTS = ROOT / "benchmarks" / "results"
DST_MAC = "02:00:00:00:00:02"  # not the receiver's: frames are dropped right after rx_packets


# ---------------------------------------------------------------------- lab
def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


class Pair:
    def __init__(self, prefix: str = "wb"):
        tag = prefix + secrets.token_hex(3)
        self.ns_a, self.ns_b = f"{tag}a", f"{tag}b"
        self.if_a, self.if_b = f"{tag}-a", f"{tag}-b"

    def up(self) -> Pair:
        try:
            for ns in (self.ns_a, self.ns_b):
                sh("ip", "netns", "add", ns)
                sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
                sh(
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.default.disable_ipv6=1",
                )
            sh(
                "ip",
                "link",
                "add",
                self.if_a,
                "netns",
                self.ns_a,
                "type",
                "veth",
                "peer",
                "name",
                self.if_b,
                "netns",
                self.ns_b,
            )
            for ns, ifn, addr in (
                (self.ns_a, self.if_a, "198.18.0.1/24"),
                (self.ns_b, self.if_b, "198.18.0.2/24"),
            ):
                sh("ip", "-n", ns, "addr", "add", addr, "dev", ifn)
                sh("ip", "-n", ns, "link", "set", ifn, "up")
        except Exception:
            self.down()
            raise
        return self

    def down(self) -> None:
        for ns in (self.ns_a, self.ns_b):
            sh("ip", "netns", "del", ns, check=False)

    def rx_packets(self) -> int:
        out = sh("ip", "-n", self.ns_b, "-s", "-j", "link", "show", "dev", self.if_b).stdout
        return int(json.loads(out)[0]["stats64"]["rx"]["packets"])

    def rps(self, mask: int) -> None:
        sh(
            "ip",
            "netns",
            "exec",
            self.ns_b,
            "sh",
            "-c",
            f"echo {mask:x} > /sys/class/net/{self.if_b}/queues/rx-0/rps_cpus",
        )


def udp64_program(
    index: int = 0, pps: float = 1e9, count: int | None = None, size: int = 60
) -> StreamProgram:
    """IPv4/UDP, random ports (RFC 4814 ranges), ``size`` bytes without FCS, via the compiler."""
    from tgen_tui.packets.compile import compile_stream
    from tgen_tui.profiles.models import Port, Stream

    stream = Stream.model_validate(
        {
            "name": f"bench{index}",
            "port": "a",
            "eth": {"src": "02:00:00:00:00:01", "dst": DST_MAC},
            "ipv4": {"src": "198.18.0.1", "dst": "198.18.0.2"},
            "udp": {
                "src_port": {"min": 1024, "max": 65535, "mode": "random"},
                "dst_port": {"min": 1, "max": 49151, "mode": "random"},
            },
            "size": size + 4,
            "rate": {"pps": pps},
            "mode": {"type": "burst", "count": count} if count else "continuous",
        }
    )
    return compile_stream(stream, index, Port(interface="a"), seed=1)


# ---------------------------------------------------------------------- child: raw tx loop
def raw_child(kind: str, ns: str, ifn: str, seconds: float, cpu: int, batch: int) -> None:
    os.sched_setaffinity(0, {cpu})
    from tgen_tui.packets.batch import BatchBuilder
    from tgen_tui.worker.netns import enter
    from tgen_tui.worker.txpath import MmsgTx, RingTx

    enter(ns)
    b = BatchBuilder(udp64_program(), max_batch=batch)
    if kind.startswith("raw_tx_ring"):
        tx = RingTx(ifn, max_batch=batch, max_len=64, ring_frames=max(32768, 4 * batch))
    else:
        tx = MmsgTx(ifn, max_batch=batch)
    prebuilt = kind == "raw_sendmmsg_prebuilt"
    buf, lens = b.build(0, batch)
    end = time.monotonic() + seconds
    k = 0
    sent = 0
    while time.monotonic() < end:
        if not prebuilt:
            buf, lens = b.build(k, batch)
        sent += tx.send(buf, lens)
        k += batch
    print(json.dumps({"sent": sent, "errors": tx.errors}), flush=True)


# ---------------------------------------------------------------------- variants
def measure_window(pair: Pair, warm: float, seconds: float) -> float:
    time.sleep(warm)
    r0, t0 = pair.rx_packets(), time.monotonic()
    time.sleep(seconds)
    r1, t1 = pair.rx_packets(), time.monotonic()
    return (r1 - r0) / (t1 - t0)


def stop_group(p: subprocess.Popen, sig=signal.SIGINT, timeout: float = 5.0) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(5)


def run_raw(pair: Pair, kind: str, cpu: int, warm: float, seconds: float) -> dict:
    batch = 4096 if kind.endswith("4096") else 1024
    p = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, "--ns", pair.ns_a, "--if", pair.if_a,
         "--seconds", str(warm + seconds + 1.0), "--cpu", str(cpu), "--batch", str(batch)],
        stdout=subprocess.PIPE, start_new_session=True, text=True,
    )  # fmt: skip
    try:
        pps = measure_window(pair, warm, seconds)
        out = json.loads(p.stdout.readline() or "{}")
        p.wait(10)
    finally:
        if p.poll() is None:
            stop_group(p, signal.SIGKILL)
    return {"pps": pps, **out}


class Worker:
    def __init__(self, cpu: int):
        self.p = subprocess.Popen(
            [sys.executable, "-m", "tgen_tui.worker", "--core", str(cpu), "--parent-pid", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
        )  # fmt: skip
        self.expect("hello")

    def send(self, **m) -> None:
        self.p.stdin.write(json.dumps(m) + "\n")
        self.p.stdin.flush()

    def expect(self, ev: str) -> dict:
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"worker died waiting for {ev}")
            m = json.loads(line)
            if m["event"] == ev:
                return m
            if m["event"] == "error":
                raise RuntimeError(m["message"])

    def close(self) -> None:
        if self.p.poll() is None:
            try:
                self.send(cmd="quit")
                self.p.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait(5)


def run_worker(
    pair: Pair, cpu: int, warm: float, seconds: float, pps: float = 1e9, tx_path: str = "sendmmsg"
) -> dict:
    shm = tempfile.mktemp(prefix="tgen-bench-", dir="/dev/shm")
    w = Worker(cpu)
    try:
        w.send(cmd="configure", shm=shm, n_streams=1, ports=[
            {"name": "a", "interface": pair.if_a, "netns": pair.ns_a, "rx": False,
             "tx_streams": [program_to_dict(udp64_program(pps=pps))], "tx_path": tx_path}])  # fmt: skip
        w.expect("ready")
        w.send(cmd="start", t0_ns=time.monotonic_ns() + 20_000_000)
        w.expect("started")
        rate = measure_window(pair, warm, seconds)
        w.send(cmd="stop", drain_ms=0)
        st = w.expect("stopped")
    finally:
        w.close()
        if os.path.exists(shm):
            os.unlink(shm)
    c = st["counters"]
    return {
        "pps": rate,
        "tx_errors": c["tx_errors"],
        "late_events": c["late_events"],
        "tx_frames": c["tx_frames"],
    }


TRAFGEN_CFG = """cpu({cpu}): {{
  0x02, 0x00, 0x00, 0x00, 0x00, 0x02,  0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  c16(0x0800),
  0x45, 0x00, c16(46), c16(0), c16(0x4000), 64, 17, csumip(14, 33),
  198, 18, 0, 1,  198, 18, 0, 2,
  drnd(2), drnd(2), c16(26), c16(0),
  fill(0x00, 18)
}}
"""


def run_trafgen(pair: Pair, cpu: int, warm: float, seconds: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
        f.write(TRAFGEN_CFG.format(cpu=cpu))
        cfg = f.name
    p = subprocess.Popen(
        ["ip", "netns", "exec", pair.ns_a, "trafgen", "--dev", pair.if_a, "--conf", cfg,
         "--no-sock-mem", "-P", str(os.cpu_count()), "-Q", "-C"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, text=True,
    )  # fmt: skip
    try:
        pps = measure_window(pair, warm, seconds)
    finally:
        stop_group(p)
        os.unlink(cfg)
    err = (p.stderr.read() or "")[-300:]
    return {"pps": pps, "rc": p.returncode, **({"stderr": err} if "fail" in err.lower() else {})}


def rx_check(pair: Pair, tx_cpu: int, rx_cpu: int, seconds: float, pps: float) -> dict:
    """A receiving worker on rx_cpu (RPS there) against the interface counter."""
    shm_r = tempfile.mktemp(prefix="tgen-bench-rx-", dir="/dev/shm")
    shm_t = tempfile.mktemp(prefix="tgen-bench-tx-", dir="/dev/shm")
    pair.rps(1 << rx_cpu)
    rw = Worker(rx_cpu)
    tw = Worker(tx_cpu)
    try:
        rw.send(cmd="configure", shm=shm_r, n_streams=1, ports=[
            {"name": "b", "interface": pair.if_b, "netns": pair.ns_b, "rx": True}])  # fmt: skip
        rw.expect("ready")
        count = int(pps * seconds)
        tw.send(cmd="configure", shm=shm_t, n_streams=1, ports=[
            {"name": "a", "interface": pair.if_a, "netns": pair.ns_a, "rx": False,
             "tx_streams": [program_to_dict(udp64_program(pps=pps, count=count))]}])  # fmt: skip
        tw.expect("ready")
        r0 = pair.rx_packets()
        tw.send(cmd="start", t0_ns=time.monotonic_ns() + 20_000_000)
        tw.expect("started")
        tw.expect("tx_done")
        tw.send(cmd="stop", drain_ms=0)
        tst = tw.expect("stopped")
        rw.send(cmd="stop", drain_ms=300)
        rst = rw.expect("stopped")
        r1 = pair.rx_packets()
    finally:
        tw.close()
        rw.close()
        pair.rps(0)
        for s in (shm_r, shm_t):
            if os.path.exists(s):
                os.unlink(s)
    c = rst["counters"]
    return {
        "offered_pps": pps,
        "tx_frames": tst["counters"]["tx_frames"],
        "achieved_tx_pps": tst["streams"][0]["achieved_pps"],
        "interface_rx_packets": r1 - r0,
        "ring_rx_frames": c["rx_frames"],
        "ring_kernel_packets": c["rx_kernel_packets"],
        "ring_drops": c["ring_drops"],
        "match": c["rx_frames"] == r1 - r0,
        "rx_busy_ns_per_frame": c["busy_ns"] / max(1, c["rx_frames"]),
    }


def parse_cost() -> dict:
    """Offline: ns per frame to find and parse the headers of a full 1 MiB V3 block."""
    from tgen_tui.worker.rxring import chain_offsets_doubling, chain_offsets_fast, parse_headers

    out = {}
    for label, sizes in (("fixed_60B", None), ("mixed_sizes", True)):
        blk = np.zeros(1 << 20, dtype=np.uint8)
        u32, u16 = blk.view(np.uint32), blk.view(np.uint16)
        rng = np.random.default_rng(0)
        off, offs = 48, []
        while True:
            ln = 60 if sizes is None else int(rng.choice([60, 590, 1514]))
            step = (48 + 34 + ln + 7) & ~7  # header + mac offset padding + frame, 8-aligned
            if off + step > len(blk):
                break
            offs.append(off)
            u32[off >> 2] = step
            u32[(off + 12) >> 2] = ln
            u32[(off + 16) >> 2] = ln
            u16[(off + 24) >> 1] = 82
            off += step
        n = len(offs)
        reps = 20
        t = time.perf_counter_ns()
        for _ in range(reps):
            o = chain_offsets_fast(u32, 48, n)
            if o is None:
                o = chain_offsets_doubling(u32, 48, n, off)
            parse_headers(blk, u32, u16, o, 0)
        out[label] = {
            "frames_per_block": n,
            "ns_per_frame": (time.perf_counter_ns() - t) / reps / n,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warm", type=float, default=1.0)
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument(
        "--variants",
        default="tgen_worker,raw_sendmmsg,raw_tx_ring,raw_tx_ring_4096,raw_sendmmsg_prebuilt,trafgen",
    )
    ap.add_argument("--out", default=str(RESULTS / "tx_vs_trafgen.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--ns", help=argparse.SUPPRESS)
    ap.add_argument("--if", dest="ifn", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=1024, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        raw_child(a.child, a.ns, a.ifn, a.seconds, a.cpu, a.batch)
        return 0
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    variants = a.variants.split(",")
    pair = Pair().up()
    runs: dict[str, list] = {v: [] for v in variants}
    load = os.getloadavg()
    try:
        for r in range(a.runs):
            for v in variants:
                if v == "trafgen":
                    res = run_trafgen(pair, a.cpu, a.warm, a.seconds)
                elif v == "tgen_worker":
                    res = run_worker(pair, a.cpu, a.warm, a.seconds)
                else:
                    res = run_raw(pair, v, a.cpu, a.warm, a.seconds)
                runs[v].append(res)
                print(f"run {r} {v:24s} {res['pps'] / 1e3:8.1f} kpps", flush=True)
        med = {v: statistics.median(x["pps"] for x in runs[v]) for v in variants}
        other_cpu = min(os.sched_getaffinity(0)) if os.cpu_count() > 1 else a.cpu
        rx_pps = 0.5 * med.get("tgen_worker", 400e3)
        rxc = rx_check(pair, a.cpu, other_cpu, 3.0, rx_pps)
        print("rx check", rxc, flush=True)
    finally:
        pair.down()
    ratio = None
    if "tgen_worker" in med and med.get("trafgen"):
        ratio = med["tgen_worker"] / med["trafgen"]
    res = {
        "benchmark": "tx_vs_trafgen",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "loadavg_at_start": load,
        },
        "setup": {
            "frame_bytes_with_fcs": 64,
            "sender_cpu": a.cpu,
            "seconds": a.seconds,
            "warm_s": a.warm,
            "runs": a.runs,
            "counted_by": "rx_packets of the receiving veth (frames dropped after it)",
            "trafgen": "cpu(N): config, drnd(2) ports, -P <ncpu> --no-sock-mem -Q -C; stopped via killpg",
        },
        "runs_pps": {v: [x["pps"] for x in runs[v]] for v in variants},
        "runs_detail": runs,
        "median_kpps": {v: med[v] / 1e3 for v in variants},
        "tgen_worker_over_trafgen": ratio,
        "sendmmsg_over_tx_ring": (med["raw_sendmmsg"] / med["raw_tx_ring"])
        if "raw_sendmmsg" in med and "raw_tx_ring" in med
        else None,
        "rx_check": rxc,
        "rx_parse_offline": parse_cost(),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(
        json.dumps(
            {
                k: res[k]
                for k in ("median_kpps", "tgen_worker_over_trafgen", "sendmmsg_over_tx_ring")
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
