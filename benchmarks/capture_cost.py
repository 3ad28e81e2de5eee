"""What a capture costs the port it watches (issue 31, must-show 3).

Brings up a lab of its own and runs profiles/lab.yaml's ``up`` stream (p0 -> p1 through
the NAT) at ``--pps`` (default 100 kpps) for ``--seconds``, alternating, ``--repeats``
times each:

- ``off``: no capture;
- ``rx``: ``--capture p1:udp`` (every received frame kept, both directions tapped);
- ``both``: ``--capture p0,p1`` (every frame on both ports, tx and rx);

and records, per run, the stream's achieved rate (tgen's result: sent / due x requested),
received frames and loss, and the capture's kept / not-kept counts (ring full, over the
budget). The figure of merit is the achieved rate with a capture as a ratio of the rate
without, within this run on this host (machines differ: compare ratios, not rates).
The tester's own clock is the reference here; the wire spacing is issue 30's
(benchmarks/wire_tap.py).

Writes ``benchmarks/results/capture_cost.json``. Run as root:
``.venv/bin/python benchmarks/capture_cost.py [--pps 100000] [--seconds 5] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wire_tap import (  # noqa: E402
    RESULTS,
    TGEN,
    Lab,
    host_facts,
    interrupt_on_signals,
    lab_profile,
    stream_result,
    write_profile,
)

MODES = {
    "off": [],
    "rx": ["--capture", "p1:udp"],
    "both": ["--capture", "p0,p1"],
}


def one(lab: Lab, prof: Path, mode: str, k: int) -> dict:
    out = lab.tmp / f"r-{mode}-{k}.json"
    cap = lab.tmp / f"c-{mode}-{k}.pcapng"
    extra = MODES[mode] + (["-w", str(cap)] if MODES[mode] else [])
    t0 = time.monotonic()
    r = subprocess.run([TGEN, "run", str(prof), "--json", str(out), "--no-store", "--quiet", *extra],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    if r.returncode not in (0, 1):
        raise RuntimeError(f"tgen run ({mode}) failed: {r.stderr.strip()[-400:]}")
    res = json.loads(out.read_text())
    st = stream_result(res, "up")
    caps = res.get("captures") or []
    row = {
        "mode": mode,
        "repeat": k,
        "wall_s": round(time.monotonic() - t0, 2),
        "requested_pps": st.get("requested_pps"),
        "achieved_pps": st.get("achieved_pps"),
        "tx_frames": st.get("tx_frames"),
        "rx_frames": st.get("rx_frames"),
        "lost": st.get("lost"),
        "capture": [
            {k2: c.get(k2) for k2 in ("kept", "not_kept", "bytes", "state", "reason")} for c in caps
        ],
    }
    if cap.exists():
        row["capture_file_bytes"] = cap.stat().st_size
        cap.unlink()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pps", type=float, default=100_000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    interrupt_on_signals()
    lab = Lab("cap").up()
    rows = []
    try:
        prof = write_profile(lab, "cap", lab_profile(lab, pps=args.pps, seconds=args.seconds))
        for k in range(args.repeats):
            for mode in MODES:
                row = one(lab, prof, mode, k)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        lab.down()
    summary = {}
    for mode in MODES:
        ach = [r["achieved_pps"] for r in rows if r["mode"] == mode and r["achieved_pps"]]
        summary[mode] = {
            "achieved_pps_median": statistics.median(ach) if ach else None,
            "runs": len(ach),
        }
    base = summary["off"]["achieved_pps_median"]
    for mode in MODES:
        m = summary[mode]["achieved_pps_median"]
        summary[mode]["ratio_to_off"] = round(m / base, 4) if (m and base) else None
    doc = {
        "benchmark": "capture_cost",
        "host": host_facts(),
        "args": vars(args),
        "summary": summary,
        "runs": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "capture_cost.json"
    path.write_text(json.dumps(doc, indent=2))
    print(json.dumps(summary, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
