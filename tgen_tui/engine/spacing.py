"""A stream's spacing at the receiver, from its rx row: one definition of each figure.

Why: frames that leave the tester in micro-bursts meet the DUT at another rate than the
one asked for, even when the mean rate is exact (BASELINES.md, "Spacing at the wire").
The receiving worker measures the gap between frames n and n + 1 of a stream from the
kernel's receive stamps (:mod:`tgen_tui.worker.rxstats`); this module turns the row's
counts (baselines subtracted) into a :class:`~tgen_tui.engine.snapshot.Spacing`:

- ``mean_gap_ns`` = sum / count; ``mae_ns`` and ``within_10pct`` against the asked gap
  the sender wrote (only over gaps whose asked gap was known);
- ``p50_ns``/``p99_ns`` from the inter-arrival histogram (upper bucket edges);
- ``ks``: the Kolmogorov-Smirnov distance of that histogram from the stream's random
  inter-departure law (:mod:`tgen_tui.packets.schedule`'s laws, their CDFs in
  :mod:`tgen_tui.engine.laws`, with mean = the asked gap), evaluated at the bucket edges. None for constant
  streams and for shaped ones (multi-burst, on/off), whose gaps follow no single law.

Imports: numpy, the worker's counter layout and histogram geometry, the snapshot types.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tgen_tui.engine.laws import law_cdf
from tgen_tui.engine.snapshot import Spacing
from tgen_tui.packets.schedule import IDTS
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import hist_edges_ns, hist_percentile_ns

WARN_SHARE = 0.90  # a constant stream below this share of gaps within 10 % is reported
WARN_MIN_GAPS = 100


def law_of(schedule: Any) -> str:
    """The schedule's inter-departure law; ``+burst``/``+on-off`` when it is shaped."""
    if schedule is None:
        return "constant"
    law = str(getattr(schedule, "idt", "constant") or "constant")
    if getattr(schedule, "shape", ()):
        return law + "+shape"
    if getattr(schedule, "burst", 0):
        return law + "+burst"
    if getattr(schedule, "on_s", 0) and getattr(schedule, "off_s", 0):
        return law + "+on-off"
    return law


def ks_distance(hist: np.ndarray, law: str, params: tuple[float, ...], mean_ns: float) -> float:
    """max |empirical CDF - law CDF| over the histogram's upper bucket edges."""
    h = np.asarray(hist, dtype=np.float64)
    n = h.sum()
    if n <= 0:
        raise ValueError("empty histogram")
    emp = np.cumsum(h) / n
    theo = law_cdf(law, params, mean_ns, hist_edges_ns()[1:].astype(np.float64))
    return float(np.max(np.abs(emp - theo)))


def spacing(row: np.ndarray, asked_ns: int, schedule: Any, requested_pps: float) -> Spacing:
    """The spacing figure of a stream's summed rx row (``asked_ns``: the asked-gap gauge;
    0 falls back to the requested rate for the law's mean only)."""
    n = int(row[C.R_IAT_COUNT])
    law = law_of(schedule)
    asked = float(asked_ns) if asked_ns > 0 else None
    if n == 0:
        return Spacing(asked_gap_ns=asked, law=law)
    known = int(row[C.R_IAT_ASKED_COUNT])
    hist = row[C.R_IAT_HIST : C.R_HIST]
    ks = None
    mean_law = asked or (1e9 / requested_pps if requested_pps > 0 else None)
    if law in IDTS and law != "constant":
        if mean_law:
            ks = round(ks_distance(hist, law, tuple(schedule.idt_params), mean_law), 4)
    return Spacing(
        asked_gap_ns=asked,
        gaps=n,
        mean_gap_ns=float(row[C.R_IAT_SUM]) / n,
        mae_ns=float(row[C.R_IAT_ABS_ERR]) / known if known else None,
        within_10pct=int(row[C.R_IAT_WITHIN]) / known if known else None,
        p50_ns=hist_percentile_ns(hist, 0.50),
        p99_ns=hist_percentile_ns(hist, 0.99),
        ks=ks,
        law=law,
    )


def spacing_warnings(streams: Any) -> list[str]:
    """One line per constant-rate stream whose gaps were mostly off the asked gap."""
    out = []
    for s in streams:
        sp = s.spacing
        if sp.law != "constant" or sp.within_10pct is None or sp.gaps < WARN_MIN_GAPS:
            continue
        if sp.within_10pct < WARN_SHARE and sp.asked_gap_ns:
            out.append(
                f"stream {s.name}: {100 * sp.within_10pct:.1f} % of gaps within 10 % of "
                f"{_gap(sp.asked_gap_ns)} (asked {_rate(1e9 / sp.asked_gap_ns)}); "
                "the tester could not space at this rate"
            )
    return out


def _gap(ns: float) -> str:
    return f"{ns / 1e3:.1f} µs" if ns >= 1e3 else f"{ns:.0f} ns"


def _rate(pps: float) -> str:
    for scale, unit in ((1e6, "Mpps"), (1e3, "kpps")):
        if pps >= scale:
            return f"{pps / scale:g} {unit}"
    return f"{pps:g} pps"


__all__ = ["ks_distance", "law_cdf", "law_of", "spacing", "spacing_warnings"]
