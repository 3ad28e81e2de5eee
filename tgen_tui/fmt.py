"""Number formatting for rates, sizes, times and counts, with units: one home for the CLI
tables, the progress line and the console (Textual-free, DESIGN rule 1).

Every function returns a short string that always carries its unit, and ``-`` for
"no value" (None), so a table cell is never empty or ambiguous.
"""

from __future__ import annotations

import math

DASH = "-"

_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """1234567 → '1.23 M' + unit (engineering notation, ``digits`` significant digits)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return DASH
    v = float(value)
    for scale, prefix in _PREFIXES:
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {prefix}{unit}".rstrip()
    return f"{v:.{digits}g} {unit}".rstrip()


def pps(value: float | None) -> str:
    """Frames per second: '20.0 kpps'."""
    if value is None:
        return DASH
    return _fixed(value, "pps")


def bps(value: float | None) -> str:
    """Bits per second: '10.2 Mbit/s'."""
    if value is None:
        return DASH
    return _fixed(value, "bit/s")


def mbps(value: float | None) -> str:
    """Bits per second shown in Mbit/s with two decimals: '10.24' (the unit is the column's)."""
    if value is None:
        return DASH
    return f"{value / 1e6:,.2f}"


def _fixed(v: float, unit: str) -> str:
    for scale, prefix in _PREFIXES:
        if abs(v) >= scale:
            return f"{v / scale:.1f} {prefix}{unit}"
    return f"{v:.0f} {unit}"


def count(value: int | float | None) -> str:
    """Frame counts with thousands separators: '1,397,434'."""
    if value is None:
        return DASH
    return f"{int(value):,}"


def pct(value: float | None, digits: int = 2) -> str:
    """A percentage: '1.01 %'; tiny non-zero values keep their significance ('0.0012 %')."""
    if value is None:
        return DASH
    if 0 < abs(value) < 10 ** (-digits):
        return f"{value:.2g} %"
    return f"{value:.{digits}f} %"


def ns(value: float | None) -> str:
    """A time given in nanoseconds, in the unit that reads best: '812 ns', '52.3 µs', '17.8 ms'."""
    if value is None:
        return DASH
    v = float(value)
    if abs(v) >= 1e9:
        return f"{v / 1e9:.2f} s"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.1f} µs"
    return f"{v:.0f} ns"


def seconds(value: float | None) -> str:
    """A duration in seconds: '0.58 s', '2 min 05 s', '1 h 02 min'."""
    if value is None:
        return DASH
    v = float(value)
    if v < 60:
        return f"{v:.2f} s"
    if v < 3600:
        return f"{int(v // 60)} min {int(v % 60):02d} s"
    return f"{int(v // 3600)} h {int(v % 3600 // 60):02d} min"


def nbytes(value: int | float | None) -> str:
    """Bytes in binary units: '79.0 MiB'."""
    if value is None:
        return DASH
    v = float(value)
    for scale, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if abs(v) >= scale:
            return f"{v / scale:.1f} {prefix}B"
    return f"{v:.0f} B"


__all__ = ["DASH", "bps", "count", "mbps", "nbytes", "ns", "pct", "pps", "seconds", "si"]
