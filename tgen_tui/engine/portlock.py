"""Exclusive per-port locks: one tgen process drives a port at a time.

Every engine (``tgen run``, a console, a served console) takes the lock of each of
its ports before it spawns workers, so a second holder fails at once with a typed
error naming the port and the holder's pid, instead of two sets of workers sending
on one interface. The lock is ``fcntl.flock`` on ``/run/tgen/locks/<netns>__<iface>.lock``:
the kernel drops it when the holder's file closes, so a crashed holder leaves no
stale lock (its file stays and is reused). ``release()`` removes the file while still
holding it; a taker that locked a file just removed notices (inode check) and retries.

    locks = acquire_ports([("lab-tester", "p0"), ("lab-tester", "p1")], names=["p0", "p1"])
    try:
        ...  # spawn workers, run
    finally:
        locks.release()
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

from tgen_tui.diagnostics import EnvironmentProblem

LOCK_DIR = Path("/run/tgen/locks")
_SAFE = re.compile(r"[^A-Za-z0-9_.@+-]")


class PortInUse(EnvironmentProblem):
    """Another process holds the lock of a port (exit 3)."""

    def __init__(self, port: str, netns: str | None, interface: str, pid: int | None) -> None:
        self.port, self.netns, self.interface, self.pid = port, netns, interface, pid
        where = f"interface {interface}" + (f" in netns {netns}" if netns else "")
        holder = f"tgen pid {pid}" if pid else "another tgen process"
        cmd = _cmdline(pid) if pid else ""
        detail = f"{cmd}; {where}" if cmd else where
        super().__init__(f"port {port} is in use by {holder} ({detail}); stop that one first")


def lock_path(netns: str | None, interface: str, lock_dir: Path | None = None) -> Path:
    """The lock file of one (netns, interface) pair; ``None`` netns means the host's."""
    ns = _SAFE.sub("_", netns) if netns else "-"
    return (lock_dir or LOCK_DIR) / f"{ns}__{_SAFE.sub('_', interface)}.lock"


class PortLocks:
    """Held locks of a set of ports; ``release()`` (idempotent) or use as a context manager.

    Keep a reference while the ports run: the locks are dropped when this object is.
    """

    def __init__(self, fds: dict[Path, int]) -> None:
        self._fds = fds

    @property
    def paths(self) -> list[Path]:
        return list(self._fds)

    @property
    def held(self) -> bool:
        return bool(self._fds)

    def release(self) -> None:
        """Remove each lock file while still holding it, then close it (drops the flock)."""
        for path, fd in self._fds.items():
            try:
                if _same_file(path, fd):
                    path.unlink()
            except OSError:
                pass
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = {}

    def __enter__(self) -> PortLocks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()


def remove_unheld(netns: str | None, lock_dir: Path | None = None) -> list[Path]:
    """Remove the lock files of ``netns``'s interfaces that nobody holds (a holder killed
    with SIGKILL leaves its file behind; ``tgen lab down`` tidies its namespace's). A file
    that is held is left alone; a taker that raced with the removal notices and retries."""
    directory = lock_dir or LOCK_DIR
    ns = _SAFE.sub("_", netns) if netns else "-"
    removed = []
    for path in directory.glob(f"{ns}__*.lock"):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _same_file(path, fd):
                path.unlink()
                removed.append(path)
        except OSError:
            pass  # held by a running tgen: keep it
        finally:
            os.close(fd)
    return removed


def acquire_ports(
    ports: list[tuple[str | None, str]],
    *,
    names: list[str] | None = None,
    lock_dir: Path | None = None,
) -> PortLocks:
    """Lock every ``(netns, interface)`` or none: raise :class:`PortInUse` on the first taken one.

    ``names`` (same order) are the profile's port names, used in the error message;
    without them the interface name stands in. The pid of the holder is written into
    each lock file so that the next one can name it.
    """
    directory = lock_dir or LOCK_DIR
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentProblem(f"cannot create the port lock folder {directory}: {e}") from e
    label = names or [iface for _, iface in ports]
    fds: dict[Path, int] = {}
    try:
        for (netns, iface), name in zip(ports, label, strict=True):
            path = lock_path(netns, iface, directory)
            if path in fds:
                continue  # the same interface named twice: one lock
            fd = _lock(path, name, netns, iface)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            fds[path] = fd
    except BaseException:
        PortLocks(fds).release()
        raise
    return PortLocks(fds)


def _lock(path: Path, name: str, netns: str | None, iface: str) -> int:
    """Open and flock ``path``; retry when a releaser unlinked it between our open and flock."""
    for _ in range(20):
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise PortInUse(name, netns, iface, _holder_pid(path)) from None
        if _same_file(path, fd):
            return fd
        os.close(fd)  # we locked a file that is no longer the lock: take the new one
    raise EnvironmentProblem(f"cannot take the port lock {path}: it keeps being replaced")


def _same_file(path: Path, fd: int) -> bool:
    try:
        a, b = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise EnvironmentProblem(f"cannot open the port lock {path}: {e}") from e


def _holder_pid(path: Path) -> int | None:
    """The pid the holder wrote; it may not have written it yet, so look twice."""
    for _ in range(2):
        try:
            text = path.read_text().strip()
        except OSError:
            return None
        if text.isdigit():
            return int(text)
        time.sleep(0.05)
    return None


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    # "python -m tgen_tui tui /x/lab.yaml --cores 1" or ".venv/bin/tgen run lab.yaml": "tgen tui lab.yaml"
    for i, a in enumerate(args):
        if a.endswith("/tgen") or a in ("tgen", "tgen_tui"):
            rest = args[i + 1 :]
            words = ["tgen", *rest[:1]]
            words += [Path(x).name for x in rest[1:] if not x.startswith("-")][:1]
            return " ".join(words)
    return Path(args[0]).name if args else ""
