"""A blocking client for one worker process: for tests, benchmarks and calibration.

The engine drives workers with trio (:mod:`tgen_tui.engine.workers`); tools that only
need one worker and a few commands use this instead. Both speak the typed protocol of
:mod:`tgen_tui.worker.protocol`. Standard library only, like the worker itself.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

from tgen_tui.worker import protocol as P

FRAME_WORKER = "tgen_tui.worker"  # frame streams: AF_PACKET send paths, RX rings
FLOW_WORKER = "tgen_tui.worker.flows"  # socket flows: kernel TCP and UDP


def worker_argv(core: int | None = None, module: str = FRAME_WORKER) -> list[str]:
    """The command line of a worker process (``module``: :data:`FRAME_WORKER` or
    :data:`FLOW_WORKER`), pinned to ``core`` where given; it exits when this process (its
    parent) does."""
    argv = [sys.executable, "-m", module]
    if core is not None:
        argv += ["--core", str(core)]
    return argv + ["--parent-pid", str(os.getpid())]


def describe_exit(rc: int | None) -> str:
    """A worker's exit status in words: its exit code, or the signal that killed it."""
    if rc is None:
        return "unknown exit"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited with code {rc}"


def stderr_suffix(tail) -> str:
    """``": <last non-blank stderr line>"``, or "" where the worker wrote none."""
    lines = [x for x in tail if x.strip()]
    return f": {lines[-1].strip()}" if lines else ""


class WorkerError(RuntimeError):
    """The worker answered with an error event, or exited."""


class WorkerClient:
    """``python -m tgen_tui.worker`` as a subprocess, with a reader thread for its events."""

    def __init__(
        self, core: int | None = None, cwd: str | None = None, module: str = FRAME_WORKER
    ) -> None:
        self.p = subprocess.Popen(
            worker_argv(core, module),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self.q: queue.Queue[P.Event | dict | None] = queue.Queue()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            try:
                self.q.put(P.decode_event(line))
            except ValueError:
                self.q.put(P.decode(line))  # not a known event: hand it over raw
        self.q.put(None)  # EOF

    def send(self, msg: P.Command | None = None, /, **fields: object) -> None:
        """Send a typed command, or build one by name: ``send(cmd="start", ports=["a"])``.
        A dict-shaped command with unknown names is sent as it is (to test the worker's
        own error handling)."""
        if msg is None:
            name = fields.pop("cmd")
            try:
                msg = P.command(str(name), **fields)
            except (ValueError, TypeError):
                self._write(P.encode({"cmd": name, **fields}))
                return
        self._write(P.encode(msg))

    def _write(self, data: bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def expect(self, event: str, timeout: float = 10.0) -> P.Event:
        """Wait for the next event of kind ``event``; an error event raises (unless waited for)."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise WorkerError(f"no {event!r} event within {timeout} s")
            try:
                m = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if m is None:
                err = self.p.stderr.read().decode(errors="replace")[-2000:] if self.p.stderr else ""
                raise WorkerError(f"worker exited before {event!r}: {err}")
            kind = m.get("event")
            if kind == event:
                return m  # type: ignore[return-value]
            if kind == "error" and event != "error":
                raise WorkerError(f"worker error: {m.get('message')}")

    def close(self, timeout: float = 5.0) -> int | None:
        """Ask the worker to quit; kill it if it does not within ``timeout``."""
        if self.p.poll() is None:
            try:
                self.send(P.Quit())
                self.p.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait(timeout)
        return self.p.returncode


__all__ = [
    "FLOW_WORKER",
    "FRAME_WORKER",
    "WorkerClient",
    "WorkerError",
    "describe_exit",
    "stderr_suffix",
    "worker_argv",
]
