"""Enter a named network namespace in the calling thread (ctypes ``setns``).

Python 3.11 has no ``os.setns``. ``setns(2)`` changes the namespace of the calling
*thread* only; a socket keeps the namespace it was created in, so a worker that serves
ports in several namespaces enters each one in turn, opens that port's sockets, and
returns to where it was (:func:`netns`)::

    with netns("w1a2b3-tester"):
        sock = open_tx_socket("veth0")

Names are those of ``ip netns`` (``/run/netns/NAME``); ``None`` or ``""`` means the
current namespace. Imports: the standard library only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000
NETNS_RUN_DIR = "/run/netns"

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.setns.restype = ctypes.c_int


def netns_path(name: str) -> str:
    if "/" in name:
        return name  # already a path (/proc/PID/ns/net, /run/netns/x)
    return os.path.join(NETNS_RUN_DIR, name)


def setns_fd(fd: int) -> None:
    """Move the calling thread into the network namespace referred to by ``fd``."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns(CLONE_NEWNET): {os.strerror(err)}")


def enter(name: str) -> None:
    """Move the calling thread into the named namespace (for good)."""
    fd = os.open(netns_path(name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns_fd(fd)
    finally:
        os.close(fd)


def current_ns_id() -> str:
    """An identifier of the calling thread's network namespace (``net:[inode]``)."""
    return os.readlink("/proc/thread-self/ns/net")


@contextmanager
def netns(name: str | None) -> Iterator[None]:
    """Run the body inside namespace ``name`` and come back afterwards (even on errors)."""
    if not name:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        enter(name)
        try:
            yield
        finally:
            setns_fd(home)
    finally:
        os.close(home)
