"""Reading the DUT namespace's conntrack count cheaply (a probe calls it at 10 Hz).

Measured on the development machine (2 vCPU, Linux 6.18), median per call
(``/tmp``-style micro-benchmark: 100 calls for the process-based methods, 1,000-10,000 for
the others, a lab up with 50 entries):

=======================================================================  ==========
method                                                                   cost
=======================================================================  ==========
``ip netns exec NS cat /proc/sys/net/netfilter/nf_conntrack_count``      ~2.0 ms
``ip netns exec NS conntrack -C``                                        ~2.1 ms
thread + ``setns(2)`` + open + read, every call                          ~80 us
``/proc/<pid>/net/stat/nf_conntrack`` of a process living in the netns   ~17 us
cached fd opened in the namespace once, ``pread`` + inode check (here)   ~3.4 us
  (the bare ``pread`` of it                                              ~1.0 us)
=======================================================================  ==========

The cached file descriptor works because a ``/proc/sys/net`` file is bound to the network
namespace that opened it: a short-lived thread joins the DUT namespace (``setns`` changes
only that thread), opens ``nf_conntrack_count`` and hands the fd back; every later read is
one ``pread(fd, 32, 0)`` from any thread, with no process and no namespace switch. The value
is the namespace's own ``cnet->count``, the same number ``conntrack -C`` prints there.

If the namespace is deleted (or re-created under the same name) the cached fd is detected
as stale (the kernel fails the read with ENOENT once the namespace's sysctl table is gone,
and we also compare the namespace file's inode) and re-opened.
"""

from __future__ import annotations

import os
import threading

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.lab import commands

COUNT_PATH = "/proc/sys/net/netfilter/nf_conntrack_count"

_lock = threading.Lock()
_fds: dict[str, tuple[int, int, int]] = {}  # netns -> (fd, st_dev, st_ino)


def _open_count() -> int:
    return os.open(COUNT_PATH, os.O_RDONLY | os.O_CLOEXEC)


def _ns_identity(netns: str) -> tuple[int, int]:
    st = os.stat(os.path.join(commands.NETNS_DIR, netns))
    return st.st_dev, st.st_ino


def _forget(netns: str) -> None:
    entry = _fds.pop(netns, None)
    if entry is not None:
        try:
            os.close(entry[0])
        except OSError:
            pass


def _open_for(netns: str) -> int:
    try:
        ident = _ns_identity(netns)
    except FileNotFoundError:
        raise EnvironmentProblem(f"network namespace {netns!r} does not exist") from None
    try:
        fd = commands.in_netns(netns, _open_count)
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"no conntrack in namespace {netns!r} ({COUNT_PATH} missing: is nf_conntrack loaded?)"
        ) from None
    _fds[netns] = (fd, *ident)
    return fd


def conntrack_count(dut_netns: str) -> int:
    """Current number of conntrack entries in ``dut_netns`` (about 3 us per call; see above)."""
    with _lock:
        entry = _fds.get(dut_netns)
        if entry is not None:
            fd, dev, ino = entry
            try:
                if _ns_identity(dut_netns) == (dev, ino):
                    return int(os.pread(fd, 32, 0))
            except (OSError, ValueError):
                pass
            _forget(dut_netns)
        fd = _open_for(dut_netns)
        return int(os.pread(fd, 32, 0))


def forget(dut_netns: str) -> None:
    """Close the cached descriptor of ``dut_netns`` (called by ``down``)."""
    with _lock:
        _forget(dut_netns)


def flush(dut_netns: str) -> None:
    """Delete every conntrack entry of ``dut_netns`` (``conntrack -F`` there)."""
    if not commands.netns_exists(dut_netns):
        raise EnvironmentProblem(f"network namespace {dut_netns!r} does not exist: is the lab up?")
    cp = commands.run(["conntrack", "-F"], netns=dut_netns, check=False)
    if cp.returncode != 0:
        if "not found" in cp.stderr or cp.returncode == 127:
            raise EnvironmentProblem("`conntrack` (conntrack-tools) is not installed")
        raise commands.CommandFailed(["conntrack", "-F"], cp.returncode, cp.stderr)
