"""Issue 35 Must show 3: the connections-per-second search finds the limit a DUT rule sets
on new connections, ``tgen lab set --ct-new-rate R`` (nftables ``ct state new limit rate
over R/second``), run as a user runs it: ``tgen rfc9411 cps`` (RFC 9971's machinery over
request/response flows, methodology/procedures/mlr/appsearch.py). With ``--concurrent``,
the concurrent-capacity search instead: ``tgen rfc9411 concurrent`` against ``--ct-limit
R`` (``ct count over R drop``).

Brings up its own lab (``--prefix``, default ``cps35``) with transport hosts, sets the
rule, and searches profiles/http-cps.yaml (1,000 clients, HTTP, FIN) with the app's
timeout at 900 ms (below the SYN retransmission time, so a dropped SYN fails its
connection instead of getting through on its retry), or profiles/http-hold.yaml (the
connections held open), one goal: at most ``--loss-ratio`` (cps: 0.5 %: a shared host's
stalls burst SYNs past the rule's burst now and then; concurrent: 0) of the intended
connections failed, ``--trial`` s trials, relative width ``--width``. Each trial is a
``tgen run --flush-dut`` (conntrack flushed before it). Writes
``benchmarks/results/cps_search.json`` (``concurrent_search.json``) with the verb's
report, every trial's counts, the bounds and their error against R. Root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tgen_tui.lab import topology as lab  # noqa: E402
from tgen_tui.lab.config import LabConfig  # noqa: E402


def profile(prefix: str, tmp: Path, concurrent: bool) -> Path:
    name = "http-hold.yaml" if concurrent else "http-cps.yaml"
    text = (ROOT / "profiles" / name).read_text().replace("tgen-", f"{prefix}-")
    text = text.replace("timeout: 3s", "timeout: 900ms")
    p = tmp / name
    p.write_text(text)
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--prefix", default="cps35")
    ap.add_argument("--concurrent", action="store_true", help="the concurrent-capacity search")
    ap.add_argument("--limit", type=int, help="the DUT's limit (default 1200 conn/s, 1500 conn)")
    ap.add_argument("--trial", default="3s", help="trial duration (default 3s)")
    ap.add_argument("--loss-ratio", help="goal loss ratio (default cps 0.5%%, concurrent 0)")
    ap.add_argument("--width", default="2%")
    ap.add_argument("--min-load", type=float, help="default: limit / 6 (cps), limit / 3")
    ap.add_argument("--max-load", type=float, help="default: 2 x limit")
    ap.add_argument("--keep", action="store_true", help="leave the lab up")
    ap.add_argument("--out")
    a = ap.parse_args()
    kind = "concurrent" if a.concurrent else "cps"
    limit = a.limit or (1500 if a.concurrent else 1200)
    loss = a.loss_ratio or ("0" if a.concurrent else "0.5%")
    lo = a.min_load or limit / (3 if a.concurrent else 6)
    hi = a.max_load or 2 * limit
    out = Path(a.out or ROOT / "benchmarks" / "results" / f"{kind}_search.json")
    rule = {"ct_limit": limit} if a.concurrent else {"ct_new_rate": limit}
    lab.up(LabConfig(prefix=a.prefix, topology="nat", transport_hosts=True, **rule))
    t0 = time.time()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rep = Path(tmp) / "report.json"
            cmd = [sys.executable, "-m", "tgen_tui", "rfc9411", kind,
                   str(profile(a.prefix, Path(tmp), a.concurrent)), "--trial", a.trial,
                   "--goal", f"failed={loss}", "--width", a.width, "--min-load", f"{lo:g}",
                   "--max-load", f"{hi:g}", "--json", str(rep), "--no-store", "--no-plot"]  # fmt: skip
            cp = subprocess.run(cmd, capture_output=True, text=True, check=False)
            sys.stderr.write(cp.stderr[-4000:])
            if cp.returncode != 0 or not rep.exists():
                print(cp.stdout[-4000:])
                return cp.returncode or 1
            doc = json.loads(rep.read_text())
    finally:
        if not a.keep:
            lab.down(a.prefix)
    (g,) = doc["goals"]
    rlb, rub = g["relevant_lower_bound_pps"], g["relevant_upper_bound_pps"]
    res = {
        "what": f"issue 35: tgen rfc9411 {kind} vs "
        + ("nft ct count over R drop" if a.concurrent else "nft ct state new limit rate"),
        "command": " ".join(cmd[2:]),
        "limit": limit,
        "relevant_lower_bound": rlb,
        "relevant_upper_bound": rub,
        "error_pct": None if rlb is None else round(100 * (rlb - limit) / limit, 2),
        "regular": g["regular"],
        "irregular": g["irregular"],
        "failed_trial": doc.get("failed_trial"),
        "n_trials": doc.get("n_trials"),
        "trial_seconds": doc.get("trial_seconds"),
        "trials": [
            {
                "load": t["rate_pps"],
                "duration_s": t["duration_s"],
                "intended": t["directions"]["forward"]["intended_frames"],
                "offered": t["tx_frames"],
                "lost": t["lost"],
                "established": t["extra"].get("established"),
                "loss_ratio": t["loss_ratio"],
            }
            for t in doc["trials"]
        ],
        "wall_s": round(time.time() - t0, 1),
        "host": platform.node(),
        "loadavg": os.getloadavg(),
    }
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("limit", "relevant_lower_bound",
                                          "relevant_upper_bound", "error_pct", "n_trials",
                                          "wall_s")}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
