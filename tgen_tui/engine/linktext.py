"""The words of a :class:`~tgen_tui.engine.api.LinkChanged` event ("p1: carrier lost",
"p1: carrier back after 1.02 s"): a pure function, no imports."""

from __future__ import annotations

FIRST = {"no carrier": "no carrier", "missing": "interface missing"}
BACK = {"no carrier": "carrier back", "down": "link up again", "missing": "interface back"}


def link_text(port: str, old: str | None, new: str, away_s: float | None, flaps: int = 0) -> str:
    """One line for a link change of ``port`` from ``old`` to ``new`` (module doc)."""
    p = port
    if flaps:
        n = "" if flaps == 1 else f" {flaps} times"
        within = f" within {away_s:.2f} s" if away_s is not None else ""
        return f"{p}: carrier lost and back{n}{within}"
    if old is None:
        return f"{p}: {FIRST.get(new, 'link ' + new)} at open"
    if new == "up":
        back = f" after {away_s:.2f} s" if away_s is not None else ""
        return f"{p}: {BACK.get(old, 'link up')}{back}"
    if new == "no carrier":
        return f"{p}: carrier lost" if old == "up" else f"{p}: link {old} -> no carrier"
    if new == "down":
        return f"{p}: link down (the interface is set down)"
    if new == "missing":
        return f"{p}: interface gone"
    return f"{p}: link {old} -> {new}"


__all__ = ["link_text"]
