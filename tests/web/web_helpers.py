"""Helpers for the `tgen serve` tests: start a server process, read its URL, stop it."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tgen_tui.lab.naming import P0_MAC, P1_MAC

REPO = Path(__file__).resolve().parents[2]
URL_RE = re.compile(r"open (http://\S+)")


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    lines: list[str]

    @property
    def base(self) -> str:
        return self.url.split("?", 1)[0].rstrip("/")

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def output(self) -> str:
        """Everything the server printed (after it stopped)."""
        rest = self.proc.stdout.read() if self.proc.stdout else ""
        return "".join(self.lines) + (rest or "")


def tgen_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "tgen_tui", *args]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TGEN_SERVE_TOKEN"}
    env.update(extra)
    return env


def start_serve(*args: str, timeout: float = 20, env: dict | None = None) -> Served:
    """Run ``tgen serve ARGS`` (stdout+stderr merged) until it prints its URL."""
    proc = subprocess.Popen(
        tgen_argv("serve", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env=env or clean_env(),
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sel.select(timeout=0.5):
            if proc.poll() is not None:
                break
            continue
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = URL_RE.search(line)
        if m:
            return Served(proc, m.group(1), lines)
    proc.kill()
    proc.wait()
    raise AssertionError(f"tgen serve printed no URL: {''.join(lines)!r}")


def descendants(pid: int) -> list[int]:
    """Pids of every process below ``pid`` (from /proc, no psutil needed)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def lab_profile(prefix: str, pps: int = 2000) -> str:
    """One stream p0 -> p1 through the direct lab's veth pair, 198.18.0.0/15 addresses."""
    ns = f"{prefix}-tester"
    return f"""name: web
seed: 7
ports:
  p0: {{interface: p0, netns: {ns}}}
  p1: {{interface: p1, netns: {ns}}}
streams:
  - name: web-p0
    port: p0
    rx_port: p1
    eth: {{src: "{P0_MAC}", dst: "{P1_MAC}"}}
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp: {{src_port: {{min: 10000, max: 10063, mode: inc}}, dst_port: 7}}
    size: 64
    rate: {{pps: {pps}}}
"""


def tx_packets(prefix: str, interface: str = "p0") -> int:
    """The kernel's tx_packets of a tester port of lab ``prefix``."""
    out = subprocess.run(
        ["ip", "netns", "exec", f"{prefix}-tester", "cat",
         f"/sys/class/net/{interface}/statistics/tx_packets"],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    return int(out.stdout)
