"""Helpers of the wire-spacing benchmarks (issue 30): a lab of their own, a tcpdump tap with
nanosecond stamps, pcap timestamps, gap statistics and the Kolmogorov-Smirnov distance.

Not a benchmark itself: ``spacing.py``, ``worker_cpu.py`` and ``spacing_rfc2544.py`` import it.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import re
import secrets
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
TGEN = str(ROOT / ".venv" / "bin" / "tgen")
RESULTS = ROOT / "benchmarks" / "results"
LAB_YAML = ROOT / "profiles" / "lab.yaml"
PACING_CHOICES = ("auto", "qdisc", "timer", "burst")


# ---------------------------------------------------------------------- host
def host_facts() -> dict:
    model = None
    with contextlib.suppress(OSError):
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                model = ln.split(":", 1)[1].strip()
                break
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    tv = ""
    if shutil.which("trafgen"):
        tv = subprocess.run(["trafgen", "-v"], capture_output=True, text=True).stdout
    return {
        "platform": platform.platform(),
        "kernel": platform.release(),
        "uname": " ".join(platform.uname()),
        "cpu_model": model,
        "nproc": int(nproc) if nproc.isdigit() else None,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "trafgen": tv.splitlines()[0] if tv else None,
        "loadavg_before": list(os.getloadavg()),
        "note": "2 cores shared with other sessions: compare cases of one run, not across runs",
    }


# ---------------------------------------------------------------------- lab
class Lab:
    """``tgen lab up --prefix P`` (NAT topology); ``down()`` removes it (idempotent)."""

    def __init__(self, tag: str, extra: list[str] | None = None):
        self.prefix = tag + secrets.token_hex(2)
        self.tester = f"{self.prefix}-tester"
        self.dut = f"{self.prefix}-dut"
        self.extra = extra or []
        self.tmp = Path(f"/tmp/{self.prefix}")
        self._up = False

    def up(self) -> Lab:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self._up = True  # even a half-made lab is torn down
        r = subprocess.run([TGEN, "lab", "up", "--prefix", self.prefix, *self.extra],
                           capture_output=True, text=True)  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"tgen lab up failed: {(r.stderr or r.stdout).strip()[-400:]}")
        return self

    def set(self, *args: str) -> str:
        r = subprocess.run([TGEN, "lab", "set", "--prefix", self.prefix, *args],
                           capture_output=True, text=True)  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"tgen lab set failed: {(r.stderr or r.stdout).strip()[-400:]}")
        return r.stdout

    def down(self) -> None:
        if self._up:
            subprocess.run([TGEN, "lab", "down", "--prefix", self.prefix], capture_output=True)
            for ns in (self.tester, self.dut):  # in case lab down could not
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            self._up = False
        shutil.rmtree(self.tmp, ignore_errors=True)

    def rx_packets(self, ns: str, ifn: str) -> int:
        import json

        out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "dev", ifn],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        return int(json.loads(out)[0]["stats64"]["rx"]["packets"])


def lab_profile(
    lab: Lab,
    *,
    pps: float | None = None,
    seconds: float | None = None,
    pacing: str | None = None,
    pacing_ports: tuple[str, ...] = ("p0",),
    streams: tuple[str, ...] = ("up",),
    idt: str | None = None,
) -> dict:
    """profiles/lab.yaml adapted to the lab's namespaces: the named streams only (their
    rate ``pps`` where given), and ``pacing: X`` on ``pacing_ports`` only when given (the
    field is new: an older tgen refuses it)."""
    prof = yaml.safe_load(LAB_YAML.read_text())
    for p in prof["ports"].values():
        p["netns"] = lab.tester
    if pacing:
        for name in pacing_ports:
            prof["ports"][name]["pacing"] = pacing
    prof["dut"]["netns"] = lab.dut
    prof["streams"] = [s for s in prof["streams"] if s["name"] in streams]
    for s in prof["streams"]:
        if pps is not None:
            s["rate"] = {"pps": pps}
        if idt:
            s["idt"] = {"dist": idt}
    if seconds is not None:
        prof["duration"] = f"{seconds:g}s"
    prof["name"] = f"{prof['name']}-{lab.prefix}"
    return prof


def write_profile(lab: Lab, name: str, prof: dict) -> Path:
    path = lab.tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    return path


def stream_result(res: dict, name: str) -> dict:
    """``streams`` of a run result: a dict by name, or a list of dicts with ``name``."""
    st = res.get("streams") or {}
    if isinstance(st, dict):
        return st.get(name) or {}
    for s in st:
        if isinstance(s, dict) and s.get("name") == name:
            return s
    return {}


def tgen_within(stream: dict) -> float | None:
    """tgen's own receive-side share ``spacing.within_10pct`` (0..1), or None if absent."""
    sp = stream.get("spacing")
    if isinstance(sp, dict) and sp.get("within_10pct") is not None:
        return float(sp["within_10pct"])
    return None


def find_keys(obj, pred, path="") -> list[tuple[str, object]]:
    """Every (path, value) in a JSON document whose key satisfies ``pred``."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            if pred(str(k)):
                out.append((p, v))
            out += find_keys(v, pred, p)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += find_keys(v, pred, f"{path}[{i}]")
    return out


# ---------------------------------------------------------------------- tap
class Tap:
    """tcpdump in namespace ``ns`` on ``ifn`` (ingress only): nanosecond stamps, 64 MiB buffer,
    pinned to ``cpu``."""

    def __init__(self, ns: str, ifn: str, path: Path, cpu: int, bpf: str = "udp dst port 7"):
        self.path, self.cpu, self.ns, self.ifn = path, cpu, ns, ifn
        self.p = subprocess.Popen(
            ["taskset", "-c", str(cpu), "ip", "netns", "exec", ns, "tcpdump", "-i", ifn, "-n",
             "-Q", "in", "-s", "128", "-B", "65536", "--time-stamp-precision=nano", "-w", str(path), bpf],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        line = self.p.stderr.readline()  # "listening on ..."
        if "listening" not in line:
            self.kill()
            raise RuntimeError(f"tcpdump on {ns}/{ifn}: {line.strip()}")
        self.stats: dict = {}

    def stop(self, linger: float = 1.5) -> dict:
        """SIGINT after ``linger`` s; returns tcpdump's counters (captured, received, dropped).

        libpcap's TPACKET_V3 ring hands a block over when it is full or after its 1 s
        timeout: a tcpdump stopped sooner loses the frames of the open block (captured <
        received by filter), so it lingers longer than that."""
        if self.p.poll() is None:
            time.sleep(linger)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGINT)
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()
        err = self.p.stderr.read() or ""
        st = {}
        for key, pat in (("captured", r"(\d+) packets? captured"),
                         ("received_by_filter", r"(\d+) packets? received by filter"),
                         ("dropped_by_kernel", r"(\d+) packets? dropped by kernel")):  # fmt: skip
            m = re.search(pat, err)
            st[key] = int(m.group(1)) if m else None
        st["complete"] = st["captured"] is not None and st["captured"] == st["received_by_filter"]
        st["cpu"] = self.cpu
        st["where"] = f"{self.ns}/{self.ifn}"
        self.stats = st
        return st

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.p.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.p.wait(5)


def pcap_times_ns(path: Path) -> np.ndarray:
    """Capture times (ns, CLOCK_REALTIME) of every record of a little-endian pcap file."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        return np.zeros(0, np.int64)
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (0xA1B23C4D, 0xA1B2C3D4):
        raise ValueError(f"{path}: not a little-endian pcap")
    scale = 1 if magic == 0xA1B23C4D else 1000
    off, n, out = 24, len(data), []
    unpack = struct.Struct("<IIII").unpack_from
    while off + 16 <= n:
        sec, frac, incl, _orig = unpack(data, off)
        out.append(sec * 1_000_000_000 + frac * scale)
        off += 16 + incl
    return np.array(out, dtype=np.int64)


# ---------------------------------------------------------------------- statistics
def ks_exponential(x: np.ndarray, mean: float) -> float:
    """Kolmogorov-Smirnov distance sup|F_n - F| of samples ``x`` from Exp(mean)."""
    x = np.sort(np.asarray(x, dtype=float))
    n = len(x)
    if n == 0:
        return math.nan
    f = 1.0 - np.exp(-np.clip(x, 0, None) / mean)
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))


def gap_stats(t_ns: np.ndarray, pps: float, exponential: bool = False) -> dict:
    """Gaps of the tap's stamps against the nominal gap 1/pps: percentiles (µs), the share
    within 10 % of nominal, the mean rate (frames - 1 over the span); for ``exponential``
    also the KS distance from Exp(1/pps) and the mean rate error."""
    t = np.sort(np.asarray(t_ns, dtype=np.int64))
    n = len(t)
    out: dict = {"frames": int(n), "nominal_gap_us": 1e6 / pps}
    if n < 3:
        out["error"] = f"only {n} frames at the tap"
        return out
    gaps_us = np.diff(t) / 1e3
    span_s = (t[-1] - t[0]) / 1e9
    rate = (n - 1) / span_s if span_s > 0 else math.nan
    nominal = 1e6 / pps
    q = np.percentile(gaps_us, [1, 10, 50, 90, 99])
    out.update(
        span_s=span_s,
        mean_rate_pps=rate,
        mean_rate_error_pct=100.0 * (rate - pps) / pps,
        gap_us={k: float(v) for k, v in zip(("p1", "p10", "p50", "p90", "p99"), q, strict=True)},
        gap_mean_us=float(gaps_us.mean()),
        within_10pct=float(np.mean(np.abs(gaps_us - nominal) <= 0.1 * nominal)),
        under_5us=float(np.mean(gaps_us < 5.0)),
    )
    if exponential:
        out["ks_exponential"] = ks_exponential(gaps_us, nominal)
    return out


# ---------------------------------------------------------------------- processes
def interrupt_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt, even where SIGINT was inherited ignored
    (a background job of a script), so the clean-up in ``finally`` always runs."""

    def raise_interrupt(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, raise_interrupt)
    signal.signal(signal.SIGTERM, raise_interrupt)


def stop_group(p: subprocess.Popen, sig=signal.SIGINT, timeout: float = 5.0) -> None:
    """Signal the whole process group (trafgen hangs if only its parent is signalled)."""
    if p.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, sig)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(5)


def run_group(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a session of its own; Ctrl-C or a timeout stops the whole group."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)  # fmt: skip
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        stop_group(p, signal.SIGINT, 10)
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)
