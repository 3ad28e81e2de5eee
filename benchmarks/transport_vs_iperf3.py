"""USERS.md section 3 by tgen and by iperf3: TCP goodput through the lab DUT with 0 and
10,000 linear nftables filter rules, same lab, same run (Must show 1 of issue 25).

Brings up its own lab (``--prefix``, default ``bti3``) with transport hosts and ``--tbf``
(default ``100mbit``: the 100 Mbit/s link of the original measurement), then for each
rule count, ``--runs`` times interleaved: ``tgen run`` of profiles/tcp-rules.yaml (one
cubic flow, h0 -> h1) and ``iperf3 -c`` from h0 to an ``iperf3 -s`` in h1 (cubic,
``-t SECONDS``, client and server pinned with ``-A`` to the core tgen's worker uses, so
both tools move the bytes from one core). tgen's figure is ``transport.streams.tcp.goodput_bps`` (bytes the
receiver read / the flow's time), iperf3's is ``end.sum_received.bits_per_second``. The
ratio tgen / iperf3 is of medians in this run. The load average and host are recorded:
the machine is shared, so compare ratios only.

Writes ``benchmarks/results/transport_vs_iperf3.json``. Root; needs ``iperf3``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tgen_tui.lab import hosts  # noqa: E402
from tgen_tui.lab import topology as lab  # noqa: E402
from tgen_tui.lab.config import LabConfig  # noqa: E402

#: tgen pins its transport worker (both ends of the flow) to the last core by default;
#: iperf3's client and server are pinned there too (-A), so both tools get one core.
CORE = sorted(os.sched_getaffinity(0))[-1]


def _tgen(profile: Path, seconds: int, tmp: Path) -> float:
    out = tmp / "r.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run(
        [sys.executable, "-m", "tgen_tui", "run", str(profile), "-d", str(seconds),
         "--json", str(out), "--no-store", "-q"],
        check=True, env=env, timeout=seconds + 60,
    )  # fmt: skip
    return json.loads(out.read_text())["transport"]["streams"]["tcp"]["goodput_bps"]


def _iperf3(prefix: str, seconds: int) -> float:
    srv = subprocess.Popen(
        ["ip", "netns", "exec", hosts.host_netns(prefix, 1), "iperf3", "-s", "-1",
         "-B", hosts.H1_IP, "-p", "5299"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(0.5)
        cp = subprocess.run(
            ["ip", "netns", "exec", hosts.host_netns(prefix, 0), "iperf3", "-c", hosts.H1_IP,
             "-B", hosts.H0_IP, "-p", "5299", "-t", str(seconds), "-C", "cubic", "-J", "-A", f"{CORE},{CORE}"],
            capture_output=True, text=True, check=True, timeout=seconds + 30,
        )  # fmt: skip
    finally:
        srv.wait(timeout=10)
    return json.loads(cp.stdout)["end"]["sum_received"]["bits_per_second"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default="bti3")
    ap.add_argument("--rules", default="0,10000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--tbf", default="100mbit")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/transport_vs_iperf3.json"))
    args = ap.parse_args()
    if not shutil.which("iperf3"):
        print("iperf3 is not installed (apt-get install -y iperf3)", file=sys.stderr)
        return 3
    text = (ROOT / "profiles/tcp-rules.yaml").read_text().replace("tgen-", f"{args.prefix}-")
    load = os.getloadavg()
    doc: dict = {
        "host": platform.node(), "uname": " ".join(platform.uname()), "loadavg_before": load,
        "tbf": args.tbf, "seconds": args.seconds, "runs": args.runs, "by_rules": {},
        "note": "shared 2-core machine under load from other engineers: compare ratios only",
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        prof = tmp / "tcp-rules.yaml"
        prof.write_text(text)
        try:
            for n in [int(x) for x in args.rules.split(",")]:
                lab.up(LabConfig(prefix=args.prefix, transport_hosts=True, tbf=args.tbf,
                                 filter_rules=n))  # fmt: skip
                _tgen(prof, 2, tmp)  # warm-up (first flow after loading the rules)
                tg, ip = [], []
                for _ in range(args.runs):
                    tg.append(_tgen(prof, args.seconds, tmp))
                    ip.append(_iperf3(args.prefix, args.seconds))
                    print(f"rules {n}: tgen {tg[-1] / 1e6:.2f} iperf3 {ip[-1] / 1e6:.2f} Mbit/s")
                mt, mi = statistics.median(tg), statistics.median(ip)
                doc["by_rules"][str(n)] = {
                    "tgen_bps": tg, "iperf3_bps": ip, "tgen_median_bps": mt,
                    "iperf3_median_bps": mi, "ratio_tgen_to_iperf3": mt / mi if mi else None,
                    "loadavg": os.getloadavg(),
                }  # fmt: skip
        finally:
            lab.down(args.prefix)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    for n, r in doc["by_rules"].items():
        print(
            f"filter rules {n}: tgen {r['tgen_median_bps'] / 1e6:.2f} Mbit/s, iperf3 "
            f"{r['iperf3_median_bps'] / 1e6:.2f} Mbit/s, ratio {r['ratio_tgen_to_iperf3']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
