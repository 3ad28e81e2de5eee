"""What the ARP/ND/echo responder costs the receive path (issue 19, Must show 5).

Three TPACKET_V3 rings on the same veth end (p1 of a direct lab): one with the responder
on (``RxRing(respond=True)``: every block's unsigned ARP/ICMP/ICMPv6 frames are copied
out, then answered by :class:`~tgen_tui.worker.responder.Responder`), two with it off (``off`` and
``off_b``: their ratio is the A/A control, what two identical rings differ by here).
All receive the same frames. Each round sends ``--frames`` 64-byte signed test frames
into p0 (so both rings fill as at the full receive rate: every poll takes full blocks),
waits for the blocks to retire, then times ``poll()`` (plus the responder's answers) of
each ring, each ring first in turn. Two mixes: ``signed`` (test frames only: the
cost on the test-frame path) and ``arp_1_in_1000`` (one ARP request for a port address
every 1,000 frames: the responder's work included).

Figures: ns per received frame, best and median of ``--rounds``, and on/off ratios.
The machine is shared: compare the ratios of one run, not runs with each other. Records
``uptime``'s load average and the hostname. Root (a lab with prefix ``--prefix``, made
and removed here). Writes ``benchmarks/results/rx_responder_cost.json``.
Run: ``sudo .venv/bin/python benchmarks/rx_responder_cost.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# blocks retire when full or after this: long enough that a round's blocks are full (as at
# the full receive rate: ~8,000 frames of 64 B per 1 MiB block), not cut by the timer
RETIRE_MS = 250
sys.path.insert(0, str(ROOT))


def frames(n: int, arp_every: int) -> list[bytes]:
    from tgen_tui.packets.program import SIG_MAGIC
    from tgen_tui.worker.arpnd import BROADCAST, arp_frame, mac_bytes

    eth = mac_bytes("02:74:67:00:01:01") + mac_bytes("02:74:67:00:00:01") + b"\x08\x00"
    ip = bytes.fromhex("4500002e000040004011") + b"\0\0" + bytes([198, 18, 0, 2, 198, 19, 0, 2])
    udp = struct.pack("!HHHH", 10000, 7, 26, 0)
    out = []
    arp = arp_frame(1, mac_bytes("02:74:67:00:00:fe"), 0xC6120001, b"\0" * 6, 0xC6120002,
                    BROADCAST, [])  # fmt: skip
    for i in range(n):
        if arp_every and i % arp_every == arp_every - 1:
            out.append(arp)
            continue
        sig = struct.pack("<HHII", SIG_MAGIC, 0, i, 0)
        out.append(eth + ip + udp + b"\0" * (60 - 42 - 12) + sig)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--frames", type=int, default=60_000, help="frames per round")
    ap.add_argument("--prefix", default="i19b")
    ap.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "rx_responder_cost.json")
    )
    a = ap.parse_args()
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    from tgen_tui.lab import topology
    from tgen_tui.lab.config import LabConfig
    from tgen_tui.worker.arpnd import mac_bytes
    from tgen_tui.worker.netns import netns
    from tgen_tui.worker.responder import Responder
    from tgen_tui.worker.rxring import RxRing

    topology.up(LabConfig(prefix=a.prefix, topology="direct"))
    ns = f"{a.prefix}-tester"
    resp = Responder({"v4": [[0xC6120002, 0xC6120002]], "own4": 0xC6120002},
                     mac_bytes("02:74:67:00:00:01"))  # fmt: skip
    results: dict = {}
    try:
        with netns(ns):
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            tx.bind(("p0", 0))
            tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
            rings = {  # off_b: a second ring with the responder off, the A/A control
                "off": RxRing("p1", block_nr=64, retire_ms=RETIRE_MS),
                "on": RxRing("p1", block_nr=64, retire_ms=RETIRE_MS, respond=True),
                "off_b": RxRing("p1", block_nr=64, retire_ms=RETIRE_MS),
            }
        for mix, every in (("signed", 0), ("arp_1_in_1000", 1000)):
            batch = frames(a.frames, every)
            per: dict[str, list[float]] = {k: [] for k in rings}
            got: dict[str, int] = dict.fromkeys(rings, 0)
            for rnd in range(a.rounds):
                for r in rings.values():
                    r.poll()
                    r.ctl.clear()
                for f in batch:
                    while True:
                        try:
                            tx.send(f)
                            break
                        except (BlockingIOError, OSError):  # ENOBUFS: the queue is full
                            time.sleep(0.0002)
                time.sleep(RETIRE_MS / 1000 + 0.05)  # every block retired
                names = list(rings)
                order = names[rnd % 3 :] + names[: rnd % 3]  # each ring first, in turn
                for name in order:
                    r = rings[name]
                    t0 = time.perf_counter_ns()
                    b = r.poll()
                    if r.ctl:
                        for fr, v in r.ctl:
                            resp.answer(fr, v)
                        r.ctl.clear()
                    dt = time.perf_counter_ns() - t0
                    if len(b):
                        per[name].append(dt / len(b))
                        got[name] += len(b)
            results[mix] = {
                name: {
                    "ns_per_frame_best": round(min(v), 1),
                    "ns_per_frame_median": round(statistics.median(v), 1),
                    "frames": got[name],
                    "rounds": len(v),
                }
                for name, v in per.items()
            }
            results[mix]["on_over_off_best"] = round(
                results[mix]["on"]["ns_per_frame_best"] / results[mix]["off"]["ns_per_frame_best"],
                3,
            )
            results[mix]["off_b_over_off_best"] = round(
                results[mix]["off_b"]["ns_per_frame_best"]
                / results[mix]["off"]["ns_per_frame_best"],
                3,
            )
            results[mix]["on_over_off_median"] = round(
                results[mix]["on"]["ns_per_frame_median"]
                / results[mix]["off"]["ns_per_frame_median"],
                3,
            )
        tx.close()
        for r in rings.values():
            r.close()
    finally:
        topology.down(a.prefix)
    doc = {
        "benchmark": "rx_responder_cost",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "hostname": socket.gethostname(),
        "loadavg_start": load0,
        "cpus": os.cpu_count(),
        "frames_per_round": a.frames,
        "rounds": a.rounds,
        "answers": dict(resp.answered),
        "results": results,
        "note": "ns per received frame of RxRing.poll() (+ the responder's answers) on full "
        "rings; shared machine: compare the on/off ratios of this run only",
    }
    return _write(a.out, doc)


def _write(out: str, doc: dict) -> int:
    doc["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    Path(out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"results": doc["results"], "loadavg_end": doc["loadavg_end"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
