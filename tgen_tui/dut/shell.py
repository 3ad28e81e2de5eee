"""One long-lived shell on the DUT, fed a script per request: a per-interval reader pays a
round trip, not a process start and (over ssh) a key exchange, for every read.

The shell is ``ip netns exec NS sh`` for a namespace, ``PREFIX sh`` for a command prefix
(``ssh root@dut sh``: the remote shell reads its commands from ssh's stdin; a local
stand-in such as ``ip netns exec NS sh -c`` runs ``sh`` the same way). Each request is the
script followed by ``echo END``; the answer is everything before that line. A shell that
dies, times out or writes garbage is killed and a new one started on the next request.
The shell exits by itself when this process dies (its stdin reaches end of file).
"""

from __future__ import annotations

import os
import select
import shlex
import subprocess
import threading
import time

from tgen_tui.diagnostics import EnvironmentProblem

_END = "--tgen-shell-end--"


class ShellFailed(EnvironmentProblem):
    """The DUT's shell could not be started, died, or did not answer in time."""


class RemoteShell:
    """A shell started by ``argv`` (its commands come on stdin). Thread-safe."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = list(argv)
        self._p: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.starts = 0

    def __repr__(self) -> str:
        return f"RemoteShell({shlex.join(self.argv)})"

    def _start(self) -> subprocess.Popen[bytes]:
        try:
            p = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
            )
        except OSError as e:
            raise ShellFailed(f"cannot start `{shlex.join(self.argv)}`: {e}") from e
        self.starts += 1
        return p

    def run(self, script: str, *, timeout: float = 10.0) -> str:
        """The stdout of ``script`` (stderr is discarded); raises :class:`ShellFailed`."""
        with self._lock:
            if self._p is None or self._p.poll() is not None:
                self._p = self._start()
            p = self._p
            try:
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write(f"{script}\necho; echo {_END}\n".encode())
                return _read_until(p.stdout.fileno(), timeout)
            except (OSError, ShellFailed) as e:
                self._kill()
                raise ShellFailed(f"DUT shell `{shlex.join(self.argv)}`: {e}") from e

    def _kill(self) -> None:
        p, self._p = self._p, None
        if p is None:
            return
        try:
            p.kill()
            p.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for f in (p.stdin, p.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._kill()


def _read_until(fd: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    buf = bytearray()
    tail = f"\n{_END}\n".encode()
    while not buf.endswith(tail):
        left = deadline - time.monotonic()
        if left <= 0:
            raise ShellFailed(f"no answer in {timeout:g} s")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise ShellFailed("the shell exited")
        buf += chunk
    return buf[: -len(tail)].decode(errors="replace").removesuffix("\n")
