"""The DUT as a methodology run sees it: reset between trials, conntrack count, settings.

Two kinds: a DUT namespace (flush with ``conntrack -F`` there, count from the cached
``nf_conntrack_count`` reader) and a remote DUT, reset by a command the user gives
(``--dut-reset 'ssh root@dut conntrack -F'``) and read through ``--dut-ssh``. The DUT's
settings (kernel, conntrack max, buckets, timeouts, CPUs) go into every report.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.dut import conntrack
from tgen_tui.dut.channel import DutChannel
from tgen_tui.dut.conntrack import SYSCTLS, int_or_none
from tgen_tui.dut.settings import read_description


@dataclass
class DutControl:
    """Reset, count and describe the DUT. ``netns``: the lab; ``ssh``/``reset_cmd``: remote."""

    netns: str | None = None
    ssh: str | None = None
    reset_cmd: str | None = None

    @property
    def channel(self) -> DutChannel | None:
        return DutChannel.of(self.netns, self.ssh)

    @property
    def can_count(self) -> bool:
        return bool(self.netns or self.ssh)

    def describe(self) -> str:
        ch = self.channel
        if ch is not None:
            return ch.source
        return "command" if self.reset_cmd else "none"

    # ------------------------------------------------------------------ actions
    def reset(self) -> float:
        """Empty the DUT's state table; return the seconds it took."""
        t = time.monotonic()
        ch = self.channel
        if self.reset_cmd:
            cp = subprocess.run(
                self.reset_cmd, shell=True, capture_output=True, text=True, timeout=60
            )
            if cp.returncode != 0:
                raise EnvironmentProblem(
                    f"--dut-reset {self.reset_cmd!r} failed (exit {cp.returncode}): "
                    f"{cp.stderr.strip()[:200]}"
                )
        elif ch is not None:
            conntrack.flush(ch, timeout=60)
        else:
            raise BadInput(
                "this test resets the DUT between trials: give the lab's dut.netns in the "
                "profile, --dut-netns, or --dut-reset 'COMMAND'"
            )
        return time.monotonic() - t

    def count(self) -> int | None:
        """Current conntrack entries, or None when the DUT cannot be read."""
        ch = self.channel
        if ch is None:
            return None
        return conntrack.count(ch)

    # ------------------------------------------------------------------ settings
    def settings(self) -> dict:
        """Kernel, conntrack max/buckets/timeouts, CPU count (and the lab's impairments)."""
        out: dict = {"source": self.describe()}
        ch = self.channel
        if ch is not None:
            try:
                if ch.netns:  # the lab's DUT is this host's kernel
                    out["kernel"], out["cpus"] = os.uname().release, os.cpu_count()
                else:
                    kernel, cpus = ch.check("uname -r; nproc", timeout=60).split()[:2]
                    out["kernel"], out["cpus"] = kernel, int_or_none(cpus)
                got = conntrack.read_sysctls(ch, list(SYSCTLS.values()))
            except (EnvironmentProblem, OSError, ValueError) as e:  # informative, never fatal
                out["error"] = str(e)
                got = {}
            for k, key in SYSCTLS.items():
                out[k] = int_or_none(got.get(key))
            desc = read_description(ch.netns) if ch.netns and "error" not in out else None
            if desc is not None and desc.lab is not None:
                out["lab"] = dict(desc.lab)
        if self.reset_cmd:
            out["reset_command"] = self.reset_cmd
        return out
