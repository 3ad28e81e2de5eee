"""RFC 2544 throughput through a small DUT queue, with and without bursts (issue 30, must-show 4).

Brings up a lab of its own (``tgen lab up --prefix wsrXXXX``), gives its DUT a token-bucket
bottleneck on d1 egress (``tgen lab set --tbf RATE``, RATE = ``--tbf-pps`` frames/s of
60-byte frames as the qdisc counts them), then shrinks that TBF's bucket and queue to a few
frames (``tc qdisc change ... tbf rate RATE burst B limit L`` in the DUT namespace: the
lab's own burst is 10 ms at the rate, hundreds of frames, which no burst would overflow).
Then it runs ``tgen rfc2544 throughput`` on profiles/lab.yaml's ``up`` stream (adapted to
the lab prefix) twice: with the default pacing (no ``pacing`` field) and with ``pacing:
burst`` on p0. Short trials (``--trial``, default 2 s), one search (``--repeats``), max rate
``--max-rate`` (default 60k), a coarse resolution (``--error``, default 2000 fps).

A sender that spaces its frames should pass close to the TBF rate; one that sends in
bursts overflows the small queue and passes far below it. Per run it records the lossless
rate (the report's throughput), the exit status, and every line of the report's text
(stdout, stderr, the Markdown tables) and every JSON key that mentions spacing.

Writes ``benchmarks/results/spacing_rfc2544.json``. Run as root:
``.venv/bin/python benchmarks/spacing_rfc2544.py [--tbf-pps 30000] [--burst-frames 4]
[--trial 2] [--max-rate 60k] [--error 2000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wire_tap import (  # noqa: E402
    RESULTS,
    TGEN,
    Lab,
    find_keys,
    host_facts,
    interrupt_on_signals,
    lab_profile,
    run_group,
    write_profile,
)

FRAME_QDISC_BYTES = 60  # a 64-byte frame without FCS, as the qdisc counts it


def throughput(rep: dict) -> dict:
    """The report's throughput: per frame size the search's median (and min/max), else any
    ``throughput_fps`` key it has."""
    found = {}
    for p, v in find_keys(rep, lambda k: k in ("throughput_fps", "summary")):
        if isinstance(v, dict):
            v = {k: v.get(k) for k in ("median", "min", "max", "n") if k in v}
        found[p] = v
    return found


def tc_show(lab: Lab) -> str:
    return subprocess.run(["ip", "netns", "exec", lab.dut, "tc", "-s", "qdisc", "show", "dev",
                           "d1"], capture_output=True, text=True).stdout.strip()  # fmt: skip


def one(lab: Lab, a, pacing: str | None) -> dict:
    tag = f"rfc2544-{pacing or 'default'}"
    prof = lab_profile(lab, pacing=pacing, streams=("up",))
    path = write_profile(lab, tag, prof)
    js, md = lab.tmp / f"{tag}.json", lab.tmp / f"{tag}.md"
    cmd = [TGEN, "rfc2544", "throughput", str(path), "-d", f"{a.trial:g}s",
           "--repeats", str(a.repeats), "--max-rate", a.max_rate, "--error", str(a.error),
           "--timeout", "500ms", "--settle", "500ms", "--cores", str(a.cores), "--no-plot",
           "--no-store", "--json", str(js), "--md", str(md)]  # fmt: skip
    t0 = time.monotonic()
    r = run_group(cmd, timeout=a.timeout)
    row = {"pacing": pacing or "default (no pacing field)", "command": " ".join(cmd[1:]),
           "rc": r.returncode, "elapsed_s": time.monotonic() - t0,
           "tbf_after": tc_show(lab)}  # fmt: skip
    text = {"stdout": r.stdout, "stderr": r.stderr, "md": md.read_text() if md.exists() else ""}
    row["spacing_lines"] = {
        k: [ln.rstrip() for ln in v.splitlines() if "spacing" in ln.lower() or "spaced" in ln.lower()]
        for k, v in text.items()
    }  # fmt: skip
    row["stdout_tail"] = r.stdout.strip()[-1500:]
    row["stderr_tail"] = r.stderr.strip()[-800:]
    if js.exists():
        rep = json.loads(js.read_text())
        row["throughput"] = throughput(rep)
        row["spacing_keys"] = [
            {"path": p, "value": v} for p, v in find_keys(rep, lambda k: "spacing" in k.lower())
        ]
        row["partial"] = rep.get("partial")
        row["report_keys"] = sorted(rep)[:40]
    else:
        row["error"] = f"no report (exit {r.returncode}): {r.stderr.strip()[-300:]}"
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--tbf-pps", type=float, default=30000.0,
                    help="TBF rate in 64-byte frames/s (default 30000)")  # fmt: skip
    ap.add_argument("--burst-frames", type=int, default=4, help="TBF bucket (default 4 frames)")
    ap.add_argument("--limit-frames", type=int, default=8, help="TBF queue (default 8 frames)")
    ap.add_argument("--trial", type=float, default=2.0, help="trial length, s (default 2)")
    ap.add_argument("--repeats", type=int, default=1, help="searches per run (default 1)")
    ap.add_argument("--max-rate", default="60k", help="highest rate tried (default 60k)")
    ap.add_argument("--error", type=int, default=2000, help="search resolution, fps")
    ap.add_argument("--cores", default=str((os.cpu_count() or 1) - 1), help="worker cores")
    ap.add_argument("--timeout", type=float, default=600.0, help="per search, s (default 600)")
    ap.add_argument("--out", default=str(RESULTS / "spacing_rfc2544.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    kbit = round(a.tbf_pps * FRAME_QDISC_BYTES * 8 / 1000)
    burst = a.burst_frames * FRAME_QDISC_BYTES
    limit = a.limit_frames * FRAME_QDISC_BYTES
    interrupt_on_signals()
    host = host_facts()
    lab = Lab("wsr")
    runs, setup = [], {}
    partial = False
    try:
        lab.up()
        lab.set("--tbf", f"{kbit}kbit")
        setup["tbf_by_lab"] = tc_show(lab)
        subprocess.run(["ip", "netns", "exec", lab.dut, "tc", "qdisc", "change", "dev", "d1",
                        "root", "tbf", "rate", f"{kbit}kbit", "burst", str(burst),
                        "limit", str(limit)], check=True, capture_output=True, text=True)  # fmt: skip
        setup["tbf"] = tc_show(lab)
        print(setup["tbf"].splitlines()[0] if setup["tbf"] else "no qdisc?", flush=True)
        for pacing in (None, "burst"):
            row = one(lab, a, pacing)
            runs.append(row)
            tp = {k: v for k, v in row.get("throughput", {}).items() if "summary" in k}
            print(f"pacing {row['pacing']}: rc {row['rc']}, throughput {tp or row.get('error')}",
                  flush=True)  # fmt: skip
            for src, lines in row["spacing_lines"].items():
                for ln in lines:
                    print(f"  [{src}] {ln}")
    except KeyboardInterrupt:
        partial = True
        print("interrupted: writing what was measured", file=sys.stderr)
    finally:
        lab.down()
    doc = {
        "benchmark": "spacing_rfc2544",
        "issue": 30,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "partial": partial,
        "host": host,
        "setup": {
            "lab_prefix": lab.prefix,
            "tbf_pps": a.tbf_pps,
            "tbf_rate": f"{kbit}kbit",
            "tbf_burst_bytes": burst,
            "tbf_limit_bytes": limit,
            "frame_bytes_at_qdisc": FRAME_QDISC_BYTES,
            "trial_s": a.trial,
            "repeats": a.repeats,
            "max_rate": a.max_rate,
            "error_fps": a.error,
            "cores": a.cores,
            **setup,
        },
        "runs": runs,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(f"wrote {a.out}")
    return 130 if partial else 0


if __name__ == "__main__":
    sys.exit(main())
