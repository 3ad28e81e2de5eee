"""Measure each candidate send path into a sink, and pick the fastest.

By default the frames go into a veth pair of its own, between two namespaces made for
this run (unique names, removed afterwards, even on errors), never into the DUT. The
peer sinks them: their destination MAC is nobody's, so the kernel drops them right
after counting them in ``rx_packets``. Each candidate runs in a fresh sender process
pinned to one CPU; its rate is the interface counter's delta over a window after a
warm-up. Candidates are interleaved (A B C, A B C, ...) so that a noisy neighbour
hurts them alike. A candidate's figure is its best round: other work only ever takes
rate away, so the least-disturbed round is the nearest to what the path can do (the
median is recorded too).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from tgen_tui.calibrate import iface

SINK_MAC = "02:00:00:00:00:02"  # locally administered, nobody's: the sink drops the frames

# (tx_path, batch): sendmmsg at a few batch sizes, the TX ring at a few flush sizes, and
# AF_XDP in copy mode (excluded from the choice with allow_xdp=False: see AUTO_PATHS)
CANDIDATES: tuple[tuple[str, int], ...] = (
    ("sendmmsg", 256),
    ("sendmmsg", 1024),
    ("sendmmsg", 2048),
    ("tx_ring", 1024),
    ("tx_ring", 4096),
    ("af_xdp", 256),
    ("af_xdp", 1024),
)
# AF_XDP bypasses the qdisc and the packet taps (tcpdump on the port sees none of its
# frames): `tgen calibrate --no-xdp` keeps `auto` to these
AUTO_PATHS = ("sendmmsg", "tx_ring")


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=20)


class SinkPair:
    """A veth pair between two fresh namespaces; frames sent on ``a`` sink on ``b``."""

    def __init__(self, prefix: str = "tgcal") -> None:
        tag = prefix + secrets.token_hex(3)
        self.ns_a, self.ns_b = f"{tag}a", f"{tag}b"
        self.if_a, self.if_b = f"{tag}-a", f"{tag}-b"

    def __enter__(self) -> SinkPair:
        try:
            for ns in (self.ns_a, self.ns_b):
                _sh("ip", "netns", "add", ns)
                for k in ("all", "default"):  # no IPv6 chatter (DAD, RS) into the counts
                    _sh("ip", "netns", "exec", ns, "sysctl", "-qw",
                        f"net.ipv6.conf.{k}.disable_ipv6=1")  # fmt: skip
            _sh("ip", "link", "add", self.if_a, "netns", self.ns_a, "type", "veth",
                "peer", "name", self.if_b, "netns", self.ns_b)  # fmt: skip
            for ns, ifn in ((self.ns_a, self.if_a), (self.ns_b, self.if_b)):
                _sh("ip", "-n", ns, "link", "set", ifn, "up")
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def down(self) -> None:
        for ns in (self.ns_a, self.ns_b):
            _sh("ip", "netns", "del", ns, check=False)


def sink_program(size: int = 64) -> dict:
    """IPv4/UDP ``size`` bytes with FCS, random ports, to the sink MAC (a program dict)."""
    from tgen_tui.packets.compile import compile_stream
    from tgen_tui.packets.program import program_to_dict
    from tgen_tui.profiles.models import Port, Stream

    s = Stream.model_validate(
        {
            "name": "calibrate",
            "port": "a",
            "eth": {"src": "02:00:00:00:00:01", "dst": SINK_MAC},
            "ipv4": {"src": "198.18.0.1", "dst": "198.18.0.2"},
            "udp": {
                "src_port": {"min": 1024, "max": 65535, "mode": "random"},
                "dst_port": {"min": 1, "max": 49151, "mode": "random"},
            },
            "size": size,
            "rate": {"pps": 1e9},
        }
    )
    return program_to_dict(compile_stream(s, 0, Port(interface="a"), seed=1))


@dataclass
class Row:
    """One candidate's figures."""

    tx_path: str
    max_batch: int
    kpps_runs: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kpps: float = 0.0  # best round
    kpps_median: float = 0.0
    best_for_path: bool = False
    eligible: bool = True  # may `auto` choose it

    @property
    def name(self) -> str:
        return f"{self.tx_path}/{self.max_batch}"


def run_sender(
    cfg: dict, counter, warm_s: float, seconds: float, timeout_s: float = 30.0
) -> tuple[float, dict]:
    """Start one sender, count ``counter()`` over a window after ``warm_s``: (pps, its report)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "tgen_tui.calibrate.sender"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        p.stdin.write(json.dumps({**cfg, "seconds": warm_s + seconds + 0.3}) + "\n")
        p.stdin.flush()
        first = p.stdout.readline()
        if not first or json.loads(first).get("event") != "ready":
            rep = json.loads(first) if first.startswith("{") else {}
            err = rep.get("error") or (p.stderr.read() or "").strip()[-300:] or "no output"
            return 0.0, {"error": err, "sent": 0}
        time.sleep(warm_s)
        c0, t0 = counter(), time.monotonic()
        time.sleep(seconds)
        c1, t1 = counter(), time.monotonic()
        line = p.stdout.readline()
        p.wait(timeout_s)
        rep = json.loads(line) if line.startswith("{") else {"error": "no report", "sent": 0}
        return (c1 - c0) / (t1 - t0), rep
    finally:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(5)


def measure(
    interface: str,
    netns: str | None,
    counter,
    *,
    candidates=CANDIDATES,
    rounds: int = 3,
    seconds: float = 1.0,
    warm_s: float = 0.5,
    cpu: int | None = None,
    progress=None,
) -> list[Row]:
    """Every candidate, interleaved ``rounds`` times; rows with their best round, best first."""
    prog = sink_program()
    rows = [Row(p, b) for p, b in candidates]
    for r in range(rounds):
        for row in rows:
            cfg = {"program": prog, "netns": netns, "interface": interface,
                   "tx_path": row.tx_path, "batch": row.max_batch, "cpu": cpu}  # fmt: skip
            pps, rep = run_sender(cfg, counter, warm_s, seconds)
            if rep.get("error") or not rep.get("sent") or pps <= 0:
                row.errors.append(rep.get("error") or f"sent {rep.get('sent', 0)} frames")
                pps = 0.0
            row.kpps_runs.append(pps / 1e3)
            if progress:
                progress(r, row, pps / 1e3)
    for row in rows:
        good = [x for x in row.kpps_runs if x > 0]
        row.kpps = max(good) if good and not row.errors else 0.0
        row.kpps_median = statistics.median(good) if good and not row.errors else 0.0
    rows.sort(key=lambda x: -x.kpps)
    seen: set[str] = set()
    for row in rows:
        if row.kpps > 0 and row.tx_path not in seen:
            row.best_for_path = True
            seen.add(row.tx_path)
    return rows


def calibrate(
    interface: str | None = None,
    netns: str | None = None,
    *,
    rounds: int = 3,
    seconds: float = 1.0,
    warm_s: float = 0.5,
    cpu: int | None = None,
    candidates=CANDIDATES,
    progress=None,
    allow_xdp: bool = True,
) -> dict:
    """Measure on ``interface`` (in ``netns``), or on a sink pair of its own when None.

    Returns the cache entry (``choice``, ``table``, host facts, how it was counted). On an
    interface of the user's, frames are counted by its ``tx_packets``.
    """
    from tgen_tui.calibrate import cache

    if cpu is None:
        cpu = max(os.sched_getaffinity(0))
    t_start = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    load_before = os.getloadavg()
    kw = dict(candidates=candidates, rounds=rounds, seconds=seconds, warm_s=warm_s, cpu=cpu,
              progress=progress)  # fmt: skip
    if interface is None:
        with SinkPair() as pair:
            drv = iface.driver(pair.if_a, pair.ns_a)
            rows = measure(pair.if_a, pair.ns_a,
                           lambda: iface.counters(pair.if_b, pair.ns_b)[0], **kw)  # fmt: skip
        where = {"sink": "own veth pair into a sink", "interface": None, "netns": None}
        counted = "rx_packets of the sink veth"
    else:
        drv = iface.driver(interface, netns)
        rows = measure(interface, netns, lambda: iface.counters(interface, netns)[1], **kw)
        where = {"sink": "user interface", "interface": interface, "netns": netns}
        counted = f"tx_packets of {interface}"
    for r in rows:
        r.eligible = r.tx_path in AUTO_PATHS or allow_xdp
    best = next((r for r in rows if r.eligible and r.kpps > 0), rows[0])
    if best.kpps <= 0:
        errs = "; ".join(sorted({e for r in rows for e in r.errors}))[:300]
        raise RuntimeError(f"no send path sent anything: {errs}")
    return {
        "measured_at": t_start,
        "host": cache.host_facts(),
        "driver": drv,
        **where,
        "cpu": cpu,
        "frame_bytes_with_fcs": 64,
        "counted_by": counted,
        "rounds": rounds,
        "seconds": seconds,
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "choice": {"tx_path": best.tx_path, "max_batch": best.max_batch},
        "allow_xdp": allow_xdp,
        "kpps": best.kpps,
        "table": [asdict(r) | {"name": r.name} for r in rows],
    }
