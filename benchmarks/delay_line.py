"""Is the lab's delay what was asked? (issue 25: within 1 ms at up to 10 Mbit/s)

Brings up a lab (``--prefix``, default ``bdl``) with ``--delay`` each way, no loss, and
``--tbf`` (default 10mbit), runs a transport profile for ``--seconds``: one TCP cubic
flow h0 -> h1 (fills the bottleneck) and one UDP flow at ``--udp-rate`` h1 -> h0 (the
reverse way, not queued behind the TBF). Then records:

- the delay line's own hold times (kernel receive stamp to send, both directions, the
  last 4096 frames): min, p50, p99, max, against the delay asked;
- the TCP flow's ``min_rtt`` from TCP_INFO against 2 x delay (the rest of its RTT is the
  TBF queue it builds);

and the load average, since the machine is shared (the tail is the scheduler's).
Writes ``benchmarks/results/delay_line.json``. Root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tgen_tui.lab import middlebox  # noqa: E402
from tgen_tui.lab import topology as lab  # noqa: E402
from tgen_tui.lab.config import LabConfig  # noqa: E402

PROFILE = """\
name: delay-check
duration: {seconds}s
ports:
  p0: {{interface: p0, netns: {p}-tester}}
  p1: {{interface: p1, netns: {p}-tester}}
streams: []
hosts:
  p0: {{netns: {p}-h0, ipv4: 198.18.100.2}}
  p1: {{netns: {p}-h1, ipv4: 198.19.100.2}}
transport:
  - {{name: tcp, port: p0, rx_port: p1, protocol: tcp, cc: cubic}}
  - {{name: udp, port: p1, rx_port: p0, protocol: udp, rate: {udp_rate}, message: 1000}}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", default="bdl")
    ap.add_argument("--delay", default="20ms")
    ap.add_argument("--tbf", default="10mbit")
    ap.add_argument("--udp-rate", default="2M")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/delay_line.json"))
    args = ap.parse_args()
    delay_ms = middlebox.parse_delay(args.delay) * 1e3
    doc: dict = {
        "host": platform.node(), "loadavg_before": os.getloadavg(), "delay_ms": delay_ms,
        "tbf": args.tbf, "udp_rate": args.udp_rate, "seconds": args.seconds,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        prof = Path(d) / "p.yaml"
        prof.write_text(PROFILE.format(seconds=args.seconds, p=args.prefix, udp_rate=args.udp_rate))
        out = Path(d) / "r.json"
        try:
            lab.up(LabConfig(prefix=args.prefix, delay=args.delay, tbf=args.tbf))
            subprocess.run(
                [sys.executable, "-m", "tgen_tui", "run", str(prof), "--json", str(out),
                 "--no-store", "-q"],
                check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                timeout=args.seconds + 60,
            )  # fmt: skip
            dl = lab.status(args.prefix)["delay_line"]
            res = json.loads(out.read_text())["transport"]["streams"]
        finally:
            lab.down(args.prefix)
    hold = {k: (v / 1e3 if v is not None else None) for k, v in dl["hold_us"].items() if k != "n"}
    doc |= {
        "loadavg_after": os.getloadavg(),
        "hold_ms": hold,
        "hold_frames": dl["hold_us"]["n"],
        "hold_p50_minus_delay_ms": hold["p50"] - delay_ms,
        "forwarded": dl["forwarded"],
        "send_errors": dl["send_errors"],
        "tcp_min_rtt_ms": res["tcp"]["min_rtt_ms"],
        "tcp_mean_srtt_ms": res["tcp"]["rtt_ms"],
        "tcp_min_rtt_minus_2delay_ms": res["tcp"]["min_rtt_ms"] - 2 * delay_ms,
        "tcp_goodput_bps": res["tcp"]["goodput_bps"],
        "udp_loss_pct": res["udp"]["loss_pct"],
    }
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
