"""Medians, spreads, ``compare`` and ``check``: turning stored runs into verdicts.

Samples of a metric: the repeats inside a run (trials with a ``"repeat"`` key) when it has
them, else the run's own value; a *group* (the runs of one DUT, build, test and profile
hash) pools the samples of its runs, so repeating a run under one build gives a spread.
The spread is the sample standard deviation; with fewer than two samples it is unknown and
only the fixed bounds apply.
"""

from __future__ import annotations

import math
import sqlite3
import statistics
from dataclasses import dataclass, field

from tgen_tui.results import metrics as M
from tgen_tui.results import store


@dataclass
class Summary:
    """The samples of one metric in one group."""

    samples: list[float]

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    @property
    def spread(self) -> float | None:
        return statistics.stdev(self.samples) if len(self.samples) >= 2 else None

    @property
    def variance(self) -> float | None:
        return statistics.variance(self.samples) if len(self.samples) >= 2 else None


def run_samples(conn: sqlite3.Connection, run_id: int) -> dict[str, list[float]]:
    """{metric: samples} of one run: its repeats where it has them, else its value."""
    values = store.run_metrics(conn, run_id)
    trials = store.run_trials(conn, run_id)
    out: dict[str, list[float]] = {}
    names = set(values)
    for t in trials:
        if isinstance(t, dict) and "repeat" in t:
            inner = t.get("metrics")
            src = inner if isinstance(inner, dict) else t
            names |= {k for k, v in src.items() if M._num(v) is not None}
    names.discard("schema_version")  # the document's version, not a measurement
    for name in names:
        rep = M.trial_samples(trials, name)
        if rep:
            out[name] = rep
        elif name in values:
            out[name] = [values[name]]
    return out


def group_samples(conn: sqlite3.Connection, run_ids: list[int]) -> dict[str, Summary]:
    """Pooled samples of several runs (repeats of one build)."""
    pooled: dict[str, list[float]] = {}
    for rid in run_ids:
        for k, v in run_samples(conn, rid).items():
            pooled.setdefault(k, []).extend(v)
    return {k: Summary(v) for k, v in pooled.items()}


@dataclass
class Group:
    """The runs of one DUT and build with one test and profile (non-partial)."""

    dut: str
    build: str
    test: str
    profile_hash: str | None
    profile: str | None
    run_ids: list[int] = field(default_factory=list)


def group_of(
    conn: sqlite3.Connection,
    *,
    dut: str,
    build: str,
    test: str,
    profile_hash: str | None,
    include_partial: bool = False,
) -> Group:
    sql = (
        "SELECT id, profile FROM runs WHERE dut = ? AND build = ? AND test = ?"
        " AND profile_hash IS ?"
    )
    if not include_partial:
        sql += " AND partial = 0"
    cur = conn.execute(sql + " ORDER BY started_at, id", (dut, build, test, profile_hash))
    rows = cur.fetchall()
    return Group(dut, build, test, profile_hash, rows[0][1] if rows else None, [r[0] for r in rows])


def builds_in_order(
    conn: sqlite3.Connection, *, dut: str, test: str | None, profile_hash: str | None
) -> list[str]:
    """The DUT's builds in the order they were first run (oldest first)."""
    sql = "SELECT build, min(started_at) AS t FROM runs WHERE dut = ? AND partial = 0"
    args: list = [dut]
    if test is not None:
        sql += " AND test = ?"
        args.append(test)
    if profile_hash is not None:
        sql += " AND profile_hash = ?"
        args.append(profile_hash)
    sql += " GROUP BY build ORDER BY t, build"
    return [b for b, _ in conn.execute(sql, args)]


def build_history(
    conn: sqlite3.Connection,
    *,
    dut: str,
    test: str,
    profile_hash: str | None,
    upto: str | None = None,
    last: int = 0,
) -> list[tuple[str, dict[str, Summary]]]:
    """``(build, {metric: Summary})`` for the DUT's builds in first-run order (oldest
    first), each pooling the samples of its complete runs; up to and including build
    ``upto`` when given, and only the newest ``last`` builds when ``last`` > 0."""
    builds = builds_in_order(conn, dut=dut, test=test, profile_hash=profile_hash)
    if upto is not None and upto in builds:
        builds = builds[: builds.index(upto) + 1]
    if last > 0:
        builds = builds[-last:]
    out = []
    for b in builds:
        g = group_of(conn, dut=dut, build=b, test=test, profile_hash=profile_hash)
        out.append((b, group_samples(conn, g.run_ids)))
    return out


# ---------------------------------------------------------------- compare


@dataclass
class Change:
    """One metric of two groups side by side."""

    metric: str
    a: Summary
    b: Summary
    factor: float  # K in "beyond K × the spread"

    @property
    def delta(self) -> float | None:
        if self.a.median is None or self.b.median is None:
            return None
        return self.b.median - self.a.median

    @property
    def pct(self) -> float | None:
        d = self.delta
        if d is None or not self.a.median:
            return None
        return 100.0 * d / abs(self.a.median)

    @property
    def spread(self) -> float | None:
        s = [x for x in (self.a.spread, self.b.spread) if x is not None]
        return max(s) if s else None

    @property
    def beyond_spread(self) -> bool | None:
        """True/False when a spread is known, None when neither side has repeats."""
        d, s = self.delta, self.spread
        if d is None or s is None:
            return None
        return abs(d) > self.factor * s

    @property
    def worse(self) -> bool:
        """The change goes the bad way for this metric."""
        d, better = self.delta, M.metric(self.metric).better
        if not d or better is None:
            return False
        return d < 0 if better == "higher" else d > 0


def compare(
    conn: sqlite3.Connection, a_ids: list[int], b_ids: list[int], *, factor: float = 3.0
) -> list[Change]:
    """Every metric the two sides have in common, catalogue order first."""
    sa, sb = group_samples(conn, a_ids), group_samples(conn, b_ids)
    names = [n for n in M.CATALOGUE if n in sa and n in sb]
    names += sorted(n for n in sa.keys() & sb.keys() if n not in M.CATALOGUE)
    return [Change(n, sa[n], sb[n], factor) for n in names]


# ---------------------------------------------------------------- check


@dataclass
class Bounds:
    """When a change counts as a regression (the ``check`` options)."""

    max_change_pct: float = 5.0  # rates and counts: relative change in the bad direction
    max_points: float = 0.5  # metrics in %: change in percentage points
    spacing_points: float = 5.0  # spaced_pct: drop in points (the share moves run to run)
    latency_pct: float = 50.0  # latency: relative rise ...
    latency_floor_ns: float = 100_000.0  # ... and at least this much in absolute terms
    spread_factor: float = 3.0  # with repeats: also beyond K × the spread
    variance_growth: float = 2.0  # with repeats: variance grew by this factor


def regression(c: Change, bounds: Bounds, since: str) -> list[str]:
    """The sentences for one metric's regressions (empty when it is fine)."""
    m = M.metric(c.metric)
    out: list[str] = []
    d = c.delta
    if d is not None and c.worse:
        if m.unit == "%":
            pts = bounds.spacing_points if c.metric in M.SPACING else bounds.max_points
            size, over = abs(d), abs(d) > pts
            words = f"{'rose' if d > 0 else 'fell'} by {size:.2f} points"
            bound = f"the {pts:g}-point bound"
        elif m.unit == "ns":
            p = c.pct
            over = abs(d) > bounds.latency_floor_ns and (p is None or abs(p) > bounds.latency_pct)
            words = f"rose {fmt_pct(p)} ({m.fmt(c.a.median)} → {m.fmt(c.b.median)})"
            bound = f"the {bounds.latency_pct:g} % bound"
        else:
            p = c.pct
            over = p is None or abs(p) > bounds.max_change_pct
            words = f"{'rose' if d > 0 else 'fell'} {fmt_pct(p)}"
            if p is None:
                words = f"rose from {m.fmt(c.a.median)} to {m.fmt(c.b.median)}"
            bound = f"the {bounds.max_change_pct:g} % bound"
        beyond = c.beyond_spread
        if over and beyond is not False:
            why = (
                f"beyond {bounds.spread_factor:g} × the spread"
                if beyond
                else f"beyond {bound}; no repeats, so no spread"
            )
            out.append(f"{m.label} median {words} since build {since} ({why})")
    if variance_grew(c, bounds):
        va, vb = c.a.variance or 0.0, c.b.variance or 0.0
        out.append(
            f"{m.label} variance grew {vb / va:.1f}× since build {since} (spread "
            f"{m.fmt(c.a.spread)} → {m.fmt(c.b.spread)}, {c.a.n} and {c.b.n} samples)"
        )
    return out


MIN_VARIANCE_SAMPLES = 3


def variance_grew(c: Change, bounds: Bounds) -> bool:
    """The variance grew beyond ``variance_growth`` and the new spread matters.

    Needs at least three samples a side (a two-sample variance says little), and a new
    spread large enough to hide a change of the metric's own bound (bound / K): a spread
    that grows from 1 pps to 17 pps at 5 kpps is not a regression.
    """
    m = M.metric(c.metric)
    va, vb, med = c.a.variance, c.b.variance, c.b.median
    if m.better is None or not va or vb is None or med is None:
        return False
    if min(c.a.n, c.b.n) < MIN_VARIANCE_SAMPLES or vb / va <= bounds.variance_growth:
        return False
    if m.unit == "%":
        material = bounds.max_points
    elif m.unit == "ns":
        material = max(bounds.latency_floor_ns, abs(med) * bounds.latency_pct / 100.0)
    else:
        material = abs(med) * bounds.max_change_pct / 100.0
    k = bounds.spread_factor or 1.0
    return math.sqrt(vb) > material / k


def fmt_pct(p: float | None) -> str:
    return "-" if p is None or not math.isfinite(p) else f"{abs(p):.1f} %"


def previous_build(
    conn: sqlite3.Connection,
    *,
    dut: str,
    build: str,
    test: str,
    profile_hash: str | None,
    before: str,
    before_id: int,
) -> str | None:
    """The build of the DUT's newest complete run with another build that started before
    run ``before_id`` (started at ``before``; ties broken by run id)."""
    row = conn.execute(
        "SELECT build FROM runs WHERE dut = ? AND test = ? AND profile_hash IS ? AND build != ?"
        " AND partial = 0 AND (started_at < ? OR (started_at = ? AND id < ?))"
        " ORDER BY started_at DESC, id DESC LIMIT 1",
        (dut, test, profile_hash, build, before, before, before_id),
    ).fetchone()
    return row[0] if row else None


@dataclass
class Verdict:
    """The outcome of checking one build (or run) against a baseline build."""

    since: str
    sentences: list[str]
    checked: list[Change]
    skipped: list[str]  # latency metrics left out for want of repeats
    flagged: list[Change] = field(default_factory=list)  # the metrics that regressed

    def short(self) -> str:
        """'rx pps -8.9 %, loss +8.90 pt': the regressed metrics in a few characters."""
        parts = []
        for c in self.flagged:
            m = M.metric(c.metric)
            if m.unit == "%" or c.pct is None:
                parts.append(f"{m.label} {c.delta:+.2f}{' pt' if m.unit == '%' else ''}")
            else:
                parts.append(f"{m.label} {c.pct:+.1f} %")
        return ", ".join(parts) or "variance"


def judge(
    changes: list[Change], bounds: Bounds, since: str, metrics: list[str] | None = None
) -> Verdict:
    """Apply the bounds to ``changes`` (baseline = a, checked = b).

    Default metrics: :data:`metrics.CHECKED` plus a verb's own metrics that have a
    direction; latency ones only where both sides have repeats.
    """
    skipped: list[str] = []
    if metrics:
        wanted = list(metrics)
    else:
        own = [
            c.metric for c in changes if c.metric not in M.CATALOGUE and M.metric(c.metric).better
        ]
        wanted = [*M.CHECKED, *own]
        by = {c.metric: c for c in changes}
        skipped = [
            m
            for m in wanted
            if m in M.NEEDS_REPEATS and (m not in by or by[m].a.n < 2 or by[m].b.n < 2)
        ]
        wanted = [m for m in wanted if m not in skipped]
    checked = [c for c in changes if c.metric in wanted]
    per = [(c, regression(c, bounds, since)) for c in checked]
    sentences = [s for _, ss in per for s in ss]
    return Verdict(since, sentences, checked, skipped, [c for c, ss in per if ss])


def run_verdict(
    conn: sqlite3.Connection, run: dict, bounds: Bounds | None = None
) -> Verdict | None:
    """One run against the previous build of its DUT (same test and profile); None if none."""
    if run.get("partial"):
        return None
    prev = previous_build(
        conn,
        dut=run["dut"],
        build=run["build"],
        test=run["test"],
        profile_hash=run["profile_hash"],
        before=run["started_at"],
        before_id=run["id"],
    )
    if prev is None:
        return None
    g = group_of(
        conn, dut=run["dut"], build=prev, test=run["test"], profile_hash=run["profile_hash"]
    )
    if not g.run_ids:
        return None
    return judge(compare(conn, g.run_ids, [run["id"]]), bounds or Bounds(), prev)
