"""The console's cost: key-to-screen latency and its own CPU while both ports send at full rate.

Runs the real ``tgen tui`` in a real terminal (a tmux pane, 160x48) against a lab this
script brings up (unique prefix) and removes. From the keyboard it starts both ports of
``profiles/lab.yaml`` (``S``) and sets each to 100 % of its line rate (``r 100%``), so
the workers send as fast as their core allows.

- **Key-to-screen latency**: from ``tmux send-keys`` of a digit to the pane's first line
  showing the new selection (``port N:pN``), polled every ~2 ms with ``capture-pane``;
  alternating 0/1, 150 ms apart. The send-keys process start is inside the figure, so it
  is an upper bound. Target: median under 100 ms.
- **Console CPU**: the console process's own user+system time (worker processes are not
  counted) over a window with the Main screen drawn at 10 Hz, as % of one core; also with
  every port idle. The process hosts the engine controller too (trio guest mode), so this
  is console + engine sampler. Target: under 10 % of a core.

Writes ``benchmarks/results/console_latency.json``. Run as root:
``.venv/bin/python benchmarks/console_latency.py [--samples 40 --cpu-seconds 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "console_latency.json"


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def first_line(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session, "-S", "0", "-E", "0")


def console_pid(marker: str) -> int:
    import psutil

    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] == "tgen" and marker in " ".join(p.info["cmdline"] or []):
            return p.pid
    raise RuntimeError("console process not found")


def cpu_window(proc, seconds: float) -> dict:
    c0, w0 = proc.cpu_times(), time.perf_counter()
    time.sleep(seconds)
    c1, w1 = proc.cpu_times(), time.perf_counter()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    return {
        "wall_s": round(w1 - w0, 3),
        "cpu_s": round(cpu, 3),
        "cpu_pct_of_core": round(100 * cpu / (w1 - w0), 2),
    }


def key_latency(session: str, samples: int) -> dict:
    """Digits alternating 0/1, 150 ms apart: ms from send-keys to the title showing it."""
    lat: list[float | None] = []
    for i in range(samples):
        n = i % 2 if i else 1
        marker = f"port {n}:p{n}"
        if marker in first_line(session):  # already there: press the other first
            n = 1 - n
            marker = f"port {n}:p{n}"
        t0 = time.perf_counter()
        tmux("send-keys", "-t", session, str(n))
        seen = None
        while time.perf_counter() - t0 < 2.0:
            if marker in first_line(session):
                seen = time.perf_counter()
                break
            time.sleep(0.002)
        lat.append(None if seen is None else 1000 * (seen - t0))
        time.sleep(0.15)
    good = [x for x in lat if x is not None]
    return {
        "samples": len(lat),
        "missed": len(lat) - len(good),
        "median": round(statistics.median(good), 2) if good else None,
        "p90": round(sorted(good)[int(0.9 * (len(good) - 1))], 2) if good else None,
        "min": round(min(good), 2) if good else None,
        "max": round(max(good), 2) if good else None,
        "all": [None if x is None else round(x, 2) for x in lat],
    }


def measure(prefix: str, samples: int, cpu_seconds: float) -> dict:
    import psutil

    text = (ROOT / "profiles" / "lab.yaml").read_text()
    text = text.replace("tgen-tester", f"{prefix}-tester").replace("tgen-dut", f"{prefix}-dut")
    prof = Path(f"/tmp/{prefix}-lab.yaml")
    prof.write_text(text)
    session = f"{prefix}-ui"
    tgen = ROOT / ".venv" / "bin" / "tgen"
    tmux("new", "-d", "-s", session, "-x", "160", "-y", "48", f"{tgen} tui {prof}")
    out: dict = {}
    try:
        deadline = time.time() + 30
        while "port 0:p0" not in first_line(session):
            if time.time() > deadline:
                raise RuntimeError(
                    "the console did not come up: "
                    + tmux("capture-pane", "-p", "-t", session)[-400:]
                )
            time.sleep(0.2)
        proc = psutil.Process(console_pid(str(prof)))
        time.sleep(1.0)
        out["cpu_idle_ports"] = cpu_window(proc, min(5.0, cpu_seconds))
        tmux("send-keys", "-t", session, "S")
        for port in ("0", "1"):
            tmux("send-keys", "-t", session, port, "r")
            time.sleep(0.3)
            tmux("send-keys", "-t", session, "100%", "Enter")
            time.sleep(0.3)
        time.sleep(2.0)
        out["key_to_screen_ms"] = key_latency(session, samples)
        out["cpu_full_rate"] = cpu_window(proc, cpu_seconds)
        out["screen_at_end"] = tmux("capture-pane", "-p", "-t", session).splitlines()[:16]
        # the same console folded to 80x24 (sparkline rows, no charts): the charts' cost
        # as a ratio within this run
        tmux("resize-window", "-t", session, "-x", "80", "-y", "24")
        time.sleep(1.0)
        out["cpu_full_rate_80x24_no_charts"] = cpu_window(proc, cpu_seconds)
        out["key_to_screen_ms_80x24_no_charts"] = key_latency(session, samples)
        tmux("resize-window", "-t", session, "-x", "160", "-y", "48")
        time.sleep(0.5)
        tmux("send-keys", "-t", session, "q")
        time.sleep(0.5)
        tmux("send-keys", "-t", session, "y")
        t0 = time.time()
        while proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE and time.time() - t0 < 10:
            time.sleep(0.05)
        out["quit_s"] = round(time.time() - t0, 2)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        prof.unlink(missing_ok=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--cpu-seconds", type=float, default=10.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("console_latency.py: needs root (it brings up a lab)", file=sys.stderr)
        return 3
    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig

    prefix = "cb" + secrets.token_hex(2)
    load0 = os.getloadavg()
    topology.up(LabConfig(prefix=prefix, topology="nat"))
    try:
        res = measure(prefix, args.samples, args.cpu_seconds)
    finally:
        topology.down(prefix)
    doc = {
        "benchmark": "console_latency",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {
            "hostname": platform.node(),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_at_start": load0,
            "loadavg_at_end": os.getloadavg(),
        },
        "setup": {
            "profile": "profiles/lab.yaml; both ports started with S and set to 100 % of line rate with r",
            "terminal": "tmux pane 160x48, Main screen with its charts (Tx/Rx pps, lost/s, "
            "latency, conntrack; redrawn at ~3 Hz), 10 Hz redraw of the table; then 80x24 "
            "(sparkline rows, no charts) for cpu_full_rate_80x24_no_charts",
            "latency": "tmux send-keys of a digit -> capture-pane first line shows 'port N:pN' (2 ms polling)",
            "cpu": "console process user+system (includes the engine controller in guest mode; excludes workers)",
        },
        "targets": {"key_to_screen_median_ms": 100, "console_cpu_pct_of_core": 10},
        **res,
    }
    RESULT.write_text(json.dumps(doc, indent=2) + "\n")
    k, c = res["key_to_screen_ms"], res["cpu_full_rate"]
    print(
        f"key-to-screen median {k['median']} ms (p90 {k['p90']}, max {k['max']}, missed {k['missed']}/{k['samples']})"
    )
    print(
        f"console CPU at full rate {c['cpu_pct_of_core']} % of a core; idle ports {res['cpu_idle_ports']['cpu_pct_of_core']} %"
    )
    k2 = res["key_to_screen_ms_80x24_no_charts"]
    print(
        f"at 80x24 (no charts): CPU {res['cpu_full_rate_80x24_no_charts']['cpu_pct_of_core']} %,"
        f" key-to-screen median {k2['median']} ms (p90 {k2['p90']})"
    )
    print("\n".join(res["screen_at_end"][:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
