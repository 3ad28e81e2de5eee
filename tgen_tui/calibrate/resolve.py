"""What a port's ``tx_path`` becomes: the profile's choice, the calibrated one, or the default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tgen_tui.calibrate import cache, iface

# The general default when nothing was measured on this host: sendmmsg with 1024-frame
# batches was the fastest or within noise of it on the hosts measured so far (BASELINES.md).
DEFAULT_PATH = "sendmmsg"
DEFAULT_BATCH = 1024
PATHS = ("sendmmsg", "tx_ring", "af_xdp", "xdp")
XDP_MAX_FRAME = 2048  # one AF_XDP UMEM chunk (tgen_tui.worker.txpath.XDP_CHUNK)
# auto keeps sendmmsg (kernel transmit timestamps, frames visible to tcpdump) for a port
# whose rate is at most this share of sendmmsg's calibrated rate, even when another path
# measured faster: that path's extra speed would go unused and cost latency accuracy
SENDMMSG_HEADROOM = 0.5


@dataclass(frozen=True)
class TxChoice:
    """The concrete send path of one port, and why it was chosen."""

    tx_path: str  # sendmmsg | tx_ring | af_xdp | xdp
    max_batch: int
    source: str  # profile | cache | default
    why: str  # one line for people: what was looked up and found

    def port_fields(self) -> dict:
        """The keys this adds to a worker's port configuration."""
        return {
            "tx_path": self.tx_path,
            "max_batch": self.max_batch,
            "tx_path_source": self.source,
            "tx_path_why": self.why,
        }


def resolve(
    requested: str | None,
    interface: str,
    netns: str | None,
    path: Path | None = None,
    max_frame: int = 0,
    pps: float | None = None,
) -> TxChoice:
    """Resolve ``requested`` ('auto', None, or a concrete path) for one port.

    A concrete path from the profile is used as given (with the batch size calibrated for
    it, when the cache has one). ``auto`` uses the cache entry for this host and driver;
    without one (or with a stale one) it falls back to :data:`DEFAULT_PATH`. A cached
    AF_XDP choice gives way to the default when the port's largest frame (``max_frame``
    bytes) does not fit a UMEM chunk. A faster cached path also gives way to sendmmsg when
    the port's requested rate (``pps``, all its streams) is within SENDMMSG_HEADROOM of
    sendmmsg's calibrated rate: sendmmsg has kernel transmit timestamps (latency without
    the tester's send path) and tcpdump sees its frames.
    """
    req = requested or "auto"
    if req != "auto" and req not in PATHS:
        raise ValueError(f"unknown tx_path {req!r}; expected auto, {', '.join(PATHS)}")
    try:
        drv = iface.driver(interface, netns)
    except (OSError, ValueError) as e:
        drv, err = "unknown", str(e)
    else:
        err = ""
    key, entry, stale = cache.lookup(drv, interface, netns, path)
    if req != "auto":
        batch = DEFAULT_BATCH
        if entry and not stale:
            for row in entry.get("table", []):
                if row.get("tx_path") == req and row.get("best_for_path"):
                    batch = int(row["max_batch"])
        return TxChoice(req, batch, "profile", f"tx_path: {req} in the profile")
    if entry and not stale and entry["choice"]["tx_path"] == "af_xdp" and max_frame > XDP_MAX_FRAME:
        return TxChoice(
            DEFAULT_PATH,
            DEFAULT_BATCH,
            "default",
            f"default: calibrated af_xdp takes frames up to {XDP_MAX_FRAME} B, "
            f"this port sends {max_frame} B",
        )
    if entry and not stale and entry["choice"]["tx_path"] != "sendmmsg" and pps:
        mm = [r for r in entry.get("table", []) if r.get("tx_path") == "sendmmsg"]
        best = max(mm, key=lambda r: float(r.get("kpps") or 0), default=None)
        if best and pps <= SENDMMSG_HEADROOM * float(best.get("kpps") or 0) * 1000:
            return TxChoice(
                "sendmmsg",
                int(best.get("max_batch") or DEFAULT_BATCH),
                "cache",
                f"sendmmsg: this port's {pps / 1000:,.1f} kpps is well within its calibrated "
                f"{float(best['kpps']):,.0f} kpps, and it keeps kernel transmit timestamps "
                f"and tcpdump taps (fastest calibrated: {entry['choice']['tx_path']}, used "
                "above that)",
            )
    if entry and not stale:
        c = entry["choice"]
        note = ""
        if c["tx_path"] == "af_xdp":
            note = " (AF_XDP: tcpdump on this port does not see these frames)"
        return TxChoice(
            c["tx_path"],
            int(c.get("max_batch", DEFAULT_BATCH)),
            "cache",
            f"calibrated for {key} at {entry.get('measured_at', '?')}: "
            f"{c['tx_path']} batch {c.get('max_batch')} at {entry.get('kpps', 0):.0f} kpps{note}",
        )
    if stale:
        why = f"default: cache entry {key} is stale ({stale}); run tgen calibrate"
    elif err:
        why = f"default: driver unknown ({err})"
    else:
        why = f"default: no calibration for driver {drv} on this host; run tgen calibrate"
    return TxChoice(DEFAULT_PATH, DEFAULT_BATCH, "default", why)
