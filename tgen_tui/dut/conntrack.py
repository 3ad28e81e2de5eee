"""The DUT's conntrack table over a :class:`~tgen_tui.dut.channel.DutChannel`: count, max,
flush, and the settings that size it (max, buckets, timeouts).

The count is read at 10 Hz by the engine's probe, so in a namespace it is one ``pread`` of a
cached fd. Measured on the development machine (2 vCPU, Linux 6.18), median per call
(100 calls for the process-based methods, 1,000-10,000 for the others, a lab up with 50
entries):

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

The value is the namespace's own ``cnet->count``, the same number ``conntrack -C`` prints
there. Over a command prefix (ssh) a read is one remote ``cat``.
"""

from __future__ import annotations

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.dut.channel import DutChannel, DutCommandFailed, DutUnreachable

COUNT_PATH = "/proc/sys/net/netfilter/nf_conntrack_count"
MAX_PATH = "/proc/sys/net/netfilter/nf_conntrack_max"

#: The conntrack settings a report records: name -> sysctl key (read in the DUT's namespace).
SYSCTLS = {
    "conntrack_max": "net.netfilter.nf_conntrack_max",
    "conntrack_buckets": "net.netfilter.nf_conntrack_buckets",
    "udp_timeout_s": "net.netfilter.nf_conntrack_udp_timeout",
    "udp_stream_timeout_s": "net.netfilter.nf_conntrack_udp_timeout_stream",
    "tcp_established_timeout_s": "net.netfilter.nf_conntrack_tcp_timeout_established",
}

#: Global knobs, readable from the initial namespace (a namespace may hide them).
GLOBAL_MAX_PATH = "/proc/sys/net/netfilter/nf_conntrack_max"
GLOBAL_BUCKETS_PATH = "/sys/module/nf_conntrack/parameters/hashsize"


def sysctl_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def _read_int(ch: DutChannel, path: str) -> int:
    try:
        return int(ch.read_cached(path))
    except FileNotFoundError:
        where = f"namespace {ch.netns!r}" if ch.netns else ch.source
        raise EnvironmentProblem(
            f"no conntrack in {where} ({path} missing: is nf_conntrack loaded?)"
        ) from None


def count(ch: DutChannel) -> int:
    """Current number of conntrack entries (about 3 us in a namespace; see above)."""
    return _read_int(ch, COUNT_PATH)


def maximum(ch: DutChannel) -> int:
    """``nf_conntrack_max`` as the DUT sees it."""
    return _read_int(ch, MAX_PATH)


def flush(ch: DutChannel, *, timeout: float = 60.0) -> None:
    """Delete every conntrack entry on the DUT (``conntrack -F`` there)."""
    if ch.netns and not ch.exists():
        raise DutUnreachable(f"network namespace {ch.netns!r} does not exist: is the lab up?")
    out = ch.run(["conntrack", "-F"], timeout=timeout)
    if out.ok:
        return
    if not out.timed_out and (out.returncode == 127 or "not found" in out.stderr):
        raise EnvironmentProblem(
            f"`conntrack` (conntrack-tools) is not installed on the DUT ({ch.source})"
        )
    raise DutCommandFailed(ch.source, "conntrack -F", out)


def int_or_none(v: object) -> int | None:
    try:
        return int(v) if v is not None else None  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def read_sysctls(
    ch: DutChannel, keys: list[str], *, timeout: float = 10.0
) -> dict[str, str | None]:
    """Sysctl values of the DUT (None where missing): no process in a namespace, one round
    trip over a prefix."""
    paths = {k: sysctl_path(k) for k in keys}
    got = ch.read_files(list(paths.values()), timeout=timeout)
    return {k: got.get(p) for k, p in paths.items()}
