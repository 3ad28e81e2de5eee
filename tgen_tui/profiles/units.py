"""Parsing and printing of the units a network test engineer writes: 10G, 500ms, 1.5 Mpps.

Used by the profile models (as pydantic before-validators) and by the CLI for options
such as ``--duration 30s``. Errors are ValueError with a message that names the
accepted forms, so the loader can show them next to the field.
"""

from __future__ import annotations

import math
import re

from tgen_tui.profiles.wire import L1_OVERHEAD

MAX_SECONDS = 1e6  # durations, start/stop times and gaps above this are typos, not tests

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9, "t": 1e12, "T": 1e12}
_BITRATE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]?)\s*(bit/s|bps|b/s|bit)?\s*$"
)
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgG]?)\s*(pps|fps)?\s*$")
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s|m|min|h)?\s*$")
_DUR_SCALE = {
    None: 1.0,
    "s": 1.0,
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
}


def parse_bitrate(value: object) -> float:
    """``10G``, ``100 Mbit/s``, ``2.5e9``, ``40000000`` → bits per second."""
    if isinstance(value, bool):
        raise ValueError("expected a bit rate such as 10G, 100M or 2.5e9")
    if isinstance(value, int | float):
        v = float(value)
    else:
        m = _BITRATE.match(str(value))
        if not m:
            raise ValueError(
                f"{value!r} is not a bit rate; write e.g. 10G, 100M, 1.5 Gbit/s or 40000000"
            )
        v = float(m.group(1)) * _SI[m.group(2)]
    if not math.isfinite(v) or v <= 0:
        raise ValueError("must be a finite rate > 0")
    return v


def parse_count(value: object) -> float:
    """``1.5M``, ``100k``, ``1e6``, ``250 kpps`` → a plain number (frames or frames/s)."""
    if isinstance(value, bool):
        raise ValueError("expected a number such as 1000, 100k or 1.5M")
    if isinstance(value, int | float):
        v = float(value)
    else:
        m = _COUNT.match(str(value))
        if not m:
            raise ValueError(f"{value!r} is not a number; write e.g. 1000, 100k or 1.5M")
        v = float(m.group(1)) * _SI[m.group(2)]
    if not math.isfinite(v):
        raise ValueError("must be finite")
    return v


def parse_duration(value: object) -> float:
    """``500ms``, ``2s``, ``1.5``, ``2min`` → seconds. A bare number is seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 10s or 500ms")
    if isinstance(value, int | float):
        v = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise ValueError(f"{value!r} is not a duration; write e.g. 10s, 500ms or 2min")
        v = float(m.group(1)) * _DUR_SCALE[m.group(2)]
    if not math.isfinite(v):
        raise ValueError("must be a finite duration")
    if v < 0:
        raise ValueError("must be ≥ 0")
    if v > MAX_SECONDS:
        raise ValueError(f"must be ≤ {MAX_SECONDS:g} s (about 11.6 days)")
    return v


#: latency and RTT units to ns (the one table: --fail-on, tgen results check)
LATENCY_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def time_ns(number: float, unit: str | None, bare: str = "us") -> float:
    """``number`` in ``unit`` (ns, us/µs, ms, s; None: ``bare``) as nanoseconds;
    ValueError for another unit."""
    u = bare if unit is None else unit
    if u not in LATENCY_NS:
        raise ValueError(f"{unit!r} is not a time unit (ns, us, ms, s)")
    return float(number) * LATENCY_NS[u]


def parse_latency_ns(text: str, bare: str = "us") -> float:
    """``250us``, ``2ms``, ``150`` (bare: ``bare``, microseconds by default) -> ns."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*", str(text))
    if not m:
        raise ValueError(f"{text!r} is not a latency; write e.g. 250us, 2ms or 150 (µs)")
    return time_ns(float(m.group(1)), m.group(2), bare)


def fmt_si(value: float, unit: str = "", digits: int = 3) -> str:
    """1234567 → '1.23 M' + unit: engineering notation for tables."""
    v = float(value)
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {prefix}{unit}"
    return f"{v:.{digits}g} {unit}".rstrip()


def line_rate_fps(line_rate_bps: float, frame_size: float) -> float:
    """Maximum frames/s of a link: ``rate / (8 × (size + 20))`` (preamble + IFG, RFC 2544)."""
    return line_rate_bps / (8.0 * (frame_size + L1_OVERHEAD))
