"""A 1-million-frame capture against a synthetic stream of the same sizes (issue 34, Must show 4).

A pcap of ``--frames`` 64-byte IPv4/UDP frames (each its own source port, written here
with numpy, not scapy) is replayed from p0 of a direct lab (p0 <-> p1 veth, no DUT) at a
rate above what one core sends (``pacing: burst``), against the same lab sending a
synthetic 64-byte UDP stream with as many unique source ports. Per run and case: tgen's
own achieved send rate (tx frames over the run), the interface counter of p0, and the
peak RSS of every process of the run (``/usr/bin/time``-free: the kernel's ``VmHWM`` of
the tgen process and its workers, sampled while it runs). The figure is the ratio of the
replay's median rate to the synthetic stream's, with the templates' memory
(``frames x stride``) beside the RSS.

Writes ``benchmarks/results/replay_rate.json``. Run as root:
``.venv/bin/python benchmarks/replay_rate.py [--frames 1000000] [--seconds 4] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wire_tap import RESULTS, TGEN, Lab, host_facts, interrupt_on_signals  # noqa: E402


def write_capture(path: Path, n: int) -> None:
    """``n`` 64-byte (60 without FCS) UDP frames, source port 1024 + i mod 64000, 1 µs apart."""
    frame = bytearray(60)
    frame[0:12] = bytes.fromhex("0274670001010274670000 01".replace(" ", ""))
    frame[12:14] = b"\x08\x00"
    frame[14:34] = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 46, 0, 0, 64, 17, 0,
                               bytes([10, 0, 0, 2]), bytes([10, 1, 0, 2]))  # fmt: skip
    s = sum(struct.unpack("!10H", frame[14:34]))
    s = (s & 0xFFFF) + (s >> 16)
    frame[24:26] = struct.pack("!H", ~s & 0xFFFF)
    frame[34:42] = struct.pack("!HHHH", 0, 7, 26, 0)  # UDP checksum 0: none
    rec = np.zeros((n, 16 + 60), dtype=np.uint8)
    hdr = np.zeros((n, 4), dtype="<u4")
    t = np.arange(n, dtype=np.int64) * 1000
    hdr[:, 0], hdr[:, 1], hdr[:, 2], hdr[:, 3] = t // 1_000_000_000, t % 1_000_000_000, 60, 60
    rec[:, :16] = hdr.view(np.uint8).reshape(n, 16)
    rec[:, 16:] = np.frombuffer(bytes(frame), dtype=np.uint8)
    sport = (1024 + np.arange(n) % 64000).astype(">u2")
    rec[:, 16 + 34 : 16 + 36] = sport.view(np.uint8).reshape(n, 2)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        fh.write(rec.tobytes())


def profile(lab: Lab, seconds: float, replay: bool, frames: int) -> Path:
    src = (
        "    pcap: {file: big.pcap, loops: null}\n"
        '    rewrite: {ipv4: {"10.0.0.0/8": "198.18.0.0/15"}}\n'
        if replay
        else "    ipv4: {src: 198.18.0.2, dst: 198.19.0.2}\n"
        f"    udp: {{src_port: {{min: 1024, max: {1024 + min(frames, 64000) - 1}, mode: inc}}, "
        "dst_port: 7}\n    size: 64\n"
    )
    p = lab.tmp / ("replay.yaml" if replay else "synthetic.yaml")
    p.write_text(f"""
name: rate
duration: {seconds:g}s
ports:
  p0: {{interface: p0, netns: {lab.tester}, pacing: burst}}
  p1: {{interface: p1, netns: {lab.tester}}}
streams:
  - name: s
    port: p0
    eth: {{src: "02:74:67:00:00:01", dst: "02:74:67:00:01:01"}}
{src}    rate: {{pps: 5M}}
""")
    return p


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    kids = [int(x) for x in out.split()]
    return [pid] + [k for c in kids for k in _tree(c)]


def one_run(prof: Path, tmp: Path) -> dict:
    out = tmp / "r.json"
    out.unlink(missing_ok=True)
    p = subprocess.Popen([TGEN, "run", str(prof), "--json", str(out), "--no-store", "--quiet",
                          "--cores", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    peak: dict[int, int] = {}
    while p.poll() is None:
        for pid in _tree(p.pid):
            peak[pid] = max(peak.get(pid, 0), _hwm_kb(pid))
        time.sleep(0.2)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    doc = json.loads(out.read_text()) if out.exists() else {}
    s = doc.get("streams", {}).get("s", {})
    port = doc.get("ports", {}).get("p0", {})
    dur = doc.get("duration_s") or 0
    return {
        "rc": p.returncode,
        "stderr_tail": err.strip().splitlines()[-2:] if p.returncode else [],
        "tx_frames": s.get("tx_frames"),
        "if_tx_frames": port.get("if_tx_frames"),
        "duration_s": dur,
        "tx_pps": round(s.get("tx_frames", 0) / dur) if dur else None,
        "peak_rss_mb": {str(k): round(v / 1024, 1) for k, v in sorted(peak.items())},
        "peak_rss_sum_mb": round(sum(peak.values()) / 1024, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    interrupt_on_signals()
    lab = Lab("rrt", ["--topology", "direct"]).up()
    try:
        write_capture(lab.tmp / "big.pcap", args.frames)
        cases: dict[str, list] = {"replay": [], "synthetic": []}
        for _ in range(args.runs):  # interleaved: the host's drift hits both alike
            for name in cases:
                prof = profile(lab, args.seconds, name == "replay", args.frames)
                cases[name].append(one_run(prof, lab.tmp))
    finally:
        lab.down()
    med = {k: float(np.median([r["tx_pps"] or 0 for r in v])) for k, v in cases.items()}
    doc = {
        "benchmark": "replay_rate",
        "what": "tgen pcap: stream of N 64 B frames vs a synthetic 64 B stream, burst pacing, 1 core",
        "frames": args.frames,
        "seconds": args.seconds,
        "template_mb": round(args.frames * 96 / 2**20, 1),  # rows x stride (96 B for 60 B frames)
        "cases": cases,
        "median_tx_pps": med,
        "ratio_replay_to_synthetic": round(med["replay"] / med["synthetic"], 3)
        if med["synthetic"]
        else None,
        "host": host_facts(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "replay_rate.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("median_tx_pps", "ratio_replay_to_synthetic")}))
    for k, v in cases.items():
        print(k, [(r["tx_pps"], r["peak_rss_sum_mb"]) for r in v])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
