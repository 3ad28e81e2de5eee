"""What a port's ``pacing`` becomes: the profile's choice, or what ``auto`` picks from the
port's streams and the spacing ``tgen calibrate`` measured on this host.

``auto`` spaces the frames when the host can (see :mod:`tgen_tui.worker.pacing`):

- constant-rate streams only, up to the qdisc's ceiling: ``qdisc`` (the kernel spaces,
  the worker sleeps);
- drawn inter-departure laws, bursts or on/off schedules, up to the timer's ceiling:
  ``timer`` (each frame released at its own due time);
- above the ceiling, or on a port the qdisc cannot pace (several sender lanes, AF_XDP,
  socket flows sharing the port): ``burst``, and the reason says so with the figure.

A ceiling is the highest rate at which the method kept 90 % of gaps within 10 % of the
asked gap, as ``tgen calibrate`` measured it (cached per host and driver); without a
measurement, the defaults below (measured on the development VM, BASELINES.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tgen_tui.calibrate import cache
from tgen_tui.packets.program import StreamProgram

PACINGS = ("auto", "qdisc", "timer", "burst")
DEFAULT_CEILING_PPS = {"qdisc": 20_000.0, "timer": 10_000.0}
# the timer pacer's default with its compiled loop (tgen_tui.worker.cpace): on the
# development VM it kept 92 % of a constant 20 kpps stream's gaps within 10 % (calibrate)
# and drawn laws at 20 kpps within a KS distance of 0.022-0.028 at the DUT's ingress
COMPILED_TIMER_CEILING_PPS = 20_000.0


def default_timer_ceiling() -> float:
    """The timer's ceiling without a calibration: higher where the compiled loop is built."""
    from tgen_tui.worker import cpace

    return COMPILED_TIMER_CEILING_PPS if cpace.lib_path() else DEFAULT_CEILING_PPS["timer"]


@dataclass(frozen=True)
class PacingChoice:
    """The pacing of one port and why."""

    method: str  # qdisc | timer | burst
    source: str  # profile | cache | default
    why: str

    def port_fields(self) -> dict:
        return {"pacing": self.method, "pacing_why": self.why}


def _recorded(p: StreamProgram) -> bool:
    """A replayed capture at its recorded times (uneven gaps, as drawn ones)."""
    return p.replay is not None and p.replay.timing == "recorded"


def _plain(p: StreamProgram) -> bool:
    s = p.schedule
    plain = s.idt == "constant" and not s.burst and not (s.on_s > 0 and s.off_s > 0)
    return plain and not _recorded(p)


def plain(p: StreamProgram) -> bool:
    """Whether ``auto`` may pace the stream with the qdisc: constant gaps, no bursts or
    on/off, not a capture at its recorded times (else it is timer-paced, or burst)."""
    return _plain(p)


def ceilings(driver: str, interface: str, netns: str | None, path: Path | None = None):
    """(qdisc, timer) ceilings in pps, and where they come from (cache or default)."""
    try:
        _key, entry, stale = cache.lookup(driver, interface, netns, path)
    except (OSError, ValueError):
        entry, stale = None, True
    got = (entry or {}).get("spacing", {}).get("ceiling_pps") if entry and not stale else None
    if got:
        return float(got.get("qdisc") or 0.0), float(got.get("timer") or 0.0), "cache"
    return DEFAULT_CEILING_PPS["qdisc"], default_timer_ceiling(), "default"


def resolve_pacing(
    requested: str | None,
    programs: list[StreamProgram],
    tx_path: str,
    lanes: int = 1,
    has_flows: bool = False,
    limits: tuple[float, float, str] = (0.0, 0.0, "default"),
) -> PacingChoice:
    """The pacing of a port sending ``programs`` over ``tx_path`` (``limits``: the qdisc and
    timer ceilings and their source, :func:`ceilings`). ValueError for a choice the port
    cannot have (the front end turns it into one line, exit 2)."""
    req = requested or "auto"
    if req not in PACINGS:
        raise ValueError(f"unknown pacing {req!r}; expected {', '.join(PACINGS)}")
    if tx_path == "xdp":
        if req in ("qdisc", "timer"):
            raise ValueError(
                f"pacing: {req} does not fit tx_path xdp: the kernel sends each call's frames "
                "back to back (pacing burst or auto)"
            )
        return PacingChoice(
            "burst", "auto" if req == "auto" else "profile",
            "tx_path xdp: calls sized to the rate against absolute deadlines; a call's "
            "frames leave back to back",
        )  # fmt: skip
    if req != "auto":
        if req == "qdisc" and tx_path == "af_xdp":
            raise ValueError(
                "pacing: qdisc needs tx_path sendmmsg or tx_ring (af_xdp bypasses the qdisc)"
            )
        if req == "qdisc" and any(_recorded(p) for p in programs):
            raise ValueError(
                "pacing: qdisc spaces frames evenly; a pcap: stream at its recorded times "
                "needs pacing timer (or auto)"
            )
        if req == "qdisc" and lanes > 1:
            raise ValueError(
                f"pacing: qdisc needs one sender lane per port (this port has {lanes})"
            )
        return PacingChoice(req, "profile", f"pacing: {req} in the profile")
    pps = sum(p.schedule.pps for p in programs)
    q_max, t_max, src = limits
    plain = all(_plain(p) for p in programs)
    if lanes > 1:
        return PacingChoice(
            "burst", "auto", f"{lanes} sender lanes share the port: frames leave in batches"
        )
    can_qdisc = plain and tx_path != "af_xdp" and not has_flows
    if can_qdisc and pps <= q_max:
        return PacingChoice(
            "qdisc",
            src,
            f"constant rate {_k(pps)} <= {_k(q_max)} ({src}): a TBF on the port spaces the frames",
        )
    if pps <= t_max:
        what = (
            "socket flows share the port" if plain and has_flows else "drawn gaps, bursts or on/off"
        )
        if plain and tx_path == "af_xdp":
            what = "af_xdp bypasses the qdisc"
        return PacingChoice(
            "timer",
            src,
            f"{what}, {_k(pps)} <= {_k(t_max)} ({src}): each frame released at its due time",
        )
    top = q_max if can_qdisc else t_max
    return PacingChoice(
        "burst", src,
        f"{_k(pps)} is above the {_k(top)} up to which this host spaces frames ({src}; tgen calibrate "
        "measures it): frames leave in batches at the mean rate",
    )  # fmt: skip


def _k(pps: float) -> str:
    return f"{pps / 1000:g} kpps" if pps >= 1000 else f"{pps:g} pps"


__all__ = ["PACINGS", "PacingChoice", "ceilings", "plain", "resolve_pacing", "DEFAULT_CEILING_PPS"]
