"""The DUT as a methodology run sees it: reset between trials, conntrack count, settings.

Two kinds: the lab's DUT namespace (flush with ``conntrack -F`` there, count from the
cached ``nf_conntrack_count`` reader) and a remote DUT, reset by a command the user gives
(``--dut-reset 'ssh root@dut conntrack -F'``) and read through ``--dut-ssh``. The DUT's
settings (kernel, conntrack max, buckets, timeouts, CPUs) go into every report.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass

from tgen_tui.diagnostics import BadInput, EnvironmentProblem

SYSCTLS = {
    "conntrack_max": "net.netfilter.nf_conntrack_max",
    "conntrack_buckets": "net.netfilter.nf_conntrack_buckets",
    "udp_timeout_s": "net.netfilter.nf_conntrack_udp_timeout",
    "udp_stream_timeout_s": "net.netfilter.nf_conntrack_udp_timeout_stream",
    "tcp_established_timeout_s": "net.netfilter.nf_conntrack_tcp_timeout_established",
}


@dataclass
class DutControl:
    """Reset, count and describe the DUT. ``netns``: the lab; ``ssh``/``reset_cmd``: remote."""

    netns: str | None = None
    ssh: str | None = None
    reset_cmd: str | None = None

    @property
    def can_count(self) -> bool:
        return bool(self.netns or self.ssh)

    def describe(self) -> str:
        if self.netns:
            return f"netns:{self.netns}"
        if self.ssh:
            return f"ssh:{self.ssh}"
        return "command" if self.reset_cmd else "none"

    # ------------------------------------------------------------------ actions
    def reset(self) -> float:
        """Empty the DUT's state table; return the seconds it took."""
        t = time.monotonic()
        if self.reset_cmd:
            cp = subprocess.run(
                self.reset_cmd, shell=True, capture_output=True, text=True, timeout=60
            )
            if cp.returncode != 0:
                raise EnvironmentProblem(
                    f"--dut-reset {self.reset_cmd!r} failed (exit {cp.returncode}): "
                    f"{cp.stderr.strip()[:200]}"
                )
        elif self.netns:
            from tgen_tui.lab.conntrack import flush

            flush(self.netns)
        elif self.ssh:
            self._ssh("conntrack -F")
        else:
            raise BadInput(
                "this test resets the DUT between trials: give the lab's dut.netns in the "
                "profile, --dut-netns, or --dut-reset 'COMMAND'"
            )
        return time.monotonic() - t

    def count(self) -> int | None:
        """Current conntrack entries, or None when the DUT cannot be read."""
        if self.netns:
            from tgen_tui.lab.conntrack import conntrack_count

            return conntrack_count(self.netns)
        if self.ssh:
            out = self._ssh("cat /proc/sys/net/netfilter/nf_conntrack_count")
            try:
                return int(out.strip())
            except ValueError:
                return None
        return None

    def _ssh(self, command: str) -> str:
        cp = subprocess.run(
            [*shlex.split(self.ssh or ""), command], capture_output=True, text=True, timeout=60
        )
        if cp.returncode != 0:
            raise EnvironmentProblem(
                f"DUT command over {self.ssh!r} failed: {cp.stderr.strip()[:200]}"
            )
        return cp.stdout

    # ------------------------------------------------------------------ settings
    def settings(self) -> dict:
        """Kernel, conntrack max/buckets/timeouts, CPU count (and the lab's impairments)."""
        out: dict = {"source": self.describe()}
        if self.netns:
            from tgen_tui.lab import commands

            out["kernel"] = os.uname().release
            out["cpus"] = os.cpu_count()
            try:
                got = commands.sysctl_get(self.netns, list(SYSCTLS.values()))
            except Exception as e:  # noqa: BLE001 - settings are informative, never fatal
                out["error"] = str(e)
                got = {}
            for k, key in SYSCTLS.items():
                out[k] = _int(got.get(key))
            out |= _lab_config(self.netns)
        elif self.ssh:
            keys = " ".join(SYSCTLS.values())
            try:
                text = self._ssh(f"uname -r; nproc; sysctl -n {keys}")
                vals = text.split()
                out["kernel"], out["cpus"] = vals[0], _int(vals[1])
                for k, v in zip(SYSCTLS, vals[2:], strict=False):
                    out[k] = _int(v)
            except (EnvironmentProblem, IndexError, subprocess.TimeoutExpired) as e:
                out["error"] = str(e)
        if self.reset_cmd:
            out["reset_command"] = self.reset_cmd
        return out


def _int(v) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _lab_config(netns: str) -> dict:
    """The lab's impairments (rate limit, drop, ct limit) from its state file, if it is ours."""
    if not netns.endswith("-dut"):
        return {}
    try:
        from tgen_tui.lab import topology

        cfg = topology.status(netns[: -len("-dut")]).get("config") or {}
    except Exception:  # noqa: BLE001 - informative only
        return {}
    keys = (
        "rate_limit_pps",
        "drop_percent",
        "ct_limit",
        "filter_rules",
        "tbf",
        "rps_cpus",
        "nat_ports",
    )
    return {"lab": {k: cfg.get(k) for k in keys}}


def timeout_warnings(settings: dict, test_seconds: float) -> list[str]:
    """Warn when a conntrack timeout is shorter than the test (entries would expire)."""
    out = []
    for k in ("udp_timeout_s", "udp_stream_timeout_s"):
        v = settings.get(k)
        if v is not None and v < test_seconds:
            out.append(
                f"DUT {k} is {v} s, shorter than this test's {test_seconds:.0f} s: entries can "
                "expire during a trial (raise it: tgen lab up --udp-timeout N)"
            )
    return out
