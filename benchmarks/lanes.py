"""One port's highest steady send rate with 1, 2, ... sender lanes (tgen_tui.engine.lanes).

A direct lab (p0 <-> p1 veth, no DUT) is brought up under its own prefix; port p0 sends
one 64-byte UDP stream (256 flows, ``inc``) asked for far more than a core can send
(``--ask``, default 5 Mpps), through the real engine and workers, with ``--lanes`` 1, 2, ...
up to the number of ``--cores``. The figure is the kernel's: p0's ``tx_packets`` rate over
the middle of the run (the first and last quarter are left out), which is the rate the
port sustained. Each lane count runs ``--runs`` times, interleaved (1, 2, 1, 2, ...), so
that load from others falls on both alike; the table gives the median and the ratio to
one lane.

The machine is shared: the JSON records ``hostname``, the load average before and after,
and the processes that used the most CPU during the runs (besides this benchmark and its
workers), with their CPU affinity, so a reader can tell what else ran on those cores.
Compare ratios within one run only.

Writes ``benchmarks/results/lanes.json``. Run as root:
``PYTHONPATH=$PWD .venv/bin/python benchmarks/lanes.py --cores 0,1 [--seconds 3 --runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
import trio

RESULTS = Path(__file__).resolve().parent / "results"

PROFILE = """
name: lanes-bench
seed: 1
ports:
  p0: {{interface: p0, netns: {prefix}-tester, speed: 100G, tx_path: {tx_path}}}
  p1: {{interface: p1, netns: {prefix}-tester, speed: 100G}}
streams:
  - name: flood
    port: p0
    eth: {{src: "02:74:67:00:00:01", dst: "02:74:67:00:00:02"}}
    ipv4: {{src: 198.18.0.2, dst: 198.18.0.3}}
    udp:
      src_port: {{min: 10000, max: 10255, mode: inc}}
      dst_port: 7
    size: 64
    rate: {{pps: {ask}}}
"""


async def one_run(compiled, cores: list[int], lanes: int, seconds: float) -> dict:
    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions

    opts = EngineOptions(cores=cores, lanes=lanes, ports=["p0"], drain_ms=100, interval=0.1)
    samples: list[tuple[float, int]] = []
    async with open_engine(compiled, opts) as eng:
        plan = eng.plan_text()
        await eng.start()
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            snap = await eng.sample_now()
            samples.append((time.monotonic(), snap.port("p0").if_tx_frames))
            await trio.sleep(0.1)
        await eng.stop()
        final = await eng.final_snapshot()
    n = len(samples)
    a, b = samples[n // 4], samples[(3 * n) // 4]
    p0 = final.port("p0")
    return {
        "lanes": lanes,
        "plan": plan,
        "steady_pps": (b[1] - a[1]) / (b[0] - a[0]),
        "tx_frames": p0.tx_frames,
        "if_tx_frames": p0.if_tx_frames,
        "worker_cpu_mean_pct": [round(w.proc_cpu_mean, 1) for w in final.workers],
        "core_cpu_mean_pct": [round(w.core_cpu_mean, 1) for w in final.workers],
    }


def others_top(before: dict[int, float], mine: set[int], top: int = 8) -> list[dict]:
    """The processes (not this benchmark or its children) that used the most CPU time
    since ``before`` (pid -> cpu seconds), with their affinity."""
    out = []
    for p in psutil.process_iter(["pid", "name", "cmdline", "cpu_times"]):
        try:
            if p.pid in mine:
                continue
            t = p.info["cpu_times"]
            used = (t.user + t.system) - before.get(p.pid, 0.0)
            if used > 0.05:
                out.append(
                    {
                        "pid": p.pid,
                        "cpu_s": round(used, 2),
                        "affinity": p.cpu_affinity(),
                        "cmd": " ".join(p.info["cmdline"] or [p.info["name"]])[:160],
                    }
                )
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return sorted(out, key=lambda d: -d["cpu_s"])[:top]


def veth_pair(prefix: str, queues: int) -> None:
    """p0 <-> p1 in namespace PREFIX-tester with ``queues`` tx/rx queues each (the lab's
    veths have one: AF_XDP lanes need one queue each)."""
    ns = f"{prefix}-tester"
    q = str(queues)
    subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
    for argv in (
        ["ip", "netns", "add", ns],
        ["ip", "-n", ns, "link", "add", "p0", "numtxqueues", q, "numrxqueues", q,
         "type", "veth", "peer", "name", "p1", "numtxqueues", q, "numrxqueues", q],
        ["ip", "-n", ns, "link", "set", "p0", "up"],
        ["ip", "-n", ns, "link", "set", "p1", "up"],
    ):  # fmt: skip
        subprocess.run(argv, check=True)


def cpu_times() -> dict[int, float]:
    out = {}
    for p in psutil.process_iter(["pid", "cpu_times"]):
        t = p.info["cpu_times"]
        if t is not None:
            out[p.pid] = t.user + t.system
    return out


def main() -> int:
    from tgen_tui.engine.assignment import parse_cores
    from tgen_tui.lab import topology as lab
    from tgen_tui.lab.config import LabConfig
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", default="0,1")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--ask", type=float, default=5e6, help="requested pps (above what one core sends)"
    )
    ap.add_argument("--prefix", default="i23bm")
    ap.add_argument(
        "--tx-path",
        default="sendmmsg",
        choices=("sendmmsg", "tx_ring", "af_xdp"),
        help="send path of p0 (af_xdp: p0/p1 get one queue per lane, lane L binds queue L)",
    )
    ap.add_argument("--out", default=str(RESULTS / "lanes.json"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("benchmarks/lanes.py needs root (a lab, AF_PACKET)", file=sys.stderr)
        return 3
    cores = parse_cores(args.cores)
    counts = list(range(1, len(cores) + 1))
    load_before = os.getloadavg()
    if args.tx_path == "af_xdp":
        veth_pair(args.prefix, len(cores))
    else:
        lab.up(LabConfig(prefix=args.prefix, topology="direct"))
    runs: list[dict] = []
    try:
        compiled = compile_profile(
            load_profile_text(
                PROFILE.format(prefix=args.prefix, ask=args.ask, tx_path=args.tx_path)
            )
        )
        t_before = cpu_times()
        for _ in range(args.runs):
            for n in counts:
                r = trio.run(one_run, compiled, cores, n, args.seconds)
                print(f"lanes {n}: {r['steady_pps']:,.0f} pps", flush=True)
                runs.append(r)
        me = {os.getpid()} | {c.pid for c in psutil.Process().children(recursive=True)}
        others = others_top(t_before, me)
    finally:
        if args.tx_path == "af_xdp":
            subprocess.run(["ip", "netns", "del", f"{args.prefix}-tester"], check=False)
        else:
            lab.down(args.prefix)
    load_after = os.getloadavg()
    table = []
    base = None
    for n in counts:
        vals = [r["steady_pps"] for r in runs if r["lanes"] == n]
        med = statistics.median(vals)
        base = med if n == 1 else base
        table.append(
            {
                "lanes": n,
                "median_pps": round(med),
                "runs_pps": [round(v) for v in vals],
                "ratio_to_1_lane": round(med / base, 3) if base else None,
            }
        )
    doc = {
        "benchmark": "lanes",
        "what": "one port's steady send rate (p0 tx_packets, middle half of each run) with "
        "1..N sender lanes, 64-byte UDP, 256 flows, asked for more than it can send",
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "cores": cores,
        "ask_pps": args.ask,
        "tx_path": args.tx_path,
        "seconds": args.seconds,
        "load_avg_before": load_before,
        "load_avg_after": load_after,
        "note": "shared machine: other engineers' tests ran at the same time (see "
        "other_processes); compare ratios within this run only. The engine, the kernel's "
        "veth receive work and the other processes share the same cores as the lanes.",
        "table": table,
        "runs": runs,
        "other_processes": others,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    for row in table:
        print(
            f"lanes {row['lanes']}: median {row['median_pps']:,} pps  "
            f"x{row['ratio_to_1_lane']}  runs {row['runs_pps']}"
        )
    print(f"load average before {load_before}, after {load_after}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
