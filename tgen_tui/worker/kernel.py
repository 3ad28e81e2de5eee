"""One home for the Linux pieces the data path needs: libc through ctypes, ``prctl``,
``setns`` and the AF_PACKET / TPACKET constants (from ``linux/if_packet.h``).

Python 3.11 has neither ``os.setns`` nor the packet-socket options, so they are bound
here once and imported by the worker, the rings, the namespace helpers and the lab.
Imports: the standard library only.
"""

from __future__ import annotations

import ctypes
import os
import signal

# by its soname: ctypes.util.find_library("c") runs `ldconfig -p` in every process that
# imports this (each worker, at start-up), for the same answer on glibc
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
libc.setns.restype = ctypes.c_int

# ---- prctl(2)
PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29

# ---- setns(2)
CLONE_NEWNET = 0x40000000

# ---- packet sockets: <linux/if_packet.h>, <linux/if_ether.h>
SOL_PACKET = 263
ETH_P_ALL = 0x0003
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_LOSS = 14
PACKET_QDISC_BYPASS = 20
PACKET_IGNORE_OUTGOING = 23
TPACKET_V2 = 1
TPACKET_V3 = 2
MSG_DONTWAIT = 0x40


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg: int) -> None:
    """``prctl(option, arg)``; OSError with the errno on failure."""
    _check(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


def setns(fd: int, nstype: int = CLONE_NEWNET) -> None:
    """Move the calling thread into the namespace referred to by ``fd``."""
    _check(libc.setns(fd, nstype), "setns(CLONE_NEWNET)")


def arm_parent_death(parent: int) -> None:
    """Die with the parent process (DESIGN rule 5: no orphan survives its tgen).

    PR_SET_PDEATHSIG fires when the parent *thread* exits, not only the process: trio forks
    workers from its thread cache, whose idle threads end after 10 s, and a SIGKILL death
    signal then killed healthy workers of a live engine. So the signal is a catchable one,
    and its handler kills the worker only when the parent process is gone (``getppid``
    no longer names it: we were re-parented to init or a subreaper)."""

    def on_parent_thread_exit(signum: int, frame: object) -> None:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    signal.signal(signal.SIGUSR2, on_parent_thread_exit)
    prctl(PR_SET_PDEATHSIG, signal.SIGUSR2)
