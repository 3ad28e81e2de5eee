"""``--fail-on`` expressions: pass/fail thresholds for CI, e.g. ``loss>0.1%`` or ``p99>2ms``.

Grammar: ``METRIC OP VALUE[UNIT]``, several separated by commas or given as repeated
options. A run fails (exit 1) when any expression is true for the final result.

metrics (evaluated per stream unless noted; the worst stream decides):
  loss       lost frames as % of sent (``loss>0%``, ``loss>=0.01%``); without % it is frames
  lost       lost frames (count)
  ooo, dup   out-of-order and duplicate frames (count)
  p50, p99, p999, avg, max, min, jitter   latency (ns, us, ms, s; bare numbers are µs)
  achieved   achieved send rate as % of requested, per port (``achieved<99%``)
  conntrack  DUT conntrack peak, % of max with %, else entries (``conntrack>90%``)
  rx_pps, tx_pps   mean received / sent frames per second per port
socket flows (the profile's ``transport:``; the worst flow decides):
  goodput    a flow's goodput over the run, bit/s (``goodput<50M``; k, M, G)
  rtt        a TCP flow's mean RTT (``rtt>40ms``; bare numbers are ms)
  retrans    a TCP flow's retransmitted share, % (``retrans>1%``)
  udp_loss   a UDP flow's datagrams lost, % (``udp_loss>0.5%``)
request/response (app) flows (the worst app flow decides):
  conn_failed  failed connections (count; with %, of those attempted: ``conn_failed>0.1%``)
  cps          connections established per second over the run (``cps<1900``)
  setup_p99, txn_p99   setup time (connect to writable) and transaction time p99
               (``setup_p99>5ms``; bare numbers are ms)
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.figures import achieved_pct, loss_pct
from tgen_tui.profiles.units import time_ns

if TYPE_CHECKING:
    from tgen_tui.results.models import RunResult

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}
_EXPR = re.compile(
    r"^\s*([a-z_0-9]+)\s*(>=|<=|==|>|<)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(%|ns|us|µs|ms|s|k|M|G)?\s*$"
)
LATENCY = ("p50", "p99", "p999", "avg", "max", "min", "jitter")
FLOW_METRICS = ("goodput", "rtt", "retrans", "udp_loss")
APP_METRICS = ("conn_failed", "cps", "setup_p99", "txn_p99")
METRICS = (
    "loss", "lost", "ooo", "dup", "achieved", "conntrack", "rx_pps", "tx_pps", *LATENCY,
    *FLOW_METRICS, *APP_METRICS,
)  # fmt: skip
_SI = {"k": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class Threshold:
    text: str
    metric: str
    op: str
    value: float  # in base units: %, frames, ns, entries, pps
    percent: bool

    def breached(self, x: float | None) -> bool:
        return x is not None and _OPS[self.op](x, self.value)


_PERCENT = ("loss", "achieved", "conntrack", "retrans", "udp_loss", "conn_failed")
_TIME_UNITS = (None, "ns", "us", "µs", "ms", "s")


def _value(text: str, metric: str, num: float, unit: str | None) -> float:
    """The threshold's value in its metric's base unit (%, frames, ns, ms, bit/s, pps);
    BadInput for a unit that does not fit the metric."""
    pct = unit == "%"
    if pct and metric not in _PERCENT:
        raise BadInput(f"--fail-on {text!r}: % applies to {', '.join(_PERCENT)}")
    if metric in ("retrans", "udp_loss", "achieved") and not pct:
        example = {"achieved": "achieved<99%", "retrans": "retrans>1%", "udp_loss": "udp_loss>0.5%"}
        raise BadInput(f"--fail-on {text!r}: {metric} is a percentage, e.g. {example[metric]}")
    if metric == "rtt":  # ms (bare numbers too)
        if unit not in _TIME_UNITS:
            raise BadInput(f"--fail-on {text!r}: rtt takes a time unit (ms, s)")
        return time_ns(num, unit, bare="ms") / 1e6
    if metric in ("setup_p99", "txn_p99"):  # ns (bare numbers are ms)
        if unit not in _TIME_UNITS:
            raise BadInput(f"--fail-on {text!r}: {metric} takes a time unit (us, ms, s)")
        return time_ns(num, unit, bare="ms")
    if metric in LATENCY:  # ns (bare numbers are µs)
        if unit not in _TIME_UNITS:
            raise BadInput(f"--fail-on {text!r}: latency takes a time unit (ns, us, ms, s)")
        return time_ns(num, unit, bare="us")
    if unit in _SI:
        return num * _SI[unit]
    if unit not in (None, "%") or (metric == "goodput" and unit):
        raise BadInput(f"--fail-on {text!r}: unit {unit} does not fit {metric}")
    return num


def parse_threshold(text: str) -> Threshold:
    m = _EXPR.match(text)
    if not m:
        raise BadInput(
            f"--fail-on {text!r}: expected METRIC OP VALUE, e.g. loss>0.1%, p99>2ms, "
            "conntrack>90%, achieved<99%, goodput<50M"
        )
    metric, op, num, unit = m.groups()
    if metric not in METRICS:
        raise BadInput(
            f"--fail-on {text!r}: unknown metric {metric!r} (known: {', '.join(METRICS)})"
        )
    v = _value(text, metric, float(num), unit)
    pct = unit == "%" and metric not in ("retrans", "udp_loss")
    return Threshold(text.strip(), metric, op, v, pct)


def parse_thresholds(items: list[str] | None) -> list[Threshold]:
    out = []
    for item in items or []:
        for part in item.split(","):
            if part.strip():
                out.append(parse_threshold(part))
    return out


Candidates = Callable[["Threshold", "RunResult"], Iterator[tuple[str, float | None]]]


def _streams(th: Threshold, r: RunResult) -> Iterator[tuple[str, float | None]]:
    for name, s in r.streams.items():
        if th.metric == "loss":
            x = loss_pct(s.lost, s.tx_frames) if th.percent else s.lost
        elif th.metric in ("lost", "ooo", "dup"):
            x = {"lost": s.lost, "ooo": s.out_of_order, "dup": s.duplicates}[th.metric]
        else:
            x = getattr(s.latency_ns, th.metric)
        yield f"stream {name}", x


def _ports(th: Threshold, r: RunResult) -> Iterator[tuple[str, float | None]]:
    for name, p in r.ports.items():
        if th.metric == "achieved":  # the engine's figure (engine/figures.py)
            x = achieved_pct(p.achieved_pps or 0, p.requested_pps or 0)
        else:
            x = p.rx_pps_mean if th.metric == "rx_pps" else p.tx_pps_mean
        yield f"port {name}", x


def _dut(th: Threshold, r: RunResult) -> Iterator[tuple[str, float | None]]:
    peak = r.dut.conntrack_peak if r.dut else None
    cmax = r.dut.conntrack_max if r.dut else None
    yield (
        "dut",
        ((100.0 * peak / cmax if peak is not None and cmax else None) if th.percent else peak),
    )


def _flows(th: Threshold, r: RunResult) -> Iterator[tuple[str, float | None]]:
    for name, f in (r.transport.streams if r.transport else {}).items():
        if th.metric == "goodput":
            yield f"flow {name}", f.goodput_bps
        elif th.metric == "udp_loss" and f.protocol == "udp":
            yield f"flow {name}", f.loss_pct
        elif th.metric in ("rtt", "retrans") and f.protocol == "tcp":
            yield f"flow {name}", f.rtt_ms if th.metric == "rtt" else f.retransmit_pct


def _apps(th: Threshold, r: RunResult) -> Iterator[tuple[str, float | None]]:
    for name, f in (r.transport.streams if r.transport else {}).items():
        if f.app is None:
            continue
        if th.metric == "conn_failed":
            n, of = f.failed or 0, f.attempted or 0
            yield f"flow {name}", (100.0 * n / of if of else None) if th.percent else n
        elif th.metric == "cps":
            yield f"flow {name}", f.established_per_s
        else:
            part = f.setup_ns if th.metric == "setup_p99" else f.transaction_ns
            yield f"flow {name}", (part or {}).get("p99")


_CANDIDATES: dict[str, Candidates] = {
    **dict.fromkeys(("loss", "lost", "ooo", "dup", *LATENCY), _streams),
    **dict.fromkeys(("achieved", "rx_pps", "tx_pps"), _ports),
    "conntrack": _dut,
    **dict.fromkeys(FLOW_METRICS, _flows),
    **dict.fromkeys(APP_METRICS, _apps),
}


def evaluate(thresholds: list[Threshold], result: RunResult) -> list[dict]:
    """Breached thresholds against a run's typed result: each with the worst place
    (the one farthest past the bound) and its value."""
    breaches = []
    for th in thresholds:
        worst: tuple[str, float] | None = None
        for where, x in _CANDIDATES[th.metric](th, result):
            if x is None or not th.breached(x):
                continue
            if worst is None or abs(x - th.value) > abs(worst[1] - th.value):
                worst = (where, x)
        if worst is not None:
            breaches.append({"threshold": th.text, "where": worst[0], "value": worst[1]})
    return breaches
