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
    steps = tuple((scale, ".1f", prefix + unit) for scale, prefix in _PREFIXES)
    return _scaled(v, steps, "{:.0f} " + unit)


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


def _scaled(v: float, steps: tuple[tuple[float, str, str], ...], last: str) -> str:
    """The first step whose scale ``v`` reaches: ``format(v / scale, spec) + unit``."""
    for scale, spec, unit in steps:
        if abs(v) >= scale:
            return f"{v / scale:{spec}} {unit}"
    return last.format(v)


_NS_STEPS = ((1e9, ".2f", "s"), (1e6, ".2f", "ms"), (1e3, ".1f", "µs"))


def ns(value: float | None) -> str:
    """A time given in nanoseconds, in the unit that reads best: '812 ns', '52.3 µs', '17.8 ms'."""
    if value is None:
        return DASH
    return _scaled(float(value), _NS_STEPS, "{:.0f} ns")


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


_BYTE_STEPS = (
    (2**40, ".1f", "TiB"),
    (2**30, ".1f", "GiB"),
    (2**20, ".1f", "MiB"),
    (2**10, ".1f", "KiB"),
)


def nbytes(value: int | float | None) -> str:
    """Bytes in binary units: '79.0 MiB'."""
    if value is None:
        return DASH
    return _scaled(float(value), _BYTE_STEPS, "{:.0f} B")


def rate_short(value: float) -> str:
    """A compact rate for progress lines, no unit: '1.23M', '20.00k', '950'."""
    for scale, prefix in _PREFIXES[1:]:
        if abs(value) >= scale:
            return f"{value / scale:.2f}{prefix}"
    return f"{value:.0f}"


__all__ = [
    "DASH",
    "rate_short",
    "bps",
    "count",
    "mbps",
    "nbytes",
    "ns",
    "pct",
    "pps",
    "seconds",
    "si",
]
