"""Frames on the wire at their due times (issue 30): inter-frame gaps seen by an independent tap.

Brings up a lab of its own (``tgen lab up --prefix wspXXXX``, NAT44 DUT) and captures with
tcpdump (``--time-stamp-precision=nano -B 65536``, pinned with taskset to the core the
sender does not use) on the DUT's ingress d0, while one sender sends one 64-byte UDP stream
(198.18.0.2 -> 198.19.0.2:7, the MACs of profiles/lab.yaml's ``up`` stream) out of the
tester's p0:

- tgen: lab.yaml's ``up`` stream alone, ``rate: {pps: R}``, the run as long as
  ``--seconds``, the workers where tgen puts them (the sender on the last core, p1's
  receive-only worker on core 0) unless ``--cores`` says; with ``--pacing X``
  the profile says ``pacing: X`` on p0 (without it, the field is left out: tgen's default);
- tgen, ``idt: {dist: exponential}`` at 10 kpps: the KS distance of the tap's gaps from
  the exponential law with mean 1/rate, and the mean rate error;
- trafgen (netsniff-ng) with its own rate option (``-b Rpps``) and gap option
  (``-t NNNns``), the same frame. In these modes trafgen sends from CPU0 only (sendto), so
  the config says ``cpu(0):`` and the tap is pinned to the other core. A trafgen run that
  sent nothing or printed a failure is recorded as failed (no shares); it is then tried
  with ``-q``, and if that fails too, on a plain veth pair whose peer only sinks frames,
  with the tap on the peer (labelled ``where: veth_pair_sink``). (trafgen 0.6.8's ``-b``
  was seen to send each second's frames as one back-to-back burst; ``-t`` sleeps between
  frames and falls short of the rate above a few kpps.)

Per case: frames seen by the tap against frames sent; the tap's mean rate ((frames - 1)
over the span); gap p1/p10/p50/p90/p99 in µs; the share of gaps within 10 % of the
nominal gap 1/R; for tgen also its own receive-side figure
``streams.up.spacing.within_10pct`` from its JSON result (null if the result lacks it)
and its difference in points from the tap's share. The host (platform, kernel, CPU
model, nproc) is recorded with the results.

Writes ``benchmarks/results/spacing.json``. Run as root:
``.venv/bin/python benchmarks/spacing.py [--rates 1000,10000,50000,100000] [--seconds 5]
[--pacing auto|qdisc|timer|burst] [--no-trafgen] [--only-exponential]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wire_tap import (  # noqa: E402
    PACING_CHOICES,
    RESULTS,
    TGEN,
    Lab,
    Tap,
    find_keys,
    gap_stats,
    host_facts,
    interrupt_on_signals,
    lab_profile,
    pcap_times_ns,
    run_group,
    stop_group,
    stream_result,
    tgen_within,
    write_profile,
)

# lab.yaml's up stream: 02:74:67:00:00:01 -> 02:74:67:00:00:fe, 198.18.0.2:10000 -> 198.19.0.2:7
TRAFGEN_CFG = """cpu({cpu}): {{
  0x02, 0x74, 0x67, 0x00, 0x00, 0xfe,  0x02, 0x74, 0x67, 0x00, 0x00, 0x01,  c16(0x0800),
  0x45, 0x00, c16(46), c16(0), c16(0x4000), 64, 17, csumip(14, 33),
  198, 18, 0, 2,  198, 19, 0, 2,
  c16(10000), c16(7), c16(26), c16(0),
  fill(0x00, 18)
}}
"""
TRAFGEN_CPU = 0  # -t / -b modes send from CPU0 only (BASELINES.md)


def summarise(case: dict, t_ns, pps: float, sent: int | None, exponential: bool) -> dict:
    st = gap_stats(t_ns, pps, exponential)
    case["frames_sent"] = sent
    case["frames_seen"] = st["frames"]
    case["seen_over_sent"] = st["frames"] / sent if sent else None
    case["tap"] = st
    return case


def line(case: dict) -> str:
    st = case.get("tap") or {}
    head = f"{case['tool']:8s} {case.get('mode', ''):5s} {case['pps'] / 1e3:6.1f} kpps"
    if case.get("idt"):
        head += f" {case['idt']}"
    if "gap_us" not in st:
        return f"{head}: FAILED {case.get('why_invalid') or st.get('error')}"
    g = st["gap_us"]
    s = (f"{head}: seen {case['frames_seen']}/{case['frames_sent']}  rate {st['mean_rate_pps'] / 1e3:.2f} k  "
         f"gap p1/p10/p50/p90/p99 {g['p1']:.1f}/{g['p10']:.1f}/{g['p50']:.1f}/{g['p90']:.1f}/{g['p99']:.1f} us  "
         f"within 10 % {100 * st['within_10pct']:.1f} %")  # fmt: skip
    if "ks_exponential" in st:
        s += f"  KS {st['ks_exponential']:.3f}  rate err {st['mean_rate_error_pct']:+.2f} %"
    if case["tool"] == "tgen":
        tw = case.get("tgen_within_10pct")
        s += f"  tgen's own {'-' if tw is None else f'{100 * tw:.1f} %'}"
    return s


def tgen_case(lab: Lab, pps: float, a, idt: str | None, send_cpu: int, tap_cpu: int) -> dict:
    tag = f"tgen-{pps:g}-{idt or 'constant'}"
    prof = lab_profile(lab, pps=pps, seconds=a.seconds, pacing=a.pacing, idt=idt)
    path = write_profile(lab, tag, prof)
    out, pcap = lab.tmp / f"{tag}.json", lab.tmp / f"{tag}.pcap"
    case = {"tool": "tgen", "mode": "", "pps": pps, "idt": idt or "constant",
            "pacing": a.pacing, "where": "lab d0", "send_cpu": send_cpu}  # fmt: skip
    tap = Tap(lab.dut, "d0", pcap, tap_cpu)
    try:
        cores = ["--cores", a.cores] if a.cores else []  # default: tgen's own placement
        r = run_group([TGEN, "run", str(path), "-d", f"{a.seconds:g}", *cores,
                       "--json", str(out), "--no-store", "--quiet"], timeout=a.seconds + 120)  # fmt: skip
    finally:
        case["tap_capture"] = tap.stop()
    case["rc"] = r.returncode
    if r.returncode not in (0, 1) or not out.exists():
        case["why_invalid"] = f"tgen run exit {r.returncode}: {r.stderr.strip()[-300:]}"
        case["tap"] = {}
        return case
    res = json.loads(out.read_text())
    s = stream_result(res, "up")
    summarise(case, pcap_times_ns(pcap), pps, int(s.get("tx_frames") or 0), idt == "exponential")
    case["tgen_rx_frames"] = s.get("rx_frames")
    case["tgen_spacing"] = s.get("spacing")
    tw = tgen_within(s)
    case["tgen_within_10pct"] = tw
    tap_w = case["tap"].get("within_10pct")
    case["tgen_minus_tap_points"] = (
        100.0 * (tw - tap_w) if tw is not None and tap_w is not None else None
    )
    case["tx_path"] = [w.get("tx_path") for w in res.get("workers", []) if isinstance(w, dict)]
    case["tgen_pacing_fields"] = {  # whatever the result says about pacing (new fields)
        p: v for p, v in find_keys(res, lambda k: "pacing" in k.lower()) if "stream_config" not in p
    }
    pcap.unlink(missing_ok=True)
    return case


class VethSink:
    """A veth pair a <-> b in two namespaces of its own; b only sinks (frames are not for it)."""

    def __init__(self, tag: str):
        t = tag + secrets.token_hex(2)
        self.ns_a, self.ns_b, self.if_a, self.if_b = f"{t}a", f"{t}b", f"{t}-a", f"{t}-b"

    def up(self) -> VethSink:
        try:
            for ns in (self.ns_a, self.ns_b):
                subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
            subprocess.run(["ip", "link", "add", self.if_a, "netns", self.ns_a, "type", "veth",
                            "peer", "name", self.if_b, "netns", self.ns_b],
                           check=True, capture_output=True)  # fmt: skip
            for ns, ifn in ((self.ns_a, self.if_a), (self.ns_b, self.if_b)):
                subprocess.run(["ip", "-n", ns, "link", "set", ifn, "up"], check=True,
                               capture_output=True)  # fmt: skip
        except Exception:
            self.down()
            raise
        return self

    def down(self) -> None:
        for ns in (self.ns_a, self.ns_b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def trafgen_once(tmp: Path, ns: str, ifn: str, tap_ns: str, tap_if: str, pps: float,
                 mode: str, seconds: float, qdisc: bool, tap_cpu: int) -> dict:  # fmt: skip
    tag = f"trafgen-{mode}-{pps:g}{'-q' if qdisc else ''}-{ns}"
    cfg, pcap = tmp / f"{tag}.cfg", tmp / f"{tag}.pcap"
    cfg.write_text(TRAFGEN_CFG.format(cpu=TRAFGEN_CPU))
    opt = ["-b", f"{pps:g}pps"] if mode == "rate" else ["-t", f"{round(1e9 / pps)}ns"]
    cmd = ["ip", "netns", "exec", ns, "trafgen", "--dev", ifn, "--conf", str(cfg),
           "--no-sock-mem", "-P", str(os.cpu_count()), "-Q", "-C", *opt] + (["-q"] if qdisc else [])  # fmt: skip
    case = {"tool": "trafgen", "mode": mode, "pps": pps, "option": " ".join(opt), "qdisc": qdisc,
            "send_cpu": TRAFGEN_CPU, "command": " ".join(cmd)}  # fmt: skip
    tap = Tap(tap_ns, tap_if, pcap, tap_cpu)
    p = None
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)  # fmt: skip
        t_end = time.monotonic() + seconds + 0.3
        while time.monotonic() < t_end and p.poll() is None:
            time.sleep(0.05)
        alive = p.poll() is None
        stop_group(p)  # the whole group: signalling only the parent hangs trafgen
    finally:
        if p is not None and p.poll() is None:
            stop_group(p)
        case["tap_capture"] = tap.stop()
    outp = p.stdout.read() if p.stdout else ""
    m = re.search(r"(\d+) packets outgoing", outp)
    sent = int(m.group(1)) if m else 0
    case.update(rc=p.returncode, alive_until_stopped=alive, output_tail=outp.strip()[-300:])
    why = []
    if not sent:
        why.append("trafgen reported no packets outgoing")
    if not alive:
        why.append(f"trafgen exited before it was stopped (rc {p.returncode})")
    failed = [ln for ln in outp.splitlines() if "fail" in ln.lower() or "error" in ln.lower()]
    if failed:
        why.append(failed[-1].strip()[:200])
    t = pcap_times_ns(pcap)
    if len(t) == 0:
        why.append("the tap saw no frames")
    pcap.unlink(missing_ok=True)
    if why:
        case.update(valid=False, why_invalid="; ".join(why), frames_sent=sent,
                    frames_seen=int(len(t)), tap={})  # fmt: skip
        return case
    case["valid"] = True
    return summarise(case, t, pps, sent, False)


def trafgen_case(lab: Lab, pps: float, mode: str, seconds: float, tap_cpu: int) -> dict:
    """In the lab (p0 -> tap on d0); failed: again with -q; failed: on a veth sink pair."""
    tries = []
    for qdisc in (False, True):
        c = trafgen_once(lab.tmp, lab.tester, "p0", lab.dut, "d0", pps, mode, seconds, qdisc,
                         tap_cpu)  # fmt: skip
        c["where"] = "lab d0"
        if c["valid"]:
            c["failed_attempts"] = tries
            return c
        tries.append({k: c[k] for k in ("option", "qdisc", "why_invalid", "output_tail")})
    pair = VethSink("wspv")
    try:
        pair.up()
        c = trafgen_once(lab.tmp, pair.ns_a, pair.if_a, pair.ns_b, pair.if_b, pps, mode,
                         seconds, False, tap_cpu)  # fmt: skip
    finally:
        pair.down()
    c["where"] = "veth_pair_sink (not the lab: trafgen failed into the lab's NAT path)"
    c["failed_attempts"] = tries
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--rates", default="1000,10000,50000,100000", help="pps, comma-separated")
    ap.add_argument("--seconds", type=float, default=5.0, help="per case (default 5)")
    ap.add_argument("--pacing", choices=PACING_CHOICES,
                    help="write 'pacing: X' on p0 of tgen's profile (default: leave it out)")  # fmt: skip
    ap.add_argument("--no-trafgen", action="store_true", help="tgen's cases only")
    ap.add_argument("--only-exponential", action="store_true",
                    help="only tgen's exponential case (10 kpps)")  # fmt: skip
    ap.add_argument("--exponential-pps", type=float, default=10000.0)
    ap.add_argument("--trafgen-modes", default="rate,gap",
                    help="trafgen's options to use: rate (-b), gap (-t), comma-separated")  # fmt: skip
    ap.add_argument(
        "--cores",
        help="tgen run --cores (default: tgen's: the sender on the "
        "last core, a receive-only port's worker on core 0)",
    )
    ap.add_argument("--lab-args", default="",
                    help="more options for `tgen lab up`, e.g. '--rps-cpus 0' (RPS off: the "
                    "DUT's receive work stays on the sending core, no IPI per frame)")  # fmt: skip
    ap.add_argument("--out", default=str(RESULTS / "spacing.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    rates = [float(x) for x in a.rates.split(",") if x.strip()]
    modes = [m.strip() for m in a.trafgen_modes.split(",") if m.strip()]
    if any(m not in ("rate", "gap") for m in modes):
        ap.error("--trafgen-modes: rate and/or gap")
    ncpu = os.cpu_count() or 1
    send_cpu = ncpu - 1  # tgen's worker (tgen's default: the last cores)
    tap_cpu_tgen = 0 if send_cpu != 0 else min(1, ncpu - 1)
    tap_cpu_trafgen = 1 if ncpu > 1 else 0
    interrupt_on_signals()
    host = host_facts()
    lab = Lab("wsp", a.lab_args.split() or None)
    cases: list[dict] = []
    partial = False
    try:
        lab.up()
        if not a.only_exponential:
            for pps in rates:
                cases.append(tgen_case(lab, pps, a, None, send_cpu, tap_cpu_tgen))
                print(line(cases[-1]), flush=True)
        cases.append(tgen_case(lab, a.exponential_pps, a, "exponential", send_cpu, tap_cpu_tgen))
        print(line(cases[-1]), flush=True)
        if not a.no_trafgen and not a.only_exponential:
            for mode in modes:
                for pps in rates:
                    cases.append(trafgen_case(lab, pps, mode, a.seconds, tap_cpu_trafgen))
                    print(line(cases[-1]), flush=True)
    except KeyboardInterrupt:
        partial = True
        print("interrupted: writing what was measured", file=sys.stderr)
    finally:
        lab.down()
    doc = {
        "benchmark": "spacing",
        "issue": 30,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "partial": partial,
        "host": host,
        "setup": {
            "lab_prefix": lab.prefix,
            "lab_args": lab.extra,
            "seconds": a.seconds,
            "rates_pps": rates,
            "pacing": a.pacing,
            "frame": "64 B incl. FCS (60 B at the tap), UDP 198.18.0.2:10000 -> 198.19.0.2:7",
            "tap": "tcpdump -B 65536 --time-stamp-precision=nano on PREFIX-dut d0 (ingress), "
            "filter 'udp dst port 7', pinned with taskset",
            "tgen_send_cpu": send_cpu,
            "tgen_tap_cpu": tap_cpu_tgen,
            "trafgen_send_cpu": TRAFGEN_CPU,
            "trafgen_tap_cpu": tap_cpu_trafgen,
            "within_10pct": "share of gaps g with |g - 1/R| <= 0.1/R",
            "mean_rate": "(frames - 1) / (last - first capture time)",
        },
        "cases": cases,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 130 if partial else 0


if __name__ == "__main__":
    sys.exit(main())
