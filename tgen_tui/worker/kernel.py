"""One home for the Linux pieces the data path needs: libc through ctypes, ``prctl``,
``setns`` and the AF_PACKET / TPACKET constants (from ``linux/if_packet.h``).

Python 3.11 has neither ``os.setns`` nor the packet-socket options, so they are bound
here once and imported by the worker, the rings, the namespace helpers and the lab.
Imports: the standard library only.
"""

from __future__ import annotations

import ctypes
import os

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
