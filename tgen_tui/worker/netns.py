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

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from tgen_tui.worker.kernel import setns

NETNS_RUN_DIR = "/run/netns"
T = TypeVar("T")


def netns_path(name: str) -> str:
    if "/" in name:
        return name  # already a path (/proc/PID/ns/net, /run/netns/x)
    return os.path.join(NETNS_RUN_DIR, name)


def setns_fd(fd: int) -> None:
    """Move the calling thread into the network namespace referred to by ``fd``."""
    setns(fd)


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


def in_thread_netns(name: str, fn: Callable[..., T], *args) -> T:
    """Call ``fn(*args)`` in a fresh thread that has joined namespace ``name``; return
    its result (or raise its exception). The caller's namespace is never touched.

    ``/proc/sys/net/...`` and ``/proc/thread-self/net/...`` opened there resolve to the
    namespace's own values (``/sys/class/net`` does NOT: sysfs keeps the namespace it
    was mounted in, so use ``ip netns exec`` for that)."""
    box: dict = {}

    def target() -> None:
        try:
            enter(name)
            box["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e

    t = threading.Thread(target=target, name=f"netns-{name}", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]
