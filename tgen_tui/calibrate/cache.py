"""The per-host send-path cache: ``~/.cache/tgen/txpath.json``.

One file per user; entries keyed by host and driver (``HOST|veth``) and, for a
calibration on a named interface, also by that interface (``HOST|veth|NETNS/IF``). The
host id combines the host name and ``/etc/machine-id``, because machines of the same
kind share names but not speeds (BASELINES.md, "Hosts differ"). An entry also records
the kernel and CPU model; when either has changed it is stale, and ignored.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path

VERSION = 1
FILE_NAME = "txpath.json"


def cache_dir() -> Path:
    """``$TGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tgen``, else ``~/.cache/tgen``."""
    d = os.environ.get("TGEN_CACHE_DIR")
    if d:
        return Path(d)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tgen"


def cache_path() -> Path:
    return cache_dir() / FILE_NAME


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_id() -> str:
    """``hostname:machine-id prefix`` (the id alone when the name is not unique)."""
    mid = ""
    for p in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            mid = Path(p).read_text().strip()[:12]
            break
        except OSError:
            continue
    return f"{platform.node()}:{mid}" if mid else platform.node()


def host_facts() -> dict:
    """What makes a measurement valid only for this machine."""
    return {
        "id": host_id(),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "uname": " ".join(platform.uname()),
    }


def keys(driver: str, interface: str | None = None, netns: str | None = None) -> list[str]:
    """Cache keys for a port, most specific first."""
    base = f"{host_id()}|{driver}"
    out = []
    if interface:
        out.append(f"{base}|{netns or ''}/{interface}")
    out.append(base)
    return out


def load(path: Path | None = None) -> dict:
    """The cache document (empty when missing or unreadable: a cache is never an error)."""
    path = path or cache_path()
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"version": VERSION, "entries": {}}
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return {"version": VERSION, "entries": {}}
    doc.setdefault("entries", {})
    return doc


def store(entry: dict, entry_keys: list[str], path: Path | None = None) -> Path:
    """Write ``entry`` under every key (atomically: write a temp file, then rename)."""
    path = path or cache_path()
    doc = load(path)
    for k in entry_keys:
        doc["entries"][k] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".txpath-", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    return path


def lookup(driver: str, interface: str | None, netns: str | None, path: Path | None = None):
    """``(key, entry, stale_reason)``: the most specific entry for this port, if any.

    ``stale_reason`` is set (and the entry not to be used) when the kernel or CPU model
    differ from when it was measured.
    """
    doc = load(path)
    facts = None
    for k in keys(driver, interface, netns):
        e = doc["entries"].get(k)
        if not isinstance(e, dict) or "choice" not in e:
            continue
        facts = facts or host_facts()
        h = e.get("host") or {}
        for f in ("kernel", "cpu_model"):
            if h.get(f) != facts[f]:
                return k, e, f"{f} changed since calibration ({h.get(f)} -> {facts[f]})"
        return k, e, None
    return None, None, None
