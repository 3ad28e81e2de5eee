"""The agent's watchdog: a small process that kills the host's workers when the engine is gone.

``python -m tgen_tui.cluster.watchdog --parent-pid AGENT --timeout S``, spawned by the
agent. It reads lines on stdin: ``pid N`` (a worker to guard), ``beat`` (the engine
called the agent just now). When no beat came for ``--timeout`` seconds, it SIGKILLs
every guarded worker that is still running (and keeps watching: a later beat re-arms
it). It runs in its own process because a Ray actor whose owner was SIGKILLed can stall
for many seconds before Ray removes it; the watchdog does not depend on the agent being
able to run. It dies with the agent (``PR_SET_PDEATHSIG``), whose workers die with it too.

Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
import time


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b") ", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tgen_tui.cluster.watchdog")
    ap.add_argument("--parent-pid", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args(argv)
    from tgen_tui.worker.kernel import PR_SET_PDEATHSIG, prctl

    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != args.parent_pid:
        return 3  # the agent died before the death signal was armed
    pids: set[int] = set()
    last = time.monotonic()
    fd = sys.stdin.fileno()
    buf = b""
    while True:
        r, _, _ = select.select([fd], [], [], 0.25)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                return 0  # the agent closed the pipe (shutdown)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                word, _, rest = line.strip().partition(b" ")
                if word == b"beat":
                    last = time.monotonic()
                elif word == b"pid" and rest.isdigit():
                    pids.add(int(rest))
        if pids and time.monotonic() - last > args.timeout:
            for pid in list(pids):
                if _ppid(pid) == args.parent_pid:  # still the agent's child: not a reused pid
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                pids.discard(pid)
            print(
                f"tgen watchdog: no call from the engine for {args.timeout:g} s: workers killed",
                file=sys.stderr,
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
