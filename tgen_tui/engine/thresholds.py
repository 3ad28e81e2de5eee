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
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.figures import achieved_pct, loss_pct

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}
_EXPR = re.compile(
    r"^\s*([a-z_0-9]+)\s*(>=|<=|==|>|<)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(%|ns|us|µs|ms|s|k|M)?\s*$"
)
_TIME = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, None: 1e3}
LATENCY = ("p50", "p99", "p999", "avg", "max", "min", "jitter")
METRICS = ("loss", "lost", "ooo", "dup", "achieved", "conntrack", "rx_pps", "tx_pps", *LATENCY)


@dataclass(frozen=True)
class Threshold:
    text: str
    metric: str
    op: str
    value: float  # in base units: %, frames, ns, entries, pps
    percent: bool

    def breached(self, x: float | None) -> bool:
        return x is not None and _OPS[self.op](x, self.value)


def parse_threshold(text: str) -> Threshold:
    m = _EXPR.match(text)
    if not m:
        raise BadInput(
            f"--fail-on {text!r}: expected METRIC OP VALUE, e.g. loss>0.1%, p99>2ms, conntrack>90%, achieved<99%"
        )
    metric, op, num, unit = m.groups()
    if metric not in METRICS:
        raise BadInput(
            f"--fail-on {text!r}: unknown metric {metric!r} (known: {', '.join(METRICS)})"
        )
    v = float(num)
    pct = unit == "%"
    if metric in LATENCY:
        if pct or unit in ("k", "M"):
            raise BadInput(f"--fail-on {text!r}: latency takes a time unit (ns, us, ms, s)")
        v *= _TIME[unit]
    elif metric == "achieved":
        if not pct:
            raise BadInput(
                f"--fail-on {text!r}: achieved is a percentage of the requested rate, e.g. achieved<99%"
            )
    elif unit in ("k", "M"):
        v *= 1e3 if unit == "k" else 1e6
    elif unit not in (None, "%"):
        raise BadInput(f"--fail-on {text!r}: unit {unit} does not fit {metric}")
    if pct and metric not in ("loss", "achieved", "conntrack"):
        raise BadInput(f"--fail-on {text!r}: % applies to loss, achieved and conntrack only")
    return Threshold(text.strip(), metric, op, v, pct)


def parse_thresholds(items: list[str] | None) -> list[Threshold]:
    out = []
    for item in items or []:
        for part in item.split(","):
            if part.strip():
                out.append(parse_threshold(part))
    return out


def evaluate(thresholds: list[Threshold], result: dict) -> list[dict]:
    """Breached thresholds against a final result dict (shape of ``tgen run --json``)."""
    breaches = []
    streams = result.get("streams", {})
    ports = result.get("ports", {})
    for th in thresholds:
        worst: tuple[str, float] | None = None
        cands: list[tuple[str, float | None]] = []
        if th.metric in ("loss", "lost", "ooo", "dup") or th.metric in LATENCY:
            for name, s in streams.items():
                if th.metric == "loss":
                    sent = s.get("tx_frames", 0)
                    x = loss_pct(s.get("lost", 0), sent) if th.percent else s.get("lost", 0)
                elif th.metric == "lost":
                    x = s.get("lost", 0)
                elif th.metric == "ooo":
                    x = s.get("out_of_order", 0)
                elif th.metric == "dup":
                    x = s.get("duplicates", 0)
                else:
                    x = (s.get("latency_ns") or {}).get(th.metric)
                cands.append((f"stream {name}", x))
        elif th.metric in ("achieved", "rx_pps", "tx_pps"):
            for name, p in ports.items():
                if th.metric == "achieved":  # the engine's figure (engine/figures.py)
                    x = achieved_pct(p.get("achieved_pps", 0), p.get("requested_pps") or 0)
                else:
                    x = p.get("rx_pps_mean" if th.metric == "rx_pps" else "tx_pps_mean")
                cands.append((f"port {name}", x))
        elif th.metric == "conntrack":
            dut = result.get("dut") or {}
            peak, cmax = dut.get("conntrack_peak"), dut.get("conntrack_max")
            x = (100.0 * peak / cmax if peak is not None and cmax else None) if th.percent else peak
            cands.append(("dut", x))
        for where, x in cands:
            if x is None or not th.breached(x):
                continue
            if worst is None or abs(x - th.value) > abs(worst[1] - th.value):
                worst = (where, x)
        if worst is not None:
            breaches.append({"threshold": th.text, "where": worst[0], "value": worst[1]})
    return breaches
