"""Trend detection over the builds of a metric: FD.io CSIT's jumpavg (issue 33).

jumpavg (PyPI ``jumpavg``, the library behind CSIT's trending pages) splits a history into
*groups*: runs of consecutive builds that look like samples of one normal distribution. It
picks the split with the minimum description length (MDL): every group costs bits to
describe (its length, its average, its spread) and the samples cost fewer bits the closer
they lie to their group's average, so a new group is opened only where the data pays for
it. A build is one indivisible entry of the history, its repeats (the samples of
:mod:`analysis`) go in together; builds keep the order they were first run in.

A group whose average differs from the group before is a change: jumpavg calls a lower
average a regression and a higher one a progression; here the metric's own direction
decides (:attr:`metrics.Metric.better`), so a rise of the loss is a regression, and a
metric without a direction shows a plain "change".

The confidence of a change is read off jumpavg's bit counts: ``gain`` is how many bits
longer the whole history's description gets when the boundary is removed (the two groups
merged into one). In MDL a description of B bits stands for a probability of 2^-B, so the
history is 2^gain times likelier with the change than without it, and with even odds
before looking, the confidence is 2^gain / (1 + 2^gain): 10 bits ≈ 99.9 %. jumpavg keeps
any boundary that saves bits at all, so a boundary under :data:`MIN_CONFIDENCE` (or the
caller's) is shown as "unsure" and flags nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import jumpavg

from tgen_tui import fmt
from tgen_tui.results import metrics as M

# The confidence of a boundary whose gain is this many bits or more prints as ">99.99 %".
_SURE_BITS = math.log2(1e4)
# A boundary less sure than this is shown as "unsure" and flags nothing. jumpavg places a
# boundary wherever it saves a bit at all: with one sample per build it has no noise to go
# by but the group's own, and two builds 0.4 points apart split at a coin toss (0.1 bits).
MIN_CONFIDENCE = 0.99


@dataclass(frozen=True)
class Group:
    """Consecutive builds with one average, as jumpavg grouped them."""

    builds: tuple[str, ...]
    n: int  # samples (every repeat of every build in the group)
    avg: float
    stdev: float  # population standard deviation of the samples (jumpavg's)
    prev_avg: float | None  # the average of the group before; None for the first
    kind: str  # "first", "regression", "progression", "change" (no direction) or "unsure"
    gain: float | None  # bits the boundary at this group's start saves; None for the first

    @property
    def span(self) -> str:
        """'b8..b10', or 'b8' for a group of one build."""
        a, b = self.builds[0], self.builds[-1]
        return a if a == b else f"{a}..{b}"

    @property
    def change_pct(self) -> float | None:
        """Relative change of the average against the group before, in %."""
        if self.prev_avg is None or not self.prev_avg:
            return None
        return 100.0 * (self.avg - self.prev_avg) / abs(self.prev_avg)

    @property
    def confidence(self) -> float | None:
        """2^gain / (1 + 2^gain): how sure the grouping is that the change is real."""
        return None if self.gain is None else _confidence(self.gain)


@dataclass(frozen=True)
class Trend:
    """The groups of one metric's history (oldest first) and why it was not grouped."""

    metric: str
    builds: tuple[str, ...]
    groups: tuple[Group, ...]
    note: str | None = None  # set when jumpavg was not run (and groups is empty)
    min_confidence: float = MIN_CONFIDENCE  # below it a boundary is "unsure"

    @property
    def changes(self) -> tuple[Group, ...]:
        """Every group after the first: each starts at a boundary jumpavg placed."""
        return self.groups[1:]

    @property
    def flagged(self) -> tuple[Group, ...]:
        """The changes sure enough to report (regression, progression, change)."""
        return tuple(g for g in self.changes if g.kind != "unsure")

    @property
    def last(self) -> Group | None:
        """The newest group when the history has a change, else None."""
        return self.groups[-1] if len(self.groups) > 1 else None

    @property
    def regressed(self) -> bool:
        """The newest group is a regression against the one before."""
        return self.last is not None and self.last.kind == "regression"


def detect(
    metric: str,
    history: Sequence[tuple[str, Sequence[float]]],
    min_confidence: float = MIN_CONFIDENCE,
) -> Trend:
    """Group ``history`` ((build, samples) oldest first) with jumpavg.

    A boundary whose confidence is below ``min_confidence`` (0..1) is kind "unsure".
    Builds without samples are left out. jumpavg codes averages between zero and the
    largest sample, so a history with a negative value is not grouped (``note`` says so);
    a history whose samples are all equal is one group without calling it.
    """
    hist = [(b, [float(x) for x in s]) for b, s in history if len(s)]
    builds = tuple(b for b, _ in hist)
    if not hist:
        return Trend(metric, builds, (), "no samples", min_confidence)
    flat = [x for _, s in hist for x in s]
    if min(flat) < 0:
        return Trend(
            metric, builds, (), "negative values: jumpavg needs values >= 0", min_confidence
        )
    if min(flat) == max(flat):
        return Trend(
            metric, builds, (_group(builds, flat, None, "first", None),), None, min_confidence
        )
    glist = jumpavg.classify([s for _, s in hist])
    better = M.metric(metric).better
    groups: list[Group] = []
    at = 0
    for i, g in enumerate(glist):
        k = len(g.run_list)
        prev = groups[-1].avg if groups else None
        kind = "first" if prev is None else _kind(g.stats.avg, prev, better)
        gain = None if i == 0 else _gain(glist, i)
        if gain is not None and _confidence(gain) < min_confidence:
            kind = "unsure"
        samples = [x for _, s in hist[at : at + k] for x in s]
        groups.append(
            Group(
                builds[at : at + k],
                len(samples),
                float(g.stats.avg),
                float(g.stats.stdev),
                prev,
                kind,
                gain,
            )
        )
        at += k
    return Trend(metric, builds, tuple(groups), None, min_confidence)


def _group(builds, samples, prev, kind, gain) -> Group:
    avg = sum(samples) / len(samples)
    return Group(tuple(builds), len(samples), avg, 0.0, prev, kind, gain)


def _confidence(gain: float) -> float:
    return 1.0 / (1.0 + 2.0 ** -max(-1000.0, min(1000.0, gain)))


def _kind(avg: float, prev: float, better: str | None) -> str:
    if better is None:
        return "change"
    up = avg > prev
    return "progression" if up == (better == "higher") else "regression"


def _gain(glist, i: int) -> float:
    """Bits the boundary before group ``i`` saves: the history's bit count with groups
    ``i - 1`` and ``i`` merged, minus the bit count of jumpavg's grouping."""
    merged = jumpavg.BitCountingGroupList(max_value=glist.max_value, unit=glist.unit)
    groups = list(glist)
    for j, g in enumerate(groups):
        if j == i:
            continue
        runs = list(g.run_list)
        if j == i - 1:
            runs += list(groups[i].run_list)
        merged.append_group_of_runs(runs)
    return float(merged.bits - glist.bits)


# ---------------------------------------------------------------- words


def fmt_confidence(c: float | None, gain: float | None = None) -> str:
    if c is None:
        return "-"
    if gain is not None and gain >= _SURE_BITS:
        return ">99.99 %"
    return f"{100.0 * c:.2f} %"


def fmt_avg(metric: str, v: float | None) -> str:
    """A group average (or spread) in the metric's unit; counts keep their fraction."""
    m = M.metric(metric)
    if v is not None and m.unit in ("frames", "entries", "segments"):
        return f"{v:,.4g} {m.unit}"
    if v is not None and m.unit in ("pps", "bit/s"):
        return fmt.si(v, m.unit, 4)  # a group's average: one digit more than a run's figure
    return m.fmt(v).strip()


def size(metric: str, g: Group) -> str:
    """The change of a group's average against the group before: '-5.7 %' (relative),
    '+5.42 pt' for metrics in %, '+3 frames' where the group before averaged zero."""
    m = M.metric(metric)
    if g.prev_avg is None:
        return "-"
    if m.unit == "%":
        return f"{g.avg - g.prev_avg:+.2f} pt"
    p = g.change_pct
    if p is None:
        return f"{g.avg - g.prev_avg:+.6g} {m.unit}".rstrip()
    return f"{p:+.1f} %"


def describe(t: Trend, g: Group) -> str:
    """'regression at build b8: -5.7 % (10.0 kpps → 9.4 kpps), gain 55.3 bits,
    confidence >99.99 %'; an unsure boundary says so."""
    line = (
        f"{g.kind} at build {g.builds[0]}: {size(t.metric, g)} "
        f"({fmt_avg(t.metric, g.prev_avg)} → {fmt_avg(t.metric, g.avg)}), "
        f"gain {g.gain:.1f} bits, confidence {fmt_confidence(g.confidence, g.gain)}"
    )
    if g.kind == "unsure":
        line += f" (under {100 * t.min_confidence:g} %: not flagged)"
    return line


def summary(t: Trend) -> str:
    """One line for the newest group: 'last group b11..b12: progression +6.5 % against
    b8..b10 (confidence >99.99 %)', or 'no change over 12 builds'."""
    label = M.metric(t.metric).label
    if t.note:
        return f"{label}: not grouped ({t.note})"
    last = t.last
    if last is None:
        n = len(t.builds)
        return f"{label}: no change over {n} build{'s' if n != 1 else ''} (one group)"
    before = t.groups[-2].span
    return (
        f"{label}: last group {last.span}: {last.kind} {size(t.metric, last)} against "
        f"{before} (gain {last.gain:.1f} bits, confidence "
        f"{fmt_confidence(last.confidence, last.gain)})"
    )
