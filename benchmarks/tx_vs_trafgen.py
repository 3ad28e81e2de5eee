"""Transmit rate of tgen's sender against netsniff-ng trafgen, on one core, same run.

A direct veth pair between two fresh namespaces (198.18.0.0/15) into a sink: 64-byte
frames (60 without FCS), IPv4/UDP with random source and destination ports, to a MAC
nobody has, so the receiving veth counts them in ``rx_packets`` and drops them. Each
figure is that counter's ``delta / seconds`` over a window after a warm-up. The sender
is pinned to one CPU (default: the last one). Variants, interleaved, ``--runs`` times:

- ``tgen_worker``: the real worker process (``python -m tgen_tui.worker``), one stream at
  an unreachable rate (flat out through its paced loop), with ``--tx-path`` (default
  ``auto``: resolved exactly as the engine does, from the ``tgen calibrate`` cache, else
  the default; the result says which and why). ``--calibrate`` runs ``tgen calibrate``
  first; so does a run whose ``auto`` finds no usable calibration (``--no-calibrate``
  measures the default path instead);
- ``raw_<path>_<batch>``: ``tgen calibrate``'s sender (BatchBuilder batch + one send), no
  pacing, fresh frames every batch: sendmmsg at 256/1024/2048, TX ring at 1024/4096;
- ``raw_sendmmsg_prebuilt``: one prebuilt batch sent again and again (the kernel's
  ceiling for the path: the builder's cost is the gap to it);
- ``raw_af_xdp_<batch>``: the same with the AF_XDP path (``XdpTx``, copy mode on veth,
  per-kick budget raised to the batch);
- ``raw_sendmmsg_ts1`` / ``raw_sendmmsg_ts16``: sendmmsg/1024 with kernel transmit
  timestamps (``SO_TIMESTAMPING``) on every frame / every 16th, read back after each
  batch (issue 13: their cost);
- ``tgen_worker_xdp``: the real worker on ``tx_path: xdp`` (the kernel's live-frames
  sender, 4,096 frames per call; tgen_tui.worker.xdplive), with native XDP_PASS on the
  receiving veth for that variant only (a veth needs NAPI at the far end to take XDP
  frames; the other variants run without it). benchmarks/xdp_live.py compares it with a
  minimal live-frames sender and gives the cost of each field op;
- ``trafgen``: ``cpu(N): { ... drnd(2), drnd(2) ... }`` with ``-P <ncpu>`` (trafgen
  ignores taskset), stopped by signalling its process group.

A run is *valid* only when the counter moved and the sender was still alive at the end of
the window (and, for trafgen, wrote no "failed" line): a tool that sent nothing is a
failed measurement, and no ratio is printed from it. Ratios are of medians of valid runs
in this run: tgen to trafgen, tgen to the best raw path that builds fresh frames, and the
best fresh path to prebuilt frames; ``best_of_runs`` repeats them from each variant's best
run (on a shared machine the least-disturbed run is the nearest to what a path can do). The host (``uname -a``, CPU model), the load before
the run and each CPU's busy share during every window are recorded with the runs.

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


# ---------------------------------------------------------------------- measuring
def cpu_times() -> list[tuple[int, int]]:
    """(busy, total) jiffies per CPU from /proc/stat."""
    out = []
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3].isdigit():
            v = [int(x) for x in line.split()[1:]]
            idle = v[3] + v[4]
            out.append((sum(v) - idle, sum(v)))
    return out


def measure_window(pair: Pair, warm: float, seconds: float, alive=None) -> dict:
    """rx_packets delta over a window after ``warm``; CPU busy % and load during it."""
    time.sleep(warm)
    c0, r0, t0 = cpu_times(), pair.rx_packets(), time.monotonic()
    time.sleep(seconds)
    r1, t1, c1 = pair.rx_packets(), time.monotonic(), cpu_times()
    busy = [
        round(100.0 * (b1 - b0) / max(1, (a1 - a0)), 1)
        for (b0, a0), (b1, a1) in zip(c0, c1, strict=True)
    ]
    return {
        "pps": (r1 - r0) / (t1 - t0),
        "frames": r1 - r0,
        "alive_at_end": True if alive is None else bool(alive()),
        "cpu_busy_pct": busy,
        "loadavg": list(os.getloadavg()),
    }


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


RAW = {  # variant -> (tx_path, batch, prebuilt[, kernel TX timestamp every k frames])
    "raw_sendmmsg_256": ("sendmmsg", 256, False),
    "raw_sendmmsg": ("sendmmsg", 1024, False),
    "raw_sendmmsg_2048": ("sendmmsg", 2048, False),
    "raw_tx_ring": ("tx_ring", 1024, False),
    "raw_tx_ring_4096": ("tx_ring", 4096, False),
    "raw_sendmmsg_prebuilt": ("sendmmsg", 1024, True),
    "raw_af_xdp_256": ("af_xdp", 256, False),
    "raw_af_xdp_1024": ("af_xdp", 1024, False),
    "raw_sendmmsg_ts1": ("sendmmsg", 1024, False, 1),
    "raw_sendmmsg_ts16": ("sendmmsg", 1024, False, 16),
}


def run_raw(pair: Pair, kind: str, cpu: int, warm: float, seconds: float) -> dict:
    """``tgen calibrate``'s sender process: one path flat out, fresh (or prebuilt) frames."""
    from tgen_tui.calibrate.measure import run_sender, sink_program

    path, batch, prebuilt, *ts = RAW[kind]
    cfg = {"program": sink_program(), "netns": pair.ns_a, "interface": pair.if_a,
           "tx_path": path, "batch": batch, "cpu": cpu, "prebuilt": prebuilt,
           "ts_every": ts[0] if ts else 0}  # fmt: skip
    info: dict = {}
    marks: list = []

    def counter() -> int:  # called at the start and the end of the window
        marks.append(cpu_times())
        return pair.rx_packets()

    t0 = time.monotonic()
    pps, rep = run_sender(cfg, counter, warm, seconds)
    info.update(rep)
    if len(marks) == 2:
        info["cpu_busy_pct"] = [
            round(100.0 * (b1 - b0) / max(1, (a1 - a0)), 1)
            for (b0, a0), (b1, a1) in zip(marks[0], marks[1], strict=True)
        ]
    info["loadavg"] = list(os.getloadavg())
    info["pps"] = pps
    info["wall_s"] = time.monotonic() - t0
    info["valid"] = pps > 0 and not rep.get("error") and rep.get("sent", 0) > 0
    if not info["valid"]:
        info["why_invalid"] = rep.get("error") or f"sent {rep.get('sent', 0)}, counted {pps:.0f}/s"
    return info


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


def paced_rate(shm: str, row: int = 0) -> float:
    """The sender's measured pace: frames after the first over the time between its first
    and last send (the worker's T_FIRST_TX_NS / T_LAST_TX_NS). The engine's "achieved"
    (requested × sent / due) says whether frames went out by their deadline; this says
    how evenly they went, which is what the pacing benchmarks measure."""
    from tgen_tui.worker import counters as C

    cv = C.CounterView.open(shm)
    try:
        r = cv.tx[row]
        n, span = int(r[C.T_TX_FRAMES]), int(r[C.T_LAST_TX_NS]) - int(r[C.T_FIRST_TX_NS])
        return (n - 1) / (span / 1e9) if n > 1 and span > 0 else 0.0
    finally:
        cv.close()


def run_worker(
    pair: Pair, cpu: int, warm: float, seconds: float, pps: float = 1e9, tx: dict | None = None
) -> dict:
    """The real worker, flat out; ``tx`` holds the resolved tx_path/max_batch (+ source)."""
    shm = tempfile.mktemp(prefix="tgen-bench-", dir="/dev/shm")
    w = Worker(cpu)
    try:
        w.send(cmd="configure", shm=shm, n_streams=1, ports=[
            {"name": "a", "interface": pair.if_a, "netns": pair.ns_a, "rx": False,
             "tx_streams": [program_to_dict(udp64_program(pps=pps))], **(tx or {})}])  # fmt: skip
        ready = w.expect("ready")
        w.send(cmd="start", t0_ns=time.monotonic_ns() + 20_000_000)
        w.expect("started")
        res = measure_window(pair, warm, seconds, alive=lambda: w.p.poll() is None)
        w.send(cmd="stop", drain_ms=0)
        st = w.expect("stopped")
    finally:
        w.close()
        if os.path.exists(shm):
            os.unlink(shm)
    c = st["counters"]
    res.update(
        tx_path_ran=ready.get("tx_path", {}).get("a"),
        tx_errors=c["tx_errors"],
        late_events=c["late_events"],
        tx_frames=c["tx_frames"],
    )
    res["valid"] = res["pps"] > 0 and c["tx_frames"] > 0
    if not res["valid"]:
        res["why_invalid"] = f"worker sent {c['tx_frames']} frames, counted {res['frames']}"
    return res


TRAFGEN_CFG = """cpu({cpu}): {{
  0x02, 0x00, 0x00, 0x00, 0x00, 0x02,  0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  c16(0x0800),
  0x45, 0x00, c16(46), c16(0), c16(0x4000), 64, 17, csumip(14, 33),
  198, 18, 0, 1,  198, 18, 0, 2,
  drnd(2), drnd(2), c16(26), c16(0),
  fill(0x00, 18)
}}
"""


def run_trafgen(pair: Pair, cpu: int, warm: float, seconds: float) -> dict:
    """trafgen into the sink; valid only if the counter moved, it lived, and it did not fail."""
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
        f.write(TRAFGEN_CFG.format(cpu=cpu))
        cfg = f.name
    p = subprocess.Popen(
        ["ip", "netns", "exec", pair.ns_a, "trafgen", "--dev", pair.if_a, "--conf", cfg,
         "--no-sock-mem", "-P", str(os.cpu_count()), "-Q", "-C"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, text=True,
    )  # fmt: skip
    try:
        res = measure_window(pair, warm, seconds, alive=lambda: p.poll() is None)
    finally:
        stop_group(p)
        os.unlink(cfg)
    err = (p.stderr.read() or "").strip()
    failed = [ln for ln in err.splitlines() if "fail" in ln.lower() or "error" in ln.lower()]
    res.update(rc=p.returncode, stderr_tail=err[-300:])
    why = []
    if res["frames"] <= 0:
        why.append("the sink counted no frames")
    if not res["alive_at_end"]:
        why.append(f"trafgen exited during the window (rc {p.returncode})")
    if failed:
        why.append(failed[-1][:200])
    res["valid"] = not why
    if why:
        res["why_invalid"] = "; ".join(why)
    return res


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
        tst_pace = paced_rate(shm_t)
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
        "achieved_tx_pps": tst_pace,
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


def host_facts() -> dict:
    from tgen_tui.calibrate.cache import cpu_model

    tv = subprocess.run(["trafgen", "-v"], capture_output=True, text=True).stdout.splitlines()
    return {
        "uname": sh("uname", "-a").stdout.strip(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "trafgen": tv[0] if tv else None,
        "loadavg_before": list(os.getloadavg()),
        "note": "other sessions may run tests on this machine at the same time: see "
        "each run's cpu_busy_pct (the sender's CPU is pinned; the other is others' work)",
    }


def summarise(runs: dict[str, list[dict]], agg=statistics.median) -> dict:
    """``agg`` (median) of valid runs, the ratios, and what was refused (no ratio from nothing).

    With ``agg=max`` the same figures from each variant's best run: on a shared machine the
    least-disturbed run is the nearest to what the path can do (``best_of_runs``).
    """
    med: dict[str, float | None] = {}
    invalid: dict[str, list[str]] = {}
    for v, rs in runs.items():
        good = [r["pps"] for r in rs if r.get("valid")]
        med[v] = agg(good) if good else None
        bad = [r.get("why_invalid", "?") for r in rs if not r.get("valid")]
        if bad:
            invalid[v] = bad
    fresh = {
        v: m
        for v, m in med.items()
        if m and v.startswith("raw_") and not v.endswith("prebuilt") and "_ts" not in v
    }
    packet = {v: m for v, m in fresh.items() if "af_xdp" not in v}
    best_packet = max(packet, key=packet.get) if packet else None
    best = max(fresh, key=fresh.get) if fresh else None
    refused = {}

    def ratio(a: str, b: str | None) -> float | None:
        if b is None or a not in med or b not in med:
            return None
        if not med[a] or not med[b]:
            who = a if not med[a] else b
            refused[f"{a}/{b}"] = f"{who} has no valid run: {'; '.join(invalid.get(who, []))[:300]}"
            return None
        return med[a] / med[b]

    key = "median_kpps" if agg is statistics.median else "kpps"
    out = {
        key: {v: (m / 1e3 if m else None) for v, m in med.items()},
        "invalid_runs": invalid,
        "best_fresh_path": best,
        "tgen_worker_over_trafgen": ratio("tgen_worker", "trafgen"),
        "tgen_worker_xdp_over_trafgen": ratio("tgen_worker_xdp", "trafgen"),
        "best_fresh_af_packet_path": best_packet,
        "tgen_worker_over_best_fresh": ratio("tgen_worker", best),
        "tgen_worker_over_best_af_packet": ratio("tgen_worker", best_packet),
        "best_fresh_over_prebuilt": ratio(best, "raw_sendmmsg_prebuilt") if best else None,
        "sendmmsg_over_tx_ring": ratio("raw_sendmmsg", "raw_tx_ring"),
        "tx_timestamps_every_frame_over_off": ratio("raw_sendmmsg_ts1", "raw_sendmmsg"),
        "tx_timestamps_every_16th_over_off": ratio("raw_sendmmsg_ts16", "raw_sendmmsg"),
    }
    out["refused_ratios"] = refused
    return out


DEFAULT_VARIANTS = ["tgen_worker", "tgen_worker_xdp", *RAW, "trafgen"]


def run_worker_xdp(pair: Pair, cpu: int, warm: float, seconds: float) -> dict:
    """The worker on tx_path xdp, with XDP_PASS on the sink's veth for this run only."""
    from tgen_tui.worker import xdplive as xl
    from tgen_tui.worker.netns import netns

    with netns(pair.ns_b):
        xl.attach_pass(pair.if_b)
    try:
        tx = {"tx_path": "xdp", "max_batch": 4096, "pacing": "burst"}
        return run_worker(pair, cpu, warm, seconds, tx=tx)
    finally:
        with netns(pair.ns_b):
            xl.detach(pair.if_b)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0, help="counted window per run, s")
    ap.add_argument("--warm", type=float, default=1.0, help="warm-up before the window, s")
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help="comma list of variants")  # fmt: skip
    ap.add_argument("--tx-path", default="auto", choices=["auto", "sendmmsg", "tx_ring"],
                    help="the worker's tx_path, resolved as the engine does (default auto)")  # fmt: skip
    ap.add_argument(
        "--calibrate",
        action="store_true",
        help="run `tgen calibrate` first (writes the cache auto uses); done anyway "
        "when auto finds no usable calibration, unless --no-calibrate",
    )
    ap.add_argument("--no-calibrate", action="store_true",
                    help="measure auto as it resolves now, even on the default path")  # fmt: skip
    ap.add_argument(
        "--no-xdp", action="store_true", help="with --calibrate: auto never picks AF_XDP"
    )
    ap.add_argument("--no-rx-check", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "tx_vs_trafgen.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    from tgen_tui.calibrate.resolve import resolve

    variants = a.variants.split(",")
    host = host_facts()
    pair = Pair().up()
    runs: dict[str, list] = {v: [] for v in variants}
    cal = None
    rxc = None
    try:
        first = resolve(a.tx_path, pair.if_a, pair.ns_a)
        if a.tx_path == "auto" and first.source == "default" and not a.no_calibrate:
            print(
                f"no usable calibration ({first.why}): running `tgen calibrate` first", flush=True
            )
            a.calibrate = True
        if a.calibrate:  # exactly as a user would: `tgen calibrate` (its own sink pair)
            argv = [sys.executable, "-m", "tgen_tui", "calibrate", "--cpu", str(a.cpu), "--json"]
            r = subprocess.run(argv + (["--no-xdp"] if a.no_xdp else []),
                               capture_output=True, text=True, cwd=str(ROOT))  # fmt: skip
            if r.returncode != 0:
                raise SystemExit(f"tgen calibrate failed: {r.stderr.strip()[-300:]}")
            cal = json.loads(r.stdout)
            print("calibrated:", cal["choice"], f"{cal['kpps']:.0f} kpps", flush=True)
        tx = resolve(a.tx_path, pair.if_a, pair.ns_a)
        print(f"tgen_worker: tx_path {tx.tx_path}, batch {tx.max_batch} [{tx.why}]")
        if tx.source == "default" and a.tx_path == "auto":
            print("  note: no calibration for this host: auto runs on the default path")
        for r in range(a.runs):
            for v in variants:
                if v == "trafgen":
                    res = run_trafgen(pair, a.cpu, a.warm, a.seconds)
                elif v == "tgen_worker_xdp":
                    res = run_worker_xdp(pair, a.cpu, a.warm, a.seconds)
                elif v == "tgen_worker":
                    res = run_worker(pair, a.cpu, a.warm, a.seconds, tx=tx.port_fields())
                else:
                    res = run_raw(pair, v, a.cpu, a.warm, a.seconds)
                runs[v].append(res)
                flag = "" if res.get("valid") else f"  INVALID: {res.get('why_invalid')}"
                print(f"run {r} {v:24s} {res['pps'] / 1e3:8.1f} kpps{flag}", flush=True)
        summ = summarise(runs)
        summ["best_of_runs"] = summarise(runs, max)
        if not a.no_rx_check and summ["median_kpps"].get("tgen_worker"):
            other_cpu = min(os.sched_getaffinity(0)) if os.cpu_count() > 1 else a.cpu
            rxc = rx_check(pair, a.cpu, other_cpu, 3.0, 0.5e3 * summ["median_kpps"]["tgen_worker"])
            print("rx check", rxc, flush=True)
    finally:
        pair.down()
    res = {
        "benchmark": "tx_vs_trafgen",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": host | {"loadavg_after": list(os.getloadavg())},
        "setup": {
            "frame_bytes_with_fcs": 64,
            "sender_cpu": a.cpu,
            "seconds": a.seconds,
            "warm_s": a.warm,
            "runs": a.runs,
            "order": "interleaved: every variant once per round",
            "counted_by": "rx_packets of the receiving veth (a sink: frames dropped after it)",
            "trafgen": "cpu(N): config, drnd(2) ports, -P <ncpu> --no-sock-mem -Q -C; stopped via killpg",
            "tgen_worker_tx": tx.port_fields(),
        },
        "calibration": cal,
        **summ,
        "runs_pps": {v: [x["pps"] for x in runs[v]] for v in variants},
        "runs_detail": runs,
        "rx_check": rxc,
        "rx_parse_offline": parse_cost(),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    keys = ("median_kpps", "best_fresh_path", "best_fresh_af_packet_path",
            "tgen_worker_over_trafgen", "tgen_worker_over_best_fresh",
            "tgen_worker_over_best_af_packet", "best_fresh_over_prebuilt", "refused_ratios",
            "tgen_worker_xdp_over_trafgen",
            "best_of_runs")  # fmt: skip
    print(json.dumps({k: res[k] for k in keys}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
