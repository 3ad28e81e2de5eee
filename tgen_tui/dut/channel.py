"""The way to the DUT: a network namespace on this host, or a command prefix such as ``ssh root@dut``.

One :class:`DutChannel` runs commands (with a timeout, output kept) and reads files on the
DUT. Everything above it (conntrack, settings, the engine's probe, methodology's reset, and
later counters and hooks) goes through it, so a netns DUT and a remote one behave alike.

Commands. A string is a shell snippet: in a namespace it runs as
``ip netns exec NS sh -c SNIPPET``; over a prefix the snippet is appended as one argument
(``ssh root@dut 'SNIPPET'``: ssh hands it to the remote shell; a local stand-in such as
``ip netns exec NS sh -c`` works the same way). A list is an argv: exec'd directly in a
namespace, shell-quoted into one snippet over a prefix.

What a read costs (2 vCPU, Linux 6.18; see :mod:`tgen_tui.dut.conntrack` for the table):

- namespace, :meth:`DutChannel.read_cached`: ~3 us. A ``/proc/sys/net`` or
  ``/proc/thread-self/net`` file binds to the namespace that opened it, so a short-lived
  thread joins the namespace (``setns`` changes that thread only), opens the file once and
  hands the fd back; every later read is a ``pread`` from any thread, no process, no switch.
  The namespace file's inode is checked on every read, and a deleted or re-created
  namespace is re-opened.
- namespace, :meth:`DutChannel.read_files`: ~80 us for a batch (thread + setns + open), no process.
- namespace, :meth:`DutChannel.run`: one ``ip netns exec`` process, ~2 ms.
- prefix: every read and command is one process and one round trip. Measured for the
  engine's probe (one ``cat`` + ``grep``; 2 vCPU at load average 5): ``ip netns exec NS sh -c``
  ~8 ms; ``ssh`` to an sshd on loopback ~440 ms with a new connection each time, ~225 ms with
  ``ControlMaster``/``ControlPersist`` (key exchange and process start dominate, not the
  network). :meth:`read_files` batches paths into one round trip. A reader every 100 ms over
  ssh needs one long-lived remote shell fed a read request per interval, not a process per
  read (not built yet).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.worker.netns import in_thread_netns, netns_path

#: Marks that separate files in one batched read over a prefix.
_MARK = "--tgen-dut-file--"
_MISSING = "--tgen-dut-missing--"


class DutUnreachable(EnvironmentProblem):
    """The DUT's namespace does not exist, or its command prefix cannot be run."""


class DutCommandFailed(EnvironmentProblem):
    """A command on the DUT exited non-zero or timed out; the message names the channel and
    holds the first line of stderr. ``output`` keeps all of it."""

    def __init__(self, source: str, command: str, output: DutOutput) -> None:
        first = next((ln.strip() for ln in output.stderr.splitlines() if ln.strip()), "")
        how = (
            f"timed out after {output.timeout_s:g} s"
            if output.timed_out
            else f"failed (exit {output.returncode})"
        )
        super().__init__(f"DUT command `{command}` over {source} {how}: {first or 'no message'}")
        self.source = source
        self.command = command
        self.output = output


@dataclass(frozen=True)
class DutOutput:
    """What a command on the DUT left: exit status, output, and whether it ran out of time."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0
    timed_out: bool = False
    timeout_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


class DutChannel:
    """A DUT reached through a network namespace (``netns``) or a command prefix (``ssh``).

    Exactly one is given. ``source`` is the text results and reports carry:
    ``netns:NAME`` or ``ssh:PREFIX``.
    """

    def __init__(self, netns: str | None = None, ssh: str | None = None) -> None:
        if bool(netns) == bool(ssh):
            raise ValueError("a DUT channel needs exactly one of netns or ssh")
        self.netns = netns or None
        self.ssh = ssh or None
        self._prefix = shlex.split(ssh) if ssh else []

    @classmethod
    def of(cls, netns: str | None = None, ssh: str | None = None) -> DutChannel | None:
        """The channel for these options (a namespace wins over a prefix), or None."""
        if netns:
            return cls(netns=netns)
        if ssh:
            return cls(ssh=ssh)
        return None

    @property
    def source(self) -> str:
        return f"netns:{self.netns}" if self.netns else f"ssh:{self.ssh}"

    def __repr__(self) -> str:
        return f"DutChannel({self.source})"

    # ------------------------------------------------------------------ commands
    def argv(self, command: str | Sequence[str]) -> list[str]:
        """The local argv that runs ``command`` on the DUT."""
        if self.netns:
            inner = ["sh", "-c", command] if isinstance(command, str) else list(command)
            return ["ip", "netns", "exec", self.netns, *inner]
        snippet = command if isinstance(command, str) else shlex.join(command)
        return [*self._prefix, snippet]

    def run(
        self, command: str | Sequence[str], *, timeout: float = 30.0, input: str | None = None
    ) -> DutOutput:
        """Run ``command`` on the DUT; never raises for its exit status or a timeout
        (see :class:`DutOutput`), only when the channel itself cannot be started."""
        if self.netns and not self.exists():
            raise DutUnreachable(f"network namespace {self.netns!r} does not exist")
        argv = self.argv(command)
        t0 = time.monotonic()
        try:
            cp = subprocess.run(
                argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError as e:
            raise DutUnreachable(f"`{argv[0]}` is not installed (DUT channel {self.source})") from e
        except subprocess.TimeoutExpired as e:
            return DutOutput(
                124, _text(e.stdout), _text(e.stderr), time.monotonic() - t0, True, timeout
            )
        return DutOutput(cp.returncode, cp.stdout, cp.stderr, time.monotonic() - t0, False, timeout)

    def check(self, command: str | Sequence[str], *, timeout: float = 30.0) -> str:
        """Run ``command``; return its stdout, or raise :class:`DutCommandFailed`."""
        out = self.run(command, timeout=timeout)
        if not out.ok:
            text = command if isinstance(command, str) else shlex.join(command)
            raise DutCommandFailed(self.source, text, out)
        return out.stdout

    # ------------------------------------------------------------------ files
    def exists(self) -> bool:
        """For a namespace: whether it exists. A prefix is assumed reachable (try a command)."""
        return os.path.exists(netns_path(self.netns)) if self.netns else True

    def read_files(self, paths: Sequence[str], *, timeout: float = 10.0) -> dict[str, str | None]:
        """Read several ``/proc`` files as the DUT sees them (None where unreadable). No
        process in a namespace; one round trip over a prefix. Not for ``/sys`` in a
        namespace: a thread that joined it still sees the host's sysfs mount (``ip netns
        exec`` remounts it), so read those with :meth:`run`."""
        paths = list(paths)
        if not paths:
            return {}
        if self.netns:
            if not self.exists():
                raise DutUnreachable(f"network namespace {self.netns!r} does not exist")
            return in_thread_netns(self.netns, _read_local, paths)
        script = "; ".join(
            f"printf '\\n%s\\n' {_MARK}; cat {shlex.quote(p)} 2>/dev/null || echo {_MISSING}"
            for p in paths
        )
        out = self.check(script, timeout=timeout)
        chunks = out.split(f"\n{_MARK}\n")[1:]
        got: dict[str, str | None] = {}
        for i, p in enumerate(paths):
            text = chunks[i].strip() if i < len(chunks) else _MISSING
            got[p] = None if text == _MISSING else text
        return got

    def read_file(self, path: str, *, timeout: float = 10.0) -> str:
        """One file's contents (stripped); FileNotFoundError when the DUT cannot read it."""
        text = self.read_files([path], timeout=timeout)[path]
        if text is None:
            raise FileNotFoundError(2, f"cannot read {path} on {self.source}", path)
        return text

    def read_cached(self, path: str) -> str:
        """``path`` for a per-interval reader: a cached fd and one ``pread`` in a namespace
        (~3 us), one round trip over a prefix (batch with :meth:`read_files` there)."""
        if self.netns:
            return _cached_read(self.netns, path)
        return self.read_file(path)


# ---------------------------------------------------------------- namespace file cache


def _read_local(paths: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in paths:
        try:
            with open(p) as f:
                out[p] = f.read().strip()
        except OSError:
            out[p] = None
    return out


def pread_all(fd: int) -> str:
    """The whole file behind ``fd`` from offset 0 (``/proc`` files need no seek)."""
    chunks = []
    off = 0
    while True:
        b = os.pread(fd, 65536, off)
        if not b:
            break
        chunks.append(b)
        off += len(b)
    return b"".join(chunks).decode()


_lock = threading.Lock()
_fds: dict[tuple[str, str], tuple[int, int, int]] = {}  # (netns, path) -> (fd, st_dev, st_ino)


def netns_identity(netns: str) -> tuple[int, int]:
    """(st_dev, st_ino) of the namespace now named ``netns``: a recreated one differs."""
    try:
        st = os.stat(netns_path(netns))
    except FileNotFoundError:
        raise DutUnreachable(f"network namespace {netns!r} does not exist") from None
    return st.st_dev, st.st_ino


def open_in_netns(netns: str | None, path: str) -> int:
    """An fd of ``path`` opened inside ``netns`` (this namespace when None); the caller closes it."""
    flags = os.O_RDONLY | os.O_CLOEXEC
    if not netns:
        return os.open(path, flags)
    return in_thread_netns(netns, os.open, path, flags)


def _close(key: tuple[str, str]) -> None:
    entry = _fds.pop(key, None)
    if entry is not None:
        try:
            os.close(entry[0])
        except OSError:
            pass


def _cached_read(netns: str, path: str) -> str:
    key = (netns, path)
    with _lock:
        ident = netns_identity(netns)
        entry = _fds.get(key)
        if entry is not None:
            if (entry[1], entry[2]) == ident:
                try:
                    return pread_all(entry[0])
                except OSError:
                    pass  # the namespace's sysctl table is gone (ENOENT): open again
            _close(key)
        fd = open_in_netns(netns, path)
        _fds[key] = (fd, *ident)
        return pread_all(fd)


def forget_netns(netns: str) -> None:
    """Close every cached fd of ``netns`` (the lab calls this before deleting it)."""
    with _lock:
        for key in [k for k in _fds if k[0] == netns]:
            _close(key)


def pick_dut(
    cli_netns: str | None, cli_ssh: str | None, prof_netns: str | None, prof_ssh: str | None
) -> tuple[str | None, str | None]:
    """(netns, ssh) of the DUT: the command line's (--dut-netns or --dut-ssh) replaces the
    profile's as a whole, so that a lab profile run with --dut-ssh talks to that host and
    not to the profile's namespace."""
    if cli_netns or cli_ssh:
        return cli_netns, cli_ssh
    return prof_netns, prof_ssh
