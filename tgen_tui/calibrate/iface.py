"""What kind of device an interface is (its driver), and its packet counters, in any netns."""

from __future__ import annotations

import json
import os
import subprocess


def _ip(netns: str | None, *args: str) -> subprocess.CompletedProcess:
    cmd = ["ip"] + (["-n", netns] if netns else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10)


def driver(interface: str, netns: str | None = None) -> str:
    """The interface's driver: 'veth', 'ixgbe', ... ('unknown' when it cannot be told).

    Virtual devices name their kind in ``ip -d link`` (``info_kind``); physical ones have
    a driver link in sysfs (read inside the namespace through ``ip netns exec``).
    """
    r = _ip(netns, "-d", "-j", "link", "show", "dev", interface)
    if r.returncode != 0:
        raise OSError(f"no interface {interface!r}" + (f" in netns {netns!r}" if netns else ""))
    try:
        info = json.loads(r.stdout)[0]
        kind = (info.get("linkinfo") or {}).get("info_kind")
    except (ValueError, IndexError, AttributeError):
        kind = None
    if kind:
        return str(kind)
    path = f"/sys/class/net/{interface}/device/driver"
    if netns is None:
        try:
            return os.path.basename(os.readlink(path))
        except OSError:
            return "unknown"
    r = subprocess.run(
        ["ip", "netns", "exec", netns, "readlink", path], capture_output=True, text=True, timeout=10
    )
    return (
        os.path.basename(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else "unknown"
    )


def counters(interface: str, netns: str | None = None) -> tuple[int, int]:
    """(rx_packets, tx_packets) of the interface (64-bit kernel counters)."""
    r = _ip(netns, "-s", "-j", "link", "show", "dev", interface)
    if r.returncode != 0:
        raise OSError(r.stderr.strip() or f"no interface {interface!r}")
    s = json.loads(r.stdout)[0]["stats64"]
    return int(s["rx"]["packets"]), int(s["tx"]["packets"])
