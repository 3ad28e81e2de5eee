"""The lab's user-space delay line: forward frames between two interfaces, late and lossy.

This kernel has no netem, so ``tgen lab up --delay 20ms --loss 1%`` runs this process in
the lab's middlebox namespace next to the DUT (started by :mod:`.middlebox`). It reads every frame arriving on
interface A or B with an AF_PACKET socket, drops ``loss`` % of them at random, and sends
each survivor out of the other interface ``delay`` after the kernel received it (its
SO_TIMESTAMPNS stamp, so the process's own wake-up latency is not added). The delay is
constant, so each direction is a FIFO.

``PACKET_VNET_HDR`` keeps the veth's segmentation and checksum offload intact: a 64 KB
TCP super-frame comes in with its virtio-net header and goes out with the same header, so
the kernel segments it and fills the checksum after the delay.

It runs at SCHED_FIFO priority when allowed (it only sleeps in poll, never spins), and
waits in select (microsecond timeouts), and writes its counters and the measured hold times (kernel receive to send) as JSON to
``--stats`` once a second. Stdlib only. Meant for the rates of USERS.md section 4
(up to about 10 Mbit/s); it touches every frame in Python.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
BUFSZ = 65536 + 64


def _open(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((ifname, ETH_P_ALL))
    s.setblocking(False)
    return s


def _rx_stamp(anc: list) -> int | None:
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data)
            return sec * 1_000_000_000 + nsec
    return None


class Stats:
    def __init__(self) -> None:
        self.forwarded = [0, 0]
        self.dropped = [0, 0]
        self.send_errors = 0
        self.holds_us: collections.deque[float] = collections.deque(maxlen=4096)

    def doc(self, delay_s: float, loss_pct: float) -> dict:
        h = sorted(self.holds_us)

        def q(p: float) -> float | None:
            return round(h[min(len(h) - 1, int(p * len(h)))], 1) if h else None

        return {
            "pid": os.getpid(),
            "delay_ms": delay_s * 1e3,
            "loss_pct": loss_pct,
            "forwarded": {"a_to_b": self.forwarded[0], "b_to_a": self.forwarded[1]},
            "dropped": {"a_to_b": self.dropped[0], "b_to_a": self.dropped[1]},
            "send_errors": self.send_errors,
            "hold_us": {"n": len(h), "min": q(0.0), "p50": q(0.5), "p99": q(0.99), "max": q(1.0)},
            "updated": time.time(),
        }


def _write_stats(path: str | None, stats: Stats, delay: float, loss: float) -> None:
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats.doc(delay, loss), f)
    os.replace(tmp, path)


def run(
    a: str, b: str, delay: float, loss: float, seed: int | None, stats_path: str | None
) -> None:
    socks = [_open(a), _open(b)]
    queues: list[collections.deque] = [collections.deque(), collections.deque()]
    rng = random.Random(seed)
    p = loss / 100.0
    delay_ns = int(delay * 1e9)
    stats = Stats()
    by_fd = {s.fileno(): i for i, s in enumerate(socks)}
    fds = list(by_fd)
    next_stats = time.monotonic()
    while True:
        now = time.time_ns()
        heads = [q[0][0] for q in queues if q]
        timeout = max(0.0, (min(heads) - now) / 1e9) if heads else 0.25
        # select: microsecond timeouts (poll and epoll round up to whole milliseconds)
        ready, _, _ = select.select(fds, [], [], min(timeout, 0.25))
        for fd in ready:
            i = by_fd[fd]
            s = socks[i]
            for _ in range(256):
                try:
                    data, anc, _flags, _addr = s.recvmsg(BUFSZ, 64)
                except BlockingIOError:
                    break
                if p > 0 and rng.random() < p:
                    stats.dropped[i] += 1
                    continue
                t = _rx_stamp(anc) or time.time_ns()
                queues[i].append((t + delay_ns, t, data))
        now = time.time_ns()
        for i, q in enumerate(queues):
            out = socks[1 - i]
            while q and q[0][0] <= now:
                _, t_rx, data = q.popleft()
                try:
                    out.send(data)
                except OSError:
                    stats.send_errors += 1
                    continue
                stats.forwarded[i] += 1
                stats.holds_us.append((time.time_ns() - t_rx) / 1e3)
        if time.monotonic() >= next_stats:
            _write_stats(stats_path, stats, delay, loss)
            next_stats = time.monotonic() + 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tgen_tui.lab.delayline")
    ap.add_argument("--a", required=True, help="interface A")
    ap.add_argument("--b", required=True, help="interface B")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds, each way")
    ap.add_argument("--loss", type=float, default=0.0, help="percent dropped, each way")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--stats", help="JSON file for the counters (rewritten once a second)")
    ap.add_argument("--tag", help="label only (the lab prefix), so the process is findable")
    args = ap.parse_args(argv)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run(args.a, args.b, args.delay, args.loss, args.seed, args.stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
