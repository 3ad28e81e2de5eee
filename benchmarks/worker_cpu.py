"""CPU share of each of tgen's workers at lab.yaml's load (issue 30, must-show 5).

Brings up a lab of its own (``tgen lab up --prefix wwcXXXX``) and runs profiles/lab.yaml
adapted to it: both streams (``up`` p0 -> p1 and ``down`` p1 -> p0, 20 kpps each), one
worker per port, each pinned to its own core (``tgen run --cores 0-1`` on this 2-core
host). The workers are the child processes ``python -m tgen_tui.worker --core N`` of
``tgen run`` (found with psutil). Over ``--window`` s in the middle of the run, each
worker's CPU share is read from /proc/PID/stat (utime + stime in clock ticks over the wall
time). In the same run a tcpdump tap (nanosecond stamps, -B 65536) on the DUT's ingress
d0 measures the ``up`` stream's gaps: the share within 10 % of the nominal 50 µs, and tgen's
own receive-side ``spacing.within_10pct`` (null where the result lacks it).
With ``--pacing X`` the profile says ``pacing: X`` on both ports (both workers send).

Writes ``benchmarks/results/worker_cpu.json``. Run as root:
``.venv/bin/python benchmarks/worker_cpu.py [--window 5] [--pacing auto|qdisc|timer|burst]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wire_tap import (  # noqa: E402
    PACING_CHOICES,
    RESULTS,
    TGEN,
    Lab,
    Tap,
    gap_stats,
    host_facts,
    interrupt_on_signals,
    lab_profile,
    pcap_times_ns,
    stop_group,
    stream_result,
    tgen_within,
    write_profile,
)

TICK = os.sysconf("SC_CLK_TCK")


def proc_ticks(pid: int) -> tuple[int, int, int]:
    """(utime, stime, processor) of /proc/PID/stat (fields 14, 15, 39)."""
    s = Path(f"/proc/{pid}/stat").read_text()
    f = s[s.rindex(")") + 2 :].split()  # fields from 3 (state) on
    return int(f[11]), int(f[12]), int(f[36])


def find_workers(tgen_pid: int, want: int, timeout: float) -> list[psutil.Process]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            kids = psutil.Process(tgen_pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        ws = []
        for k in kids:
            try:
                cl = k.cmdline()
            except psutil.Error:
                continue
            if "-m" in cl and "tgen_tui.worker" in cl:
                ws.append(k)
        if len(ws) >= want:
            return ws
        time.sleep(0.1)
    return ws


def core_of(cmdline: list[str]) -> int | None:
    if "--core" in cmdline:
        i = cmdline.index("--core")
        if i + 1 < len(cmdline) and cmdline[i + 1].lstrip("-").isdigit():
            return int(cmdline[i + 1])
    return None


def core_ticks() -> dict[int, list[int]]:
    """/proc/stat per core: user nice system idle iowait irq softirq steal."""
    out = {}
    for ln in Path("/proc/stat").read_text().splitlines():
        if ln.startswith("cpu") and ln[3:4].isdigit():
            f = ln.split()
            out[int(f[0][3:])] = [int(x) for x in f[1:9]]
    return out


def core_busy(c0: dict, c1: dict) -> dict:
    """Per core over the window: % busy, and % in softirq (the DUT's forwarding, receive)."""
    out = {}
    for c in c0:
        d = [b - a for a, b in zip(c0[c], c1.get(c, c0[c]), strict=True)]
        tot = sum(d) or 1
        out[str(c)] = {"busy_pct": 100.0 * (tot - d[3] - d[4]) / tot,
                       "softirq_pct": 100.0 * d[6] / tot, "system_pct": 100.0 * d[2] / tot}  # fmt: skip
    return out


def sample_workers(ws: list[psutil.Process], window: float) -> tuple[float, list[dict], dict]:
    """Each worker's utime + stime over ``window`` s of wall time (and each core's load)."""
    t0, s0, c0 = time.monotonic(), {w.pid: proc_ticks(w.pid) for w in ws}, core_ticks()
    time.sleep(window)
    t1, s1, c1 = time.monotonic(), {}, core_ticks()
    for w in ws:
        try:
            s1[w.pid] = proc_ticks(w.pid)
        except OSError:
            pass
    workers = []
    for w in ws:
        try:
            cl, aff = w.cmdline(), w.cpu_affinity()
        except psutil.Error:
            cl, aff = [], None
        entry = {"pid": w.pid, "core_arg": core_of(cl), "affinity": aff, "cmdline": " ".join(cl)}
        if w.pid in s1:
            du = (s1[w.pid][0] - s0[w.pid][0]) / TICK
            ds = (s1[w.pid][1] - s0[w.pid][1]) / TICK
            entry.update(utime_s=du, stime_s=ds, cpu_share=(du + ds) / (t1 - t0),
                         last_processor=s1[w.pid][2])  # fmt: skip
        else:
            entry["error"] = "worker gone before the window ended"
        workers.append(entry)
    return t1 - t0, workers, core_busy(c0, c1)


def add_result(row: dict, res: dict, pcap: Path, pps: float) -> None:
    """tgen's figures (per worker, per stream) and the tap's gaps of ``up``."""
    row["result_workers"] = res.get("workers")
    by_pid = {w.get("pid"): w for w in res.get("workers") or [] if isinstance(w, dict)}
    for w in row["workers"]:
        rw = by_pid.get(w["pid"]) or {}
        w.update(ports=rw.get("ports"), streams=rw.get("streams"), core=rw.get("core"),
                 tgen_proc_cpu_mean_pct=rw.get("proc_cpu_mean"),
                 tgen_core_cpu_mean_pct=rw.get("core_cpu_mean"))  # fmt: skip
    for name in ("up", "down"):
        s = stream_result(res, name)
        row[f"tgen_{name}"] = {"tx_frames": s.get("tx_frames"), "rx_frames": s.get("rx_frames"),
                               "spacing": s.get("spacing"), "within_10pct": tgen_within(s)}  # fmt: skip
    st = gap_stats(pcap_times_ns(pcap), pps)
    row["tap_up"] = st
    tw = row["tgen_up"]["within_10pct"]
    row["tgen_minus_tap_points"] = (
        100.0 * (tw - st["within_10pct"]) if tw is not None and "within_10pct" in st else None
    )


def one_run(lab: Lab, a, seconds: float, cores: str) -> dict:
    prof = lab_profile(lab, pps=a.pps, seconds=seconds, pacing=a.pacing,
                       pacing_ports=("p0", "p1"), streams=("up", "down"))  # fmt: skip
    path = write_profile(lab, "lab", prof)
    out, pcap = lab.tmp / "run.json", lab.tmp / "d0.pcap"
    tap = Tap(lab.dut, "d0", pcap, cpu=0)
    p = None
    try:
        p = subprocess.Popen([TGEN, "run", str(path), "-d", f"{seconds:g}", "--cores", cores,
                              "--json", str(out), "--no-store", "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
        ws = find_workers(p.pid, 2, timeout=15.0)
        if len(ws) < 2:
            raise RuntimeError(f"found {len(ws)} worker processes of tgen run, not 2")
        time.sleep(a.margin)  # sending starts as soon as the workers are ready
        window, workers, cores_load = sample_workers(ws, a.window)
        err = p.communicate(timeout=seconds + 120)[1]
    finally:
        if p is not None:
            stop_group(p, timeout=15)
        cap = tap.stop()
    row = {"rc": p.returncode, "window_s": window, "workers": workers, "cores_load": cores_load,
           "tap_capture": cap}  # fmt: skip
    if p.returncode not in (0, 1) or not out.exists():
        row["error"] = f"tgen run exit {p.returncode}: {err.strip()[-300:]}"
    else:
        add_result(row, json.loads(out.read_text()), pcap, a.pps)
    return row


def report(row: dict) -> None:
    for w in row.get("workers", []):
        if "cpu_share" in w:
            print(f"worker pid {w['pid']} {w.get('ports')} core {w['core_arg']} "
                  f"(affinity {w['affinity']}): {100 * w['cpu_share']:.1f} % of a core "
                  f"(user {w['utime_s']:.2f} s, sys {w['stime_s']:.2f} s over "
                  f"{row['window_s']:.2f} s; tgen's own mean {w.get('tgen_proc_cpu_mean_pct')})")  # fmt: skip
    if "within_10pct" in row.get("tap_up", {}):
        tw = row["tgen_up"]["within_10pct"]
        print(f"tap on d0, up: {row['tap_up']['frames']} frames, within 10 % "
              f"{100 * row['tap_up']['within_10pct']:.1f} %, gap p50 "
              f"{row['tap_up']['gap_us']['p50']:.1f} us; tgen's own "
              f"{'-' if tw is None else f'{100 * tw:.1f} %'}")  # fmt: skip
    elif "error" in row:
        print(row["error"], file=sys.stderr)
    for c, v in (row.get("cores_load") or {}).items():
        print(f"core {c}: busy {v['busy_pct']:.1f} %, softirq {v['softirq_pct']:.1f} %")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--window", type=float, default=5.0, help="CPU window, s (default 5)")
    ap.add_argument("--margin", type=float, default=2.0,
                    help="run time before and after the window, s (default 2)")  # fmt: skip
    ap.add_argument("--pps", type=float, default=20000.0, help="per stream (default 20000)")
    ap.add_argument("--pacing", choices=PACING_CHOICES,
                    help="write 'pacing: X' on both ports (default: leave it out)")  # fmt: skip
    ap.add_argument("--cores", default=None, help="tgen run --cores (default 0-(nproc-1))")
    ap.add_argument("--lab-args", default="",
                    help="more options for `tgen lab up`, e.g. '--rps-cpus 0': the lab's "
                    "default steers all receive work to CPU 0, so a worker pinned there "
                    "is charged for the DUT's forwarding while it runs")  # fmt: skip
    ap.add_argument("--out", default=str(RESULTS / "worker_cpu.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    ncpu = os.cpu_count() or 1
    cores = a.cores or (f"0-{ncpu - 1}" if ncpu > 1 else "0")
    seconds = a.window + 2 * a.margin
    interrupt_on_signals()
    host = host_facts()
    lab = Lab("wwc", a.lab_args.split() or None)
    row: dict = {}
    partial = False
    try:
        lab.up()
        row = one_run(lab, a, seconds, cores)
        report(row)
    except KeyboardInterrupt:
        partial = True
        print("interrupted", file=sys.stderr)
        row = {"error": "interrupted"}
    finally:
        lab.down()
    doc = {
        "benchmark": "worker_cpu",
        "issue": 30,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "partial": partial,
        "host": host,
        "setup": {
            "lab_prefix": lab.prefix,
            "lab_args": a.lab_args.split(),
            "profile": "profiles/lab.yaml (up + down), adapted to the lab prefix",
            "pps_per_stream": a.pps,
            "run_s": seconds,
            "window_s": a.window,
            "cores": cores,
            "pacing": a.pacing,
            "cpu_share": "(utime + stime) / CLK_TCK over the window's wall time, /proc/PID/stat",
            "tap": "tcpdump -B 65536 --time-stamp-precision=nano on PREFIX-dut d0, CPU 0",
        },
        "run": row,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 130 if partial else 0


if __name__ == "__main__":
    sys.exit(main())
