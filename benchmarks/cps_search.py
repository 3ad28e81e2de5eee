"""Issue 35 Must show 3: the connections-per-second search (RFC 9971's machinery over
request/response flows, methodology/procedures/mlr/cps.py) finds the limit a DUT rule
sets on new connections, ``tgen lab set --ct-new-rate R`` (nftables ``ct state new limit
rate over R/second``).

Brings up its own lab (``--prefix``, default ``cps35``) with transport hosts, sets the
rule, and searches profiles/http-cps.yaml (1,000 clients, HTTP, FIN) with the app's
timeout at 900 ms (below the SYN retransmission time, so a dropped SYN fails its
connection instead of getting through on its retry), one goal: at most ``--loss-ratio``
(0.5 %) of the intended connections failed,
``--trial`` s trials, relative width 2 %. Each trial is a ``tgen run --rate-scale S
--flush-dut`` (conntrack flushed before it). Writes ``benchmarks/results/cps_search.json``
with every trial's counts, the bounds and their error against R. Root. The machine is
shared: the tester's own limit (one core for the flow worker) caps the top of the range.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tgen_tui.lab import topology as lab  # noqa: E402
from tgen_tui.lab.config import LabConfig  # noqa: E402
from tgen_tui.methodology.procedures.mlr.cps import DEFINITION, cps_search  # noqa: E402
from tgen_tui.methodology.procedures.mlr.goals import Goal  # noqa: E402

BASE_CPS = 2000.0  # http-cps.yaml's load: connections_per_s


def profile(prefix: str, tmp: Path) -> Path:
    text = (ROOT / "profiles" / "http-cps.yaml").read_text().replace("tgen-", f"{prefix}-")
    text = text.replace("timeout: 3s", "timeout: 900ms")
    p = tmp / "cps.yaml"
    p.write_text(text)
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--prefix", default="cps35")
    ap.add_argument("--limit", type=int, default=1200, help="the DUT's new connections/s")
    ap.add_argument("--trial", type=float, default=3.0, help="trial duration, s")
    ap.add_argument("--loss-ratio", type=float, default=0.005,
                    help="goal loss ratio: failed / intended connections (0.5 %%: a shared "
                    "host's stalls burst SYNs past the rule's 20 ms burst now and then)")  # fmt: skip
    ap.add_argument("--min-load", type=float, default=200.0)
    ap.add_argument("--max-load", type=float, default=2400.0)
    ap.add_argument("--keep", action="store_true", help="leave the lab up")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cps_search.json"))
    a = ap.parse_args()
    lab.up(LabConfig(prefix=a.prefix, topology="nat", transport_hosts=True, ct_new_rate=a.limit))
    t0 = time.time()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            goal = Goal("cps", loss_ratio=a.loss_ratio, exceed_ratio=0.0, final_trial_duration_s=a.trial,
                        duration_sum_s=a.trial, width=0.02, initial_trial_duration_s=a.trial)  # fmt: skip
            res = trio.run(
                lambda: cps_search(
                    profile(a.prefix, Path(tmp)),
                    BASE_CPS,
                    [goal],
                    min_load=a.min_load,
                    max_load=a.max_load,
                )  # fmt: skip
            )
    finally:
        if not a.keep:
            lab.down(a.prefix)
    (o,) = res.outcomes
    rlb, rub = o.relevant_lower_bound_pps, o.relevant_upper_bound_pps
    doc = {
        "what": "issue 35 Must show 3: CPS search vs nft ct state new limit rate",
        "limit_cps": a.limit,
        "relevant_lower_bound_cps": rlb,
        "relevant_upper_bound_cps": rub,
        "error_pct": None if rlb is None else round(100 * (rlb - a.limit) / a.limit, 2),
        "regular": o.regular,
        "irregular": o.irregular,
        "failed_connection": DEFINITION,
        "trials": [
            {
                "load_cps": t.rate_pps,
                "duration_s": t.duration_s,
                "attempted": t.tx_frames,
                "ok": t.rx_frames,
                "failed": t.lost,
                "loss_ratio": t.extra.loss_ratio,
            }
            for t in res.trials
        ],  # fmt: skip
        "search": res.to_dict(),
        "wall_s": round(time.time() - t0, 1),
        "host": platform.node(),
        "loadavg": os.getloadavg(),
    }
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("limit_cps", "relevant_lower_bound_cps",
                                          "relevant_upper_bound_cps", "error_pct")}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
