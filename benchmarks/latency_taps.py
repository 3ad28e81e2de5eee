"""tgen's latency against kernel taps on the same frames (issue 13, "Must show" 1 and 2).

Brings up a lab of its own (``tgen lab up --prefix P``, NAT44 DUT; ``--tbf`` passes a
token-bucket shaper to the DUT), captures with tcpdump at nanosecond precision on the
tester's p0 and p1 while ``tgen run profiles/lab.yaml`` runs (at each ``--rates`` scale:
lab.yaml sends 20 kfps per stream, so 1 and 5 give 20 and 100 kfps), then matches every
captured frame by its signature (stream, sequence number):

- tap latency: the receiving port's capture time minus the sending port's capture time
  (the DUT and the wire, as the kernel saw them). The ports are pinned to
  ``tx_path: sendmmsg``: AF_XDP frames would bypass the sending port's tap;
- send delay: the sending port's capture time minus the signature's timestamp (the
  tester's own send path; CLOCK_MONOTONIC, aligned to the capture clock once);
- tgen's figures: ``latency_ns`` of the run's result for the same stream, which come
  from the kernel's transmit timestamps of every K-th frame (``latency_every``) when the
  sender uses sendmmsg: the verdict compares them with the taps over the same frames
  (``tap_sampled_ns``; ``tap_ns`` is over every frame).

With ``--tx-path xdp`` (issue 37, "Must show" 2) the lab is made with ``--xdp`` (native
XDP_PASS on d0 and d1) and the ports send on ``tx_path: xdp``: its frames leave the
kernel's XDP path without passing the sending port's taps, so the sending tap is the
DUT's ingress (d0 for p0's stream, d1 for p1's): the tap latency is then the DUT and the
wire from there, and the send delay the stamp to the DUT's ingress. ``--lab-args`` adds
options to ``tgen lab up`` (``--rps-cpus 0``).

It reports min/p50/p99/p99.9/max of each and the verdict of issue 13's criteria: tgen's
p50 within max(10 µs, 10 %) of the tap p50, and its p99 within 25 % of the tap p99.
Writes ``benchmarks/results/latency_taps.json``. Run as root:
``.venv/bin/python benchmarks/latency_taps.py [--rates 1,5] [--duration 3] [--tbf 8mbit,20ms]``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
TGEN = str(ROOT / ".venv" / "bin" / "tgen")
SIG_MAGIC = 0x7467
SIG_LEN = 12


def read_pcap(path: str) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """{stream: (seq, capture time ns (realtime), signature ts u32)} of signed frames."""
    data = Path(path).read_bytes()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (0xA1B23C4D, 0xA1B2C3D4):
        raise ValueError(f"{path}: not a little-endian pcap")
    scale = 1 if magic == 0xA1B23C4D else 1000
    off, rows = 24, []
    n = len(data)
    while off + 16 <= n:
        sec, frac, incl, _orig = struct.unpack_from("<IIII", data, off)
        off += 16
        if incl >= SIG_LEN:
            mg, st, seq, ts = struct.unpack_from("<HHII", data, off + incl - SIG_LEN)
            if mg == SIG_MAGIC:
                rows.append((st, seq, sec * 1_000_000_000 + frac * scale, ts))
        off += incl
    out = {}
    if rows:
        a = np.array(rows, dtype=np.int64)
        for st in np.unique(a[:, 0]):
            r = a[a[:, 0] == st]
            out[int(st)] = (r[:, 1], r[:, 2], r[:, 3])
    return out


def pct(x: np.ndarray) -> dict:
    if len(x) == 0:
        return {}
    q = np.percentile(x, [0, 50, 99, 99.9, 100])
    return {k: float(v) for k, v in zip(("min", "p50", "p99", "p99_9", "max"), q, strict=True)}


def join(tx: tuple, rx: tuple, mono_to_rt: int, every: int = 0) -> dict:
    """Match one stream's frames by sequence number between the sending and receiving taps.

    ``every`` > 0: tgen took latency from kernel timestamps of the frames with
    ``seq % every == 0`` only; ``tap_sampled_ns`` is the taps' figure over those frames
    (the same frames as tgen's), ``tap_ns`` over all."""
    seq_t, t_t, sig_t = tx
    seq_r, t_r, _ = rx
    common, it, ir = np.intersect1d(seq_t, seq_r, assume_unique=False, return_indices=True)
    tap = t_r[ir] - t_t[it]
    mono_low = (t_t[it] - mono_to_rt) & 0xFFFFFFFF  # egress time on the signature's clock
    send = (mono_low - sig_t[it]) & 0xFFFFFFFF
    same = (common % every == 0) if every else np.ones(len(common), bool)
    return {"matched": int(len(common)), "sent_captured": int(len(seq_t)),
            "received_captured": int(len(seq_r)), "tap_ns": pct(tap),
            "sampled_every": every, "sampled_matched": int(same.sum()),
            "tap_sampled_ns": pct(tap[same]),
            "send_delay_ns": pct(send), "stamp_to_rx_ns": pct(send + tap)}  # fmt: skip


def verdict(tgen: dict, tap: dict) -> dict:
    if not tgen or not tap:
        return {"ok": False, "why": "no figures"}
    d50 = abs(tgen["p50"] - tap["p50"])
    lim50 = max(10_000.0, 0.10 * tap["p50"])
    d99 = abs(tgen["p99"] - tap["p99"]) / max(1.0, tap["p99"])
    return {"p50_diff_ns": d50, "p50_limit_ns": lim50, "p50_ok": d50 <= lim50,
            "p99_rel_diff": d99, "p99_ok": d99 <= 0.25, "ok": d50 <= lim50 and d99 <= 0.25}  # fmt: skip


def capture(ns: str, ifn: str, path: str) -> subprocess.Popen:
    p = subprocess.Popen(
        ["ip", "netns", "exec", ns, "tcpdump", "-i", ifn, "-n", "-s", "128", "-B", "131072",
         "--time-stamp-precision=nano", "-w", path, "udp"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    line = p.stderr.readline()  # "listening on ..."
    if "listening" not in line:
        p.kill()
        raise RuntimeError(f"tcpdump on {ifn}: {line.strip()}")
    return p


def stop_capture(p: subprocess.Popen) -> str:
    time.sleep(0.3)
    os.killpg(p.pid, signal.SIGINT)
    p.wait(10)
    return " / ".join(ln.strip() for ln in p.stderr.read().splitlines() if "packets" in ln)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument(
        "--rates", default="1,5", help="rate scales of profiles/lab.yaml (20 kfps each)"
    )
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--tbf", help="DUT shaper, e.g. 8mbit,20ms (tgen lab up --tbf)")
    ap.add_argument("--tx-path", choices=("sendmmsg", "xdp"), default="sendmmsg")
    ap.add_argument("--lab-args", default="", help="more options for tgen lab up")
    ap.add_argument("--out", default=None,
                    help="default benchmarks/results/latency_taps.json (_xdp with --tx-path xdp)")  # fmt: skip
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root", file=sys.stderr)
        return 3
    from tx_vs_trafgen import host_facts

    xdp = a.tx_path == "xdp"
    name = "latency_taps_xdp.json" if xdp else "latency_taps.json"
    a.out = a.out or str(ROOT / "benchmarks" / "results" / name)

    prefix = "wlt" + secrets.token_hex(2)
    up = [TGEN, "lab", "up", "--prefix", prefix] + (["--tbf", a.tbf] if a.tbf else [])
    up += (["--xdp"] if xdp else []) + a.lab_args.split()
    subprocess.run(up, check=True, capture_output=True)
    tmp = Path(f"/tmp/{prefix}")
    tmp.mkdir()
    results = []
    try:
        prof = tmp / "lab.yaml"
        txt = (ROOT / "profiles" / "lab.yaml").read_text()
        txt = txt.replace("tgen-tester", f"{prefix}-tester").replace("tgen-dut", f"{prefix}-dut")
        # pinned to sendmmsg: AF_XDP frames (tx_path auto may pick it) bypass the egress tap
        prof.write_text(txt.replace("speed: 10G}", f"speed: 10G, tx_path: {a.tx_path}}}"))
        tester, dut = f"{prefix}-tester", f"{prefix}-dut"
        # where each port's frames are first seen: its own egress, or the DUT's ingress
        send_tap = {"p0": "d0", "p1": "d1"} if xdp else {"p0": "p0", "p1": "p1"}
        for scale in [float(x) for x in a.rates.split(",")]:
            taps = {"p0", "p1", *send_tap.values()}
            caps = {i: str(tmp / f"{i}-{scale:g}.pcap") for i in sorted(taps)}
            procs = {i: capture(dut if i.startswith("d") else tester, i, caps[i]) for i in caps}
            mono_to_rt = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
            out = tmp / f"run-{scale:g}.json"
            r = subprocess.run([TGEN, "run", str(prof), "-d", str(a.duration), "--rate-scale",
                                str(scale), "--json", str(out), "--no-store", "--quiet"],
                               capture_output=True, text=True)  # fmt: skip
            cap_stats = {i: stop_capture(p) for i, p in procs.items()}
            if r.returncode not in (0, 1):
                raise RuntimeError(f"tgen run failed ({r.returncode}): {r.stderr.strip()[-300:]}")
            res = json.loads(out.read_text())
            pk = {i: read_pcap(caps[i]) for i in caps}
            names = {v["index"]: k for k, v in res["stream_config"].items()}
            row = {"rate_scale": scale, "capture": cap_stats, "streams": {},
                   "tx_path": [w.get("tx_path") for w in res.get("workers", [])]}  # fmt: skip
            for idx, name in names.items():
                sc = res["stream_config"][name]
                src, dst = send_tap[sc["port"]], sc["rx_port"]
                if idx not in pk[src] or idx not in pk[dst]:
                    row["streams"][name] = {"error": "no captured frames"}
                    continue
                every = int(res["streams"][name].get("latency_every") or 0)
                j = join(pk[src][idx], pk[dst][idx], mono_to_rt, every)
                tl = res["streams"][name].get("latency_ns") or {}
                j["tgen_latency_ns"] = tl
                j["tgen_latency_source"] = res["streams"][name].get("latency_source")
                j["pps"] = sc["schedule"]["pps"]
                j["verdict"] = verdict(tl, j["tap_sampled_ns"])
                j["verdict_all_frames"] = verdict(tl, j["tap_ns"])
                row["streams"][name] = j
                print(f"x{scale:g} {name:5s} {j['pps']:>8.0f} fps  matched {j['matched']:>7d}  "
                      f"tap p50/p99 {j['tap_sampled_ns']['p50'] / 1e3:7.1f}/{j['tap_sampled_ns']['p99'] / 1e3:7.1f} us  "
                      f"(1 in {every or 1}, {j['sampled_matched']} frames; all "
                      f"{j['tap_ns']['p50'] / 1e3:.1f}/{j['tap_ns']['p99'] / 1e3:.1f})  "
                      f"tgen p50/p99 {tl.get('p50', 0) / 1e3:7.1f}/{tl.get('p99', 0) / 1e3:7.1f} us  "
                      f"send delay p50 {j['send_delay_ns']['p50'] / 1e3:7.1f} us  "
                      f"{'OK' if j['verdict']['ok'] else 'FAIL'}", flush=True)  # fmt: skip
            results.append(row)
            for c in caps.values():
                os.unlink(c)
    finally:
        subprocess.run([TGEN, "lab", "down", "--prefix", prefix], capture_output=True)
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()
    doc = {"benchmark": "latency_taps", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "host": host_facts(), "tbf": a.tbf, "duration_s": a.duration,
           "tx_path": a.tx_path, "lab_args": a.lab_args.split(),
           "sending_taps": send_tap,
           "criteria": "tgen p50 within max(10 us, 10 %) of the tap p50; p99 within 25 %",
           "runs": results}  # fmt: skip
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
