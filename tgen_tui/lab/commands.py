"""Running ``ip``/``nft``/``tc``/``sysctl`` and reading files inside a network namespace.

Everything goes through iproute2 and nftables binaries via :mod:`subprocess`; reading
``/proc/sys`` of a namespace is done without a process: a short-lived thread joins the
namespace with ``setns(2)`` (which affects that thread only) and opens the file there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.dut.conntrack import sysctl_path
from tgen_tui.worker.netns import NETNS_RUN_DIR, in_thread_netns

NETNS_DIR = NETNS_RUN_DIR

REQUIRED_TOOLS = ("ip", "nft", "tc")


class CommandFailed(EnvironmentProblem):
    """An external command exited non-zero; the message holds its stderr's first line."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        first = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")
        cmd = " ".join(argv[:6]) + (" ..." if len(argv) > 6 else "")
        super().__init__(f"`{cmd}` failed (exit {returncode}): {first or 'no message'}")
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


def check_environment(tools: Sequence[str] = REQUIRED_TOOLS) -> None:
    """Raise :class:`EnvironmentProblem` unless we are root and the tools are installed."""
    if os.geteuid() != 0:
        raise EnvironmentProblem("the lab needs root (network namespaces, nftables): run with sudo")
    for tool in tools:
        if shutil.which(tool) is None:
            raise EnvironmentProblem(f"`{tool}` is not installed (needed by the lab)")


def run(
    argv: Sequence[str], *, input: str | None = None, check: bool = True, netns: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command (inside ``netns`` via ``ip netns exec`` when given), capturing output."""
    full = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    try:
        cp = subprocess.run(full, input=input, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise EnvironmentProblem(f"`{full[0]}` is not installed") from e
    if check and cp.returncode != 0:
        raise CommandFailed(full, cp.returncode, cp.stderr)
    return cp


def ip_json(args: Sequence[str], netns: str | None = None) -> list[dict]:
    """Run ``ip -j ARGS`` (in ``netns``) and return the parsed JSON list."""
    argv = ["ip", "-j", *(["-n", netns] if netns else []), *args]
    out = run(argv).stdout.strip()
    return json.loads(out) if out else []


# ---------------------------------------------------------------- namespaces


def netns_exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, name))


def netns_list() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def netns_add(name: str) -> None:
    if not netns_exists(name):
        run(["ip", "netns", "add", name])


def netns_delete(name: str) -> None:
    if netns_exists(name):
        run(["ip", "netns", "delete", name], check=False)


# ---------------------------------------------------------------- setns from a thread


def in_netns(netns: str, fn, *args):
    """Call ``fn(*args)`` in a fresh thread that has joined ``netns`` (see
    :func:`tgen_tui.worker.netns.in_thread_netns`, the one implementation)."""
    return in_thread_netns(netns, fn, *args)


def _write_files(values: dict[str, str]) -> None:
    for path, value in values.items():
        with open(path, "w") as f:
            f.write(value)


def sysctl_set(netns: str | None, values: dict[str, object]) -> None:
    """Write sysctls in ``netns`` (or the current namespace) without starting a process."""
    if not values:
        return
    files = {sysctl_path(k): f"{v}\n" for k, v in values.items()}
    try:
        if netns is None:
            _write_files(files)
        else:
            in_netns(netns, _write_files, files)
    except OSError as e:
        where = f" in namespace {netns}" if netns else ""
        raise EnvironmentProblem(
            f"cannot set {e.filename or 'a sysctl'}{where}: {e.strerror}"
        ) from e


def write_sys_files(netns: str, values: dict[str, str]) -> None:
    """Write ``/sys/...`` files inside ``netns`` (``ip netns exec`` remounts sysfs for it)."""
    if not values:
        return
    script = " && ".join(f"echo {v} > {p}" for p, v in values.items())
    run(["sh", "-c", script], netns=netns)


def read_sys_files(netns: str, paths: Sequence[str]) -> dict[str, str | None]:
    """Read ``/sys/...`` files inside ``netns``, one process for all of them."""
    if not paths:
        return {}
    script = "; ".join(f"printf '%s\\n' \"$(cat {p} 2>/dev/null || echo -)\"" for p in paths)
    cp = run(["sh", "-c", script], netns=netns, check=False)
    lines = cp.stdout.splitlines()
    out: dict[str, str | None] = {}
    for i, p in enumerate(paths):
        v = lines[i].strip() if i < len(lines) else "-"
        out[p] = None if v in ("-", "") else v
    return out


def read_global(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def write_global(path: str, value: object) -> bool:
    """Write a global /proc or /sys file from this (initial) namespace; False if not writable."""
    try:
        with open(path, "w") as f:
            f.write(f"{value}\n")
        return True
    except OSError:
        return False
