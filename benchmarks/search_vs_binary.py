"""Time to a result: ``tgen search`` (RFC 9971, MLRsearch) against ``tgen rfc2544
throughput`` (RFC 2544 binary search) at the same width, on the lab.

Needs root and a lab: ``tgen lab up --prefix P``; the script sets the DUT to
``--rate-limit 40000 --drop-percent 0`` (a clean cliff: the binary search needs a load
with no loss) and runs, alternately and ``--rounds`` times, with 1 s trials:
  binary: tgen rfc2544 throughput --duration 1s --repeats 1 --error 1000 --max-rate 100k
  rfc2544 preset: tgen search --preset rfc2544 --quick --width W (W = 1000 / 40,800)
  csit: tgen search --quick --width W (NDR and PDR in one search)
It records the wall time of each command, its trials and its result, with the host name
and the load average (the machine is shared: compare ratios within one run only).
Writes benchmarks/results/search_vs_binary.json.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/search_vs_binary.py --prefix i21
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "search_vs_binary.json"
TGEN = [sys.executable, "-m", "tgen_tui"]
WIDTH = 1000 / 40800  # the binary search's 1000 fps, relative to the enforced rate


def _run(name: str, args: list[str], json_path: str) -> dict:
    t0 = time.monotonic()
    p = subprocess.run(TGEN + args + ["--json", json_path, "-q", "--no-store"], check=False)
    wall = time.monotonic() - t0
    doc = json.load(open(json_path)) if os.path.exists(json_path) else {}
    row = {"name": name, "rc": p.returncode, "wall_s": round(wall, 2)}
    if doc.get("goals"):
        row["trials"] = doc.get("n_trials")
        row["goals"] = {
            g["name"]: {
                k: g.get(k)
                for k in (
                    "relevant_lower_bound_pps",
                    "relevant_upper_bound_pps",
                    "conditional_throughput_pps",
                    "irregular",
                )
            }
            for g in doc["goals"]
        }
    else:
        s = (doc.get("searches") or [{}])[0]
        row["trials"] = (s.get("n_trials") or {}).get("total")
        row["l_pps"], row["h_pps"] = s.get("l_pps"), s.get("h_pps")
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default="tgen")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    prof = f"/tmp/{a.prefix}-bench.yaml"
    Path(prof).write_text(Path("profiles/lab.yaml").read_text().replace("tgen-", f"{a.prefix}-"))
    subprocess.run(
        TGEN + ["lab", "set", "--prefix", a.prefix, "--rate-limit", "40000", "--drop-percent", "0"],
        check=True,
        capture_output=True,
    )
    common = [prof, "--max-rate", "100k", "--settle", "500ms", "--timeout", "500ms"]
    cmds = {
        "binary": ["rfc2544", "throughput", *common, "--duration", "1s", "--repeats", "1",
                   "--error", "1000"],
        "search rfc2544 preset": ["search", *common, "--preset", "rfc2544", "--quick",
                                  "--width", f"{WIDTH:.5f}", "--no-ladder"],
        "search csit (NDR+PDR)": ["search", *common, "--quick", "--width", f"{WIDTH:.5f}",
                                  "--no-ladder"],
    }  # fmt: skip
    rows = []
    for r in range(a.rounds):
        for name, args in cmds.items():
            row = _run(name, args, f"/tmp/{a.prefix}-bench-{len(rows)}.json")
            rows.append(row | {"round": r, "loadavg": os.getloadavg()})
            print(json.dumps(row), flush=True)
    OUT.parent.mkdir(exist_ok=True)
    doc = {
        "host": socket.gethostname(),
        "uptime_loadavg_start_end": [rows[0]["loadavg"], rows[-1]["loadavg"]],
        "width_relative": WIDTH,
        "note": "shared machine: compare ratios within this run only; 1 s trials everywhere",
        "rows": rows,
    }
    OUT.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
