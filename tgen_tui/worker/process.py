"""The life of a worker process, the same for both kinds (frame and socket-flow workers):
its command line, the parent-death signal armed before anything else, SIGINT left to the
engine (it stops workers with commands), a 1 ns timer slack for precise pacing sleeps,
the pin to its core, the Hello, and a fatal error sent as an event instead of a silent
death. Standard library only (DESIGN rule 2)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from tgen_tui.worker import protocol as P
from tgen_tui.worker.kernel import PR_SET_TIMERSLACK, arm_parent_death, prctl
from tgen_tui.worker.protocol import EXIT_FATAL


class WorkerLoop(Protocol):
    """What :func:`run_worker` needs of a worker: emit events, report an error, run."""

    def emit(self, ev: P.Event) -> None: ...

    def error(self, message: str, **kw: Any) -> None: ...

    def run(self) -> int: ...


def pin(core: int, what: str) -> None:
    """Pin this process to ``core``; a failure names the worker and the core (the engine
    reports it and fails the worker's ports, rule 6)."""
    try:
        os.sched_setaffinity(0, {core})
    except OSError as e:
        raise OSError(e.errno, f"cannot pin the {what} to core {core}: {e.strerror}") from None


def run_worker(
    prog: str, doc: str | None, make: Callable[[int | None], WorkerLoop], what: str,
    argv: list[str] | None = None,
) -> int:  # fmt: skip
    """Parse ``--core``/``--parent-pid``, set the process up, and run the worker that
    ``make(core)`` returns; its exit code (protocol.EXIT_*)."""
    ap = argparse.ArgumentParser(prog=prog, description=doc)
    ap.add_argument("--core", type=int, default=None, help="the one CPU to pin this worker to")
    ap.add_argument("--parent-pid", type=int, default=None, help="exit unless this is our parent")
    args = ap.parse_args(argv)
    parent = args.parent_pid if args.parent_pid is not None else os.getppid()
    arm_parent_death(parent)
    if os.getppid() != parent:
        return EXIT_FATAL  # the parent died before we could arm the death signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the engine stops us with commands
    try:
        prctl(PR_SET_TIMERSLACK, 1)  # precise sleeps for pacing
    except OSError:
        pass
    w = make(args.core)
    try:
        if args.core is not None:
            pin(args.core, what)
        w.emit(P.Hello(pid=os.getpid(), core=args.core))
        return w.run()
    except Exception as e:  # noqa: BLE001 - report, never die silently
        try:
            w.error(f"{type(e).__name__}: {e}", fatal=True, traceback=traceback.format_exc())
        except OSError:
            print(traceback.format_exc(), file=sys.stderr)
        return EXIT_FATAL
