"""The soak with faults of issue 36 (not run in CI; its short version is
tests/integration/test_link_flap.py): profiles/lab.yaml through the NAT lab at 2 x 100 kpps
for 10 minutes, ``conntrack -F`` in the DUT at 5 min, the DUT's d1 set down for 1 s at
7 min, as a user would do it (``tgen run --dut-event``). Run as root::

    .venv/bin/python benchmarks/soak.py                      # the issue's 10 minutes
    .venv/bin/python benchmarks/soak.py --duration 60s       # faults scaled: 30 s, 42 s

With ``--duration`` alone the faults keep their place in the run (flush at 50 %, flap at
70 %); ``--flush-at``, ``--flap-at`` and ``--flap-for`` set them (``--flush-at off``,
``--flap-at off``: none). A lab with a fresh prefix is brought up and taken down (``--lab
PREFIX``: use a running one and leave it).

What it checks, and writes to ``benchmarks/results/soak.json`` (``--out``) next to the
figures:

- the flap is named in the events at its time: "p1: carrier lost" / "p1: carrier back
  after X s", each against the DUT event that caused it;
- ``up`` (p0 -> p1) recovers within 2 s of the link coming back, and its outage is the
  time p1 had no carrier (the events' ``away_s``);
- the frames p1 sent without a carrier are ``tester_tx_unsent`` on ``down`` (p1's
  stream), never a DUT counter;
- in every snapshot, every stream's received count is at most its rx_port's interface
  count; at the end, each port's frames sent less those it could not send equal its
  interface's;
- every stream's lost frames explained (``loss_unexplained``), its frames that arrived
  on another port (``rx_elsewhere``);
- RSS of the tgen process and of its workers (psutil, every 5 s): at minute 2 (or the
  first sample past 20 % of the run) and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULT = ROOT / "benchmarks" / "results" / "soak.json"
LAB_PPS = 20_000  # each stream's rate in profiles/lab.yaml


def seconds(text: str) -> float:
    from tgen_tui.profiles.units import parse_duration

    return float(parse_duration(text))


def _rss(pid: int) -> dict:
    """RSS in MB of ``pid`` and of each of its children (the workers)."""
    import psutil

    try:
        p = psutil.Process(pid)
        out = {"main": round(p.memory_info().rss / 1e6, 1), "workers": {}}
        for c in p.children(recursive=True):
            try:
                if "tgen_tui.worker" in " ".join(c.cmdline()):
                    out["workers"][c.pid] = round(c.memory_info().rss / 1e6, 1)
            except psutil.Error:
                continue
        return out
    except psutil.Error:
        return {}


def run(args, prefix: str, tmp: Path) -> dict:
    text = (ROOT / "profiles" / "lab.yaml").read_text()
    prof = tmp / "lab.yaml"
    prof.write_text(
        text.replace("tgen-tester", f"{prefix}-tester").replace("tgen-dut", f"{prefix}-dut")
    )
    duration = seconds(args.duration)
    flush_at = (
        None
        if args.flush_at == "off"
        else (seconds(args.flush_at) if args.flush_at else 0.5 * duration)
    )
    flap_at = (
        None
        if args.flap_at == "off"
        else (seconds(args.flap_at) if args.flap_at else 0.7 * duration)
    )
    flap_for = seconds(args.flap_for)
    out, nd = tmp / "soak.json", tmp / "soak.ndjson"
    argv = [sys.executable, "-m", "tgen_tui", "run", str(prof), "-d", f"{duration}s"]
    argv += ["--rate-scale", repr(args.pps / LAB_PPS), "--json", str(out), "--ndjson", str(nd)]
    argv += ["--interval", args.interval, "--no-store"]
    if flush_at is not None:
        argv += ["--dut-event", f"{flush_at}s: conntrack -F"]
    if flap_at is not None:
        argv += ["--dut-event", f"{flap_at}s: ip link set d1 down"]
        argv += ["--dut-event", f"{flap_at + flap_for}s: ip link set d1 up"]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rss: list[dict] = []
    while proc.poll() is None:
        rss.append({"t_s": round(time.monotonic() - t0, 1), **_rss(proc.pid)})
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    stdout = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"tgen run failed ({proc.returncode}):\n{stdout}")
    res = json.loads(out.read_text())
    return judge(res, nd, rss, duration, flush_at, flap_at, flap_for, stdout)


def judge(res, nd: Path, rss, duration, flush_at, flap_at, flap_for, stdout) -> dict:
    links, t_running, over, snaps = [], None, [], 0
    with open(nd) as f:
        for line in f:
            d = json.loads(line)
            if d.get("event") == "link":
                links.append(d)
            elif d.get("event") == "port_state" and d.get("new") == "running" and t_running is None:
                t_running = d["t"]
            elif "ports" in d:
                snaps += 1
                for s in d["streams"].values():
                    p = d["ports"][s["rx_port"]]
                    if s["rx_frames"] > p["if_rx_frames"]:
                        over.append((d["seq"], s["name"], s["rx_frames"], p["if_rx_frames"]))
    ev = {r["command"]: r for r in res.get("dut_events", [])}
    down_ev, up_ev = ev.get("ip link set d1 down"), ev.get("ip link set d1 up")
    lost_ev = next((e for e in links if e["port"] == "p1" and e["new"] == "no carrier"), None)
    back_ev = next((e for e in links if e["port"] == "p1" and e["old"] == "no carrier"), None)
    up, down = res["streams"]["up"], res["streams"]["down"]
    p1 = res["ports"]["p1"]
    checks: dict = {}
    if flap_at is not None and down_ev and up_ev and t_running is not None:
        checks["carrier_lost_event_after_down_s"] = (
            round(lost_ev["t"] - t_running - down_ev["at_s"], 3) if lost_ev else None
        )
        checks["carrier_back_event_after_up_s"] = (
            round(back_ev["t"] - t_running - up_ev["at_s"], 3) if back_ev else None
        )
        away = back_ev["away_s"] if back_ev else None
        checks["p1_no_carrier_s"] = away
        checks["up_outage_ms"] = up["outage_ms"]
        checks["up_outage_at_s"] = up["outage_at_s"]
        checks["up_recovered"] = up.get("outage_recovered")
        if up["outage_at_s"] is not None:
            checks["up_back_after_link_up_s"] = round(
                up["outage_at_s"] + up["outage_ms"] / 1000 - up_ev["end_s"], 3
            )
        if away is not None:
            checks["up_outage_minus_no_carrier_ms"] = round(up["outage_ms"] - 1000 * away, 1)
    unsent = {(c["cause"], c["where"]): c["frames"] for c in down["loss_causes"]}.get(
        ("tester_tx_unsent", "tester p1")
    )
    # what d1 counted of them itself (the veth counts a drop at both ends: d1's)
    table = {
        (c["cause"], c["where"]): c["frames"] for c in (res.get("dut") or {}).get("counters", [])
    }
    d1_rx = table.get(("dut_rx_drop", "d1"), 0)
    checks["d1_rx_dropped"] = d1_rx
    checks["p1_tx_unsent"] = p1["tx_unsent"]
    checks["p1_tx_minus_if_tx"] = p1["tx_frames"] - p1["if_tx_frames"]
    checks["down_tester_tx_unsent_cause"] = unsent
    checks["snapshots"] = snaps
    checks["snapshots_with_a_stream_over_its_interface"] = len(over)
    settled = {}
    for name, p in res["ports"].items():
        sent = sum(s["tx_frames"] for s in res["streams"].values() if s["port"] == name)
        settled[name] = sent - p["tx_unsent"] - p["if_tx_frames"]
    checks["sent_less_unsent_minus_if_tx"] = settled
    passed = {
        "flap_events": bool(lost_ev and back_ev) if flap_at is not None else None,
        "up_recovered_within_2s": (checks.get("up_back_after_link_up_s", 99) < 2.0)
        if flap_at is not None
        else None,
        "outage_is_the_no_carrier_time": (
            abs(checks.get("up_outage_minus_no_carrier_ms", 1e9)) < 200
        )
        if flap_at is not None
        else None,
        "unsent_is_the_testers": (unsent or 0) == p1["tx_unsent"] - d1_rx
        and p1["tx_unsent"] == checks["p1_tx_minus_if_tx"],
        "counts_within_interfaces": not over and all(v == 0 for v in settled.values()),
    }
    rss2 = next((r for r in rss if r["t_s"] >= min(120.0, 0.2 * duration) and r.get("main")), None)
    return {
        "benchmark": "soak",
        "hostname": platform.node(),
        "loadavg": os.getloadavg(),
        "duration_s": duration,
        "faults": {"flush_at_s": flush_at, "flap_at_s": flap_at, "flap_for_s": flap_for},
        "passed": passed,
        "checks": checks,
        "streams": {
            n: {
                k: s.get(k)
                for k in (
                    "tx_frames",
                    "rx_frames",
                    "lost",
                    "rx_elsewhere",
                    "outage_ms",
                    "outage_at_s",
                )
                + ("outage_recovered", "loss_causes", "loss_unexplained")
            }
            for n, s in res["streams"].items()
        },
        "ports": {
            n: {
                k: p.get(k)
                for k in ("tx_frames", "if_tx_frames", "tx_unsent", "if_tx_dropped")
                + ("rx_frames", "if_rx_frames", "achieved_pps", "requested_pps")
            }
            for n, p in res["ports"].items()
        },  # fmt: skip
        "dut_events": res.get("dut_events"),
        "link_events": [{k: e[k] for k in ("t", "port", "old", "new", "away_s")} for e in links],
        "events": [e for e in res["events"] if "carrier" in e or "link" in e],
        "warnings": res.get("warnings"),
        "rss_mb": {"at_2min": rss2, "end": rss[-1] if rss else None, "samples": len(rss)},
        "summary": [
            ln
            for ln in stdout.splitlines()
            if ln.startswith(("why ", "stream ", "DUT event")) and not ln.startswith("stream  ")
        ],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", default="10min", help="how long to send (default 10min)")
    ap.add_argument("--pps", type=float, default=100_000, help="each stream's rate (default 100k)")
    ap.add_argument("--flush-at", help="conntrack -F at (default: half the duration; off: none)")
    ap.add_argument("--flap-at", help="d1 down at (default: 70 %% of the duration; off: none)")
    ap.add_argument("--flap-for", default="1s", help="d1 down for (default 1s)")
    ap.add_argument("--interval", default="100ms", help="snapshot interval (default 100ms)")
    ap.add_argument("--lab", help="use this running lab (prefix) instead of a fresh one")
    ap.add_argument("--out", default=str(RESULT), help=f"JSON output (default {RESULT})")
    args = ap.parse_args()
    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig

    prefix = args.lab or "s" + secrets.token_hex(3)[:5]
    with tempfile.TemporaryDirectory() as d:
        try:
            if not args.lab:
                topology.up(LabConfig(prefix=prefix))
            doc = run(args, prefix, Path(d))
        finally:
            if not args.lab:
                topology.down(prefix)
    doc["command"] = " ".join(sys.argv)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(
        json.dumps(
            {"passed": doc["passed"], "checks": doc["checks"], "summary": doc["summary"]}, indent=2
        )
    )
    print(f"wrote {args.out}")
    return 0 if all(v is not False for v in doc["passed"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
