"""The metric catalogue and the extraction of metrics from a result document.

A result (``tgen run --json``, see :mod:`tgen_tui.engine.result`) becomes rows of
``(scope, name, metric, value)``: scope ``run`` (name ``""``) holds the headline figures
that ``trend`` and ``check`` use, scopes ``port`` and ``stream`` hold the same figures per
port and per stream. A verb may add its own headline figures in ``result["metrics"]``
(a flat ``{name: number}``), e.g. ``{"throughput_fps": 81234.0}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tgen_tui.fmt as fmt


@dataclass(frozen=True)
class Metric:
    """One metric: what it means, its unit and which way is better."""

    name: str
    label: str  # the words used in sentences: "rx pps", "latency p99"
    unit: str  # pps, %, ns, frames, entries, s
    better: str | None  # "higher", "lower" or None (informational: never a regression)
    help: str

    def fmt(self, v: float | None) -> str:
        return format_value(self.unit, v)


CATALOGUE: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("rx_pps", "rx pps", "pps", "higher", "frames received per second (sum over ports)"),
        Metric("tx_pps", "tx pps", "pps", "higher", "frames sent per second (sum over ports)"),
        Metric("loss_pct", "loss", "%", "lower", "lost frames as % of sent (all streams)"),
        Metric(
            "achieved_pct",
            "achieved rate",
            "%",
            "higher",
            "achieved send rate as % of requested (worst port)",
        ),
        Metric("p50_ns", "latency p50", "ns", "lower", "median latency, worst stream"),
        Metric("p99_ns", "latency p99", "ns", "lower", "99th percentile latency, worst stream"),
        Metric(
            "p999_ns", "latency p99.9", "ns", "lower", "99.9th percentile latency, worst stream"
        ),
        Metric("avg_ns", "latency avg", "ns", "lower", "mean latency, worst stream"),
        Metric("max_ns", "latency max", "ns", "lower", "maximum latency, worst stream"),
        Metric("jitter_ns", "jitter", "ns", "lower", "RFC 3550 jitter, worst stream"),
        Metric(
            "spaced_pct",
            "spaced",
            "%",
            "higher",
            "gaps within 10 % of the asked gap at the receiver (worst stream)",
        ),
        Metric("gap_mae_ns", "gap MAE", "ns", None, "mean |gap - asked gap| at the receiver"),
        Metric("gap_ks", "gap KS", "", None, "KS distance of the gaps from a random law"),
        Metric("tx_frames", "tx frames", "frames", None, "frames sent"),
        Metric("rx_frames", "rx frames", "frames", None, "frames received"),
        Metric("lost", "lost frames", "frames", "lower", "frames sent but never received"),
        Metric("ooo", "out-of-order frames", "frames", "lower", "frames received out of order"),
        Metric("dup", "duplicate frames", "frames", "lower", "frames received twice"),
        Metric("conntrack_peak", "conntrack peak", "entries", None, "DUT conntrack peak count"),
        Metric("conntrack_rise", "conntrack rise", "entries", None, "conntrack rise in the run"),
        Metric("duration_s", "duration", "s", None, "how long the run sent"),
        Metric("goodput_bps", "goodput", "bit/s", "higher", "transport: bytes received x 8 / s"),
        Metric("rtt_ms", "rtt", "ms", None, "transport: TCP smoothed RTT, mean over flows"),
        Metric("retransmits", "retransmits", "segments", None, "transport: TCP retransmits"),
        Metric(
            "retransmit_pct", "retransmitted", "%", "lower", "transport: TCP retransmitted share"
        ),
        Metric("fairness_jain", "Jain's fairness", "", None, "transport: over the TCP flows"),
        Metric("tcp_goodput_bps", "tcp goodput", "bit/s", None, "transport: TCP flows' sum"),
        Metric("udp_loss_pct", "udp loss", "%", None, "transport: UDP datagrams lost"),
        Metric(
            "app_established_per_s",
            "connections/s",
            "conn/s",
            "higher",
            "transport: app flows' connections set up per second over the run",
        ),
        Metric("app_failed", "failed connections", "conns", "lower", "transport: app flows"),
        Metric("app_setup_p99_ns", "setup p99", "ns", None, "transport: connect to writable"),
        Metric(
            "app_transaction_p99_ns",
            "transaction p99",
            "ns",
            None,
            "transport: request to response read",
        ),
        Metric(
            "loss_unexplained",
            "unexplained loss",
            "frames",
            "lower",
            "lost frames no drop counter explains (per stream; loss_cause.<cause>: explained)",
        ),
    )
}

# The headline metrics that ``check`` examines by default. Counts (lost, ooo, dup) are
# covered by loss_pct or named with --metric; tail latencies (p99.9, max) are single
# extreme samples, too noisy to judge a build by.
CHECKED = ["rx_pps", "tx_pps", "loss_pct", "achieved_pct", "p50_ns", "p99_ns"]
CHECKED += ["goodput_bps", "retransmit_pct"]  # socket flows (tgen_tui.engine.flowfigures)
CHECKED += ["spaced_pct"]  # spacing at the receiver (tgen_tui.engine.spacing)
SPACING = {"spaced_pct"}  # judged against Bounds.spacing_points, not max_points
# Latency is judged only with repeats on both sides unless named with --metric: one run's
# percentile moves by several times on a busy tester (147 us -> 524 us seen between two
# identical 1 s runs in the lab).
NEEDS_REPEATS = {"p50_ns", "p99_ns", "p999_ns", "avg_ns", "max_ns", "jitter_ns"}


def metric(name: str) -> Metric:
    """The catalogue entry, or a generic one for a verb's own metric (rates: higher is better)."""
    if name in CATALOGUE:
        return CATALOGUE[name]
    unit, better = "", None
    if name.endswith(("_pps", "_fps")):
        unit, better = "pps", "higher"
    elif name.endswith("_ns"):
        unit, better = "ns", "lower"
    elif name.endswith("_pct"):
        unit = "%"
    return Metric(name, name.replace("_", " "), unit, better, "recorded by the verb")


def format_value(unit: str, v: float | None) -> str:
    """A value with its unit, through the shared formatter."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return fmt.DASH
    if unit == "pps":
        return fmt.pps(v)
    if unit == "%":
        return fmt.pct(v, 3)
    if unit == "ns":
        return fmt.ns(v)
    if unit in ("frames", "entries"):
        return fmt.count(v)
    if unit == "s":
        return fmt.seconds(v)
    if unit == "bit/s":
        return fmt.bps(v)
    if unit == "ms":
        return f"{v:.3f} ms"
    return f"{v:.6g}"


def catalogue_help() -> str:
    """The metric list for ``--help``."""
    width = max(len(m.name) for m in CATALOGUE.values()) + 2  # a name never runs into its text
    lines = []
    for m in CATALOGUE.values():
        unit = f" ({m.unit})" if m.unit else ""
        lines.append(f"  {m.name:<{width}}{m.help}{unit}")
    return "\n".join(lines)


def _num(v) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float) and math.isfinite(float(v)):
        return float(v)
    return None


def _worst(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def loss_cause_metrics(s: dict) -> dict[str, float | None]:
    """A stream's attribution as metrics: ``loss_unexplained`` and ``loss_cause.<cause>``
    (frames, summed over the counters of that cause)."""
    out: dict[str, float | None] = {}
    causes = s.get("loss_causes")
    if isinstance(causes, list):
        out["loss_unexplained"] = _num(s.get("loss_unexplained"))
        for c in causes:
            if isinstance(c, dict) and c.get("cause"):
                k = f"loss_cause.{c['cause']}"
                out[k] = (out.get(k) or 0.0) + (_num(c.get("frames")) or 0.0)
    return out


def spacing_metrics(s: dict) -> dict[str, float | None]:
    """A stream's spacing (``streams[].spacing``) as metrics: spaced_pct (within 10 % of
    the asked gap, in %), gap_mae_ns, gap_ks; nothing when the stream has none."""
    sp = s.get("spacing")
    if not isinstance(sp, dict):
        return {}
    w = _num(sp.get("within_10pct"))
    return {
        "spaced_pct": 100.0 * w if w is not None else None,
        "gap_mae_ns": _num(sp.get("mae_ns")),
        "gap_ks": _num(sp.get("ks")),
    }


def extract(result: dict) -> list[tuple[str, str, str, float]]:
    """Every metric of a result document as ``(scope, name, metric, value)`` rows."""
    rows: list[tuple[str, str, str, float]] = []
    dur = _num(result.get("duration_s")) or 0.0
    ports = result.get("ports") or {}
    streams = result.get("streams") or {}
    run: dict[str, float | None] = {}

    for pname, p in ports.items():
        if not isinstance(p, dict):
            continue
        vals = {
            "tx_pps": _num(p.get("tx_pps_mean")),
            "rx_pps": _num(p.get("rx_pps_mean")),
            "tx_frames": _num(p.get("tx_frames")),
            "rx_frames": _num(p.get("rx_frames")),
            "achieved_pct": _num(p.get("achieved_pct")),
            "requested_pps": _num(p.get("requested_pps")),
            "rx_drops": _num(p.get("rx_drops")),
            "tx_errors": _num(p.get("tx_errors")),
            "if_rx_dropped": _num(p.get("if_rx_dropped")),
        }
        rows += [("port", pname, k, v) for k, v in vals.items() if v is not None]
    lat_by_stream: dict[str, dict[str, float | None]] = {}
    for sname, s in streams.items():
        if not isinstance(s, dict):
            continue
        lat = s.get("latency_ns") or {}
        tx, rx = _num(s.get("tx_frames")), _num(s.get("rx_frames"))
        vals = {
            "tx_frames": tx,
            "rx_frames": rx,
            "tx_pps": tx / dur if tx is not None and dur > 0 else None,
            "rx_pps": rx / dur if rx is not None and dur > 0 else None,
            "lost": _num(s.get("lost")),
            "loss_pct": _num(s.get("loss_pct")),
            "ooo": _num(s.get("out_of_order")),
            "dup": _num(s.get("duplicates")),
        }
        vals.update(loss_cause_metrics(s))
        vals.update(spacing_metrics(s))
        lats = {f"{k}_ns": _num(lat.get(k)) for k in ("min", "avg", "p50", "p99", "p999", "max")}
        lats["jitter_ns"] = _num(lat.get("jitter"))
        lat_by_stream[sname] = lats
        vals.update(lats)
        rows += [("stream", sname, k, v) for k, v in vals.items() if v is not None]

    if ports:
        pv = [p for p in ports.values() if isinstance(p, dict)]
        run["tx_pps"] = sum(_num(p.get("tx_pps_mean")) or 0.0 for p in pv)
        run["rx_pps"] = sum(_num(p.get("rx_pps_mean")) or 0.0 for p in pv)
        run["tx_frames"] = sum(_num(p.get("tx_frames")) or 0.0 for p in pv)
        run["rx_frames"] = sum(_num(p.get("rx_frames")) or 0.0 for p in pv)
        ach = [_num(p.get("achieved_pct")) for p in pv]
        ach_vals = [a for a in ach if a is not None]
        run["achieved_pct"] = min(ach_vals) if ach_vals else None
    if streams:
        sv = [s for s in streams.values() if isinstance(s, dict)]
        tx = sum(_num(s.get("tx_frames")) or 0.0 for s in sv)
        lost = sum(_num(s.get("lost")) or 0.0 for s in sv)
        run["lost"] = lost
        run["loss_pct"] = 100.0 * lost / tx if tx > 0 else None
        run["ooo"] = sum(_num(s.get("out_of_order")) or 0.0 for s in sv)
        run["dup"] = sum(_num(s.get("duplicates")) or 0.0 for s in sv)
        for k in ("p50_ns", "p99_ns", "p999_ns", "avg_ns", "max_ns", "jitter_ns"):
            run[k] = _worst([v.get(k) for v in lat_by_stream.values()])
        spaced = [spacing_metrics(s).get("spaced_pct") for s in sv]
        run["spaced_pct"] = min((v for v in spaced if v is not None), default=None)
    rows += _transport_rows(result.get("transport"))
    dut = result.get("dut") or {}
    if isinstance(dut, dict):
        run["conntrack_peak"] = _num(dut.get("conntrack_peak"))
        run["conntrack_rise"] = _num(dut.get("conntrack_rise"))
    if dur > 0:
        run["duration_s"] = dur
    for k, v in (result.get("metrics") or {}).items():
        run[str(k)] = _num(v)
    rows += [("run", "", k, v) for k, v in run.items() if v is not None]
    return rows


_TRANSPORT_STREAM_METRICS = (
    "goodput_bps", "rtt_ms", "retransmits", "retransmit_pct", "loss_pct", "jitter_ms",
    "mathis_bps", "mathis_ratio",
)  # fmt: skip


def _transport_rows(tr) -> list[tuple[str, str, str, float]]:
    """Per transport stream rows (``tgen run`` of a profile with transport: streams)."""
    if not isinstance(tr, dict) or not isinstance(tr.get("streams"), dict):
        return []
    rows = []
    for name, s in tr["streams"].items():
        if isinstance(s, dict):
            for k in _TRANSPORT_STREAM_METRICS:
                v = _num(s.get(k))
                if v is not None:
                    rows.append(("stream", str(name), k, v))
    return rows


def trial_samples(trials: list[dict], name: str) -> list[float]:
    """The values of metric ``name`` in the trials that are repeats of one measurement.

    A trial counts as a repeat when it carries ``"repeat"`` (its index); its metric values
    are either top-level numbers or under ``"metrics"``. Other trials (binary-search steps)
    are kept raw but give no spread.
    """
    out = []
    for t in trials:
        if not isinstance(t, dict) or "repeat" not in t:
            continue
        src = t.get("metrics") if isinstance(t.get("metrics"), dict) else t
        v = _num(src.get(name))
        if v is not None:
            out.append(v)
    return out


def tick_formatter(unit: str, hi: float, step: float):
    """A formatter for axis ticks ``step`` apart: one scale for the whole axis (chosen by the
    largest value ``hi``) and enough decimals to tell neighbouring ticks apart."""
    mag = abs(hi) or abs(step) or 1.0
    if unit in ("pps", "ns"):
        if unit == "pps":
            scales = ((1e9, "Gpps"), (1e6, "Mpps"), (1e3, "kpps"), (1.0, "pps"))
        else:
            scales = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))
        scale, suffix = next(((s, u) for s, u in scales if mag >= s), scales[-1])
    elif unit == "%":
        scale, suffix = 1.0, "%"
    else:
        scale, suffix = 1.0, unit
    rel = abs(step) / scale if step else 1.0
    # the fewest decimals that write the step exactly (2.5 → 1, 0.005 → 3)
    dec = next((d for d in range(7) if abs(round(rel * 10**d) - rel * 10**d) < 1e-6), 6)

    def f(v: float) -> str:
        return f"{v / scale:,.{dec}f} {suffix}".rstrip()

    return f


def nice_ticks(lo: float, hi: float, n: int = 5) -> tuple[list[float], float]:
    """About ``n`` ticks at round values (1, 2, 5 × 10^k apart) covering [lo, hi]."""
    span = hi - lo
    if span <= 0:
        span = abs(hi) or 1.0
    raw = span / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks, step
