"""Traffic shapes on the wire (issue 32): a stepped rate, and the drawn inter-departure laws,
against an independent tap.

Brings up a lab of its own (``tgen lab up --prefix shpXXXX``, NAT44 DUT) and captures with
tcpdump (``--time-stamp-precision=nano``, pinned to the core the sender does not use) on the
DUT's ingress d0, while tgen sends lab.yaml's ``up`` stream alone (the worker pinned to the
last core):

- **steps** (Must show 1): ``shape: [{rate: 10kpps, for: 3s}, {rate: 50kpps, for: 3s},
  {rate: 20kpps, for: 3s}]`` with ``--ndjson``: each step's rate from the NDJSON (the
  stream's tx counter over the step's middle second, between the samples nearest its
  edges) and from the tap (frames seen in that second), against the step's rate; tx, rx
  and lost from the JSON result against the integral of the shape (240,000 frames).
- **laws** (Must show 2): ``idt: {dist: gamma, shape: 3}`` (and weibull 1.5, lognormal
  0.5, cauchy 0.1) at 20 kpps for ``--law-seconds``, seed 7: the Kolmogorov-Smirnov
  distance of the tap's gaps from the law (SciPy's distribution, mean 1/rate, the cauchy
  truncated to 0..2× the mean gap as tgen draws it), the same distance of tgen's own
  receive-side histogram (``spacing.ks`` in its result), and the mean rate error.
- **bursts** (Must show 4): 20 bursts of 1,000 frames at line rate every 50 ms: the tap's
  gaps inside the bursts and between them, and the stream's losses with their causes.

Every figure is a measurement of this host, not a pass/fail: the JSON records the host.
Writes ``benchmarks/results/rate_shape.json``. Run as root:
``.venv/bin/python benchmarks/rate_shape.py [--parts steps,bursts,laws] [--law-seconds 20]
[--pacing auto|qdisc|timer|burst]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wire_tap import (  # noqa: E402
    PACING_CHOICES,
    RESULTS,
    TGEN,
    Lab,
    Tap,
    host_facts,
    interrupt_on_signals,
    lab_profile,
    pcap_times_ns,
    run_group,
    stream_result,
    write_profile,
)

STEPS = [(10_000, 3.0), (50_000, 3.0), (20_000, 3.0)]
LAWS = [("gamma", "shape", 3.0), ("weibull", "shape", 1.5), ("lognormal", "sigma", 0.5),
        ("cauchy", "scale", 0.1)]  # fmt: skip


def _send(lab: Lab, tag: str, prof: dict, seconds: float, cpus: tuple[int, int],
          ndjson: bool = False) -> tuple[dict, np.ndarray, list[dict], dict]:  # fmt: skip
    """Run tgen with a tap on d0: (the JSON result, the tap's stamps in ns, the NDJSON
    samples, the tap's counters)."""
    path = write_profile(lab, tag, prof)
    out, pcap, nd = lab.tmp / f"{tag}.json", lab.tmp / f"{tag}.pcap", lab.tmp / f"{tag}.ndjson"
    cmd = [TGEN, "run", str(path), "-d", f"{seconds:g}", "--cores", str(cpus[0]), "--json",
           str(out), "--no-store", "--quiet"] + (["--ndjson", str(nd)] if ndjson else [])  # fmt: skip
    tap = Tap(lab.dut, "d0", pcap, cpus[1])
    try:
        r = run_group(cmd, timeout=seconds + 120)
    finally:
        tap_counts = tap.stop()
    if r.returncode not in (0, 1) or not out.exists():
        raise RuntimeError(f"tgen run exit {r.returncode}: {r.stderr.strip()[-300:]}")
    snaps = [json.loads(x) for x in nd.read_text().splitlines()] if ndjson else []
    t = pcap_times_ns(pcap)
    pcap.unlink(missing_ok=True)
    return json.loads(out.read_text()), t, snaps, tap_counts


def _ndjson_rate(snaps: list[dict], lo: float, hi: float) -> float | None:
    """The up stream's tx rate between the samples nearest ``lo`` and ``hi`` (run time, s)."""
    pts = [(s["t"], s["streams"]["up"]["tx_frames"]) for s in snaps
           if "seq" in s and "up" in s.get("streams", {})]  # fmt: skip
    if len(pts) < 2:
        return None
    a = min(pts, key=lambda p: abs(p[0] - lo))
    b = min(pts, key=lambda p: abs(p[0] - hi))
    return (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else None


def steps_case(lab: Lab, a, cpus: tuple[int, int]) -> dict:
    prof = lab_profile(lab, pacing=a.pacing)
    up = prof["streams"][0]
    up.pop("rate", None)
    up["shape"] = [{"rate": f"{r}pps", "for": f"{d:g}s"} for r, d in STEPS]
    total_s = sum(d for _, d in STEPS)
    res, t, snaps, tap_counts = _send(lab, "steps", prof, total_s + 2, cpus, ndjson=True)
    s = stream_result(res, "up")
    want = int(sum(r * d for r, d in STEPS))
    steps, start = [], 0.0
    t0 = snaps[0].get("t0_s") if snaps else None
    tap0 = t[0] if len(t) else 0
    for r, d in STEPS:
        lo, hi = start + d / 2 - 0.5, start + d / 2 + 0.5
        nd = _ndjson_rate(snaps, lo, hi)
        seen = int(np.sum((t >= tap0 + lo * 1e9) & (t < tap0 + hi * 1e9)))
        steps.append({
            "asked_pps": r, "window_s": [lo, hi],
            "ndjson_pps": nd, "ndjson_error_pct": 100 * (nd - r) / r if nd else None,
            "tap_pps": seen, "tap_error_pct": 100 * (seen - r) / r,
        })  # fmt: skip
        start += d
    return {
        "part": "steps", "pacing": a.pacing, "steps": steps,
        "integral_frames": want, "tx_frames": s.get("tx_frames"), "rx_frames": s.get("rx_frames"),
        "lost": s.get("lost"), "tx_equals_integral": s.get("tx_frames") == want,
        "tap_frames": int(len(t)), "tap_capture": tap_counts, "t0": t0,
        "tap_clock_note": "tap windows are from the tap's first frame (the shape's frame 0)",
    }  # fmt: skip


def bursts_case(lab: Lab, a, cpus: tuple[int, int]) -> dict:
    """Must show 4: bursts of 1,000 frames at line rate every 50 ms, 20 bursts: the tap's
    gaps inside the bursts and between them, and where the losses went."""
    prof = lab_profile(lab, pacing=a.pacing)
    up = prof["streams"][0]
    up.pop("rate", None)
    up["mode"] = {"type": "multi_burst", "frames": 1000, "every": "50ms", "at": "line",
                  "bursts": 20}  # fmt: skip
    res, t, _, tap_counts = _send(lab, "bursts", prof, 2.0, cpus)
    s = stream_result(res, "up")
    gaps_us = np.diff(np.sort(t)) / 1e3
    between = gaps_us[gaps_us > 10_000]
    inside = gaps_us[gaps_us <= 10_000]
    return {
        "part": "bursts", "pacing": a.pacing, "tx_frames": s.get("tx_frames"),
        "rx_frames": s.get("rx_frames"), "lost": s.get("lost"),
        "loss_causes": s.get("loss_causes"), "tap_frames": int(len(t)),
        "tap_capture": tap_counts,
        "gaps_over_10ms": int(len(between)),
        "gap_between_bursts_ms_p50": float(np.median(between) / 1e3) if len(between) else None,
        "gap_inside_burst_us": {
            q: float(np.percentile(inside, v)) for q, v in (("p50", 50), ("p99", 99))
        } if len(inside) else None,
        "tgen_spacing": s.get("spacing"),
    }  # fmt: skip


def _law_cdf(law: str, p: float, mean: float):
    from scipy import stats

    if law == "gamma":
        return stats.gamma(p, scale=mean / p).cdf
    if law == "weibull":
        return stats.weibull_min(p, scale=mean / math.gamma(1 + 1 / p)).cdf
    if law == "lognormal":
        return stats.lognorm(p, scale=math.exp(math.log(mean) - p * p / 2)).cdf
    c = stats.cauchy(loc=mean, scale=p * mean)
    lo, hi = c.cdf(0.0), c.cdf(2 * mean)
    return lambda x: (np.clip(c.cdf(x), lo, hi) - lo) / (hi - lo)


def law_case(lab: Lab, a, law: str, key: str, p: float, cpus: tuple[int, int]) -> dict:
    from scipy import stats

    pps = 20_000.0
    prof = lab_profile(lab, pps=pps, pacing=a.pacing)
    prof["seed"] = 7
    prof["streams"][0]["idt"] = {"dist": law, key: p}
    res, t, _, tap_counts = _send(lab, f"law-{law}", prof, a.law_seconds, cpus)
    s = stream_result(res, "up")
    gaps = np.diff(np.sort(t)) / 1e9
    out = {"part": "laws", "law": law, key: p, "pps": pps, "seconds": a.law_seconds,
           "pacing": a.pacing, "tx_frames": s.get("tx_frames"), "tap_frames": int(len(t)),
           "tap_capture": tap_counts, "tgen_ks": (s.get("spacing") or {}).get("ks")}  # fmt: skip
    if len(gaps) > 10:
        span = (t.max() - t.min()) / 1e9
        rate = (len(t) - 1) / span
        out.update(
            tap_ks=float(stats.kstest(gaps, _law_cdf(law, p, 1 / pps)).statistic),
            tap_mean_rate_pps=rate,
            tap_mean_rate_error_pct=100 * (rate - pps) / pps,
            tap_gap_us_p50=float(np.percentile(gaps, 50) * 1e6),
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--parts", default="steps,bursts,laws", help="steps, bursts and/or laws")
    ap.add_argument("--law-seconds", type=float, default=20.0, help="per law (default 20)")
    ap.add_argument("--pacing", choices=PACING_CHOICES, help="pacing: X on p0 (default: left out)")
    ap.add_argument("--out", default=str(RESULTS / "rate_shape.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 3
    parts = {x.strip() for x in a.parts.split(",") if x.strip()}
    ncpu = os.cpu_count() or 1
    cpus = (ncpu - 1, 0 if ncpu > 1 else 0)
    interrupt_on_signals()
    lab = Lab("shp")
    cases: list[dict] = []
    partial = False
    try:
        lab.up()
        if "steps" in parts:
            cases.append(steps_case(lab, a, cpus))
            print(json.dumps(cases[-1]["steps"]), cases[-1]["tx_frames"], flush=True)
        if "bursts" in parts:
            cases.append(bursts_case(lab, a, cpus))
            c = cases[-1]
            print({k: c.get(k) for k in ("tx_frames", "lost", "gaps_over_10ms",
                                         "gap_between_bursts_ms_p50", "gap_inside_burst_us")},
                  flush=True)  # fmt: skip
        if "laws" in parts:
            for law, key, p in LAWS:
                cases.append(law_case(lab, a, law, key, p, cpus))
                c = cases[-1]
                print(law, {k: c.get(k) for k in ("tap_ks", "tgen_ks", "tap_mean_rate_error_pct")},
                      flush=True)  # fmt: skip
    except KeyboardInterrupt:
        partial = True
        print("interrupted: writing what was measured", file=sys.stderr)
    finally:
        lab.down()
    doc = {"benchmark": "rate_shape", "issue": 32, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "partial": partial, "host": host_facts(),
           "setup": {"lab_prefix": lab.prefix, "send_cpu": cpus[0], "tap_cpu": cpus[1],
                     "tap": "tcpdump --time-stamp-precision=nano on PREFIX-dut d0 ingress"},
           "cases": cases}  # fmt: skip
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 130 if partial else 0


if __name__ == "__main__":
    sys.exit(main())
