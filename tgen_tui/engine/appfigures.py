"""A request/response (app) flow's figures, defined once: pure functions from its counter
row (:mod:`tgen_tui.worker.flowcounters`, written by :mod:`tgen_tui.worker.appflows`,
baselines subtracted) and the counts of the sample before.

- **attempted** connections (connect called), **established** (connect completed: the
  socket writable without error), **failed** by reason: *refused* (RST or ICMP
  unreachable to the SYN), *reset* (after establishment, or the server's FIN before its
  response), *timed out* (no connect or no response within the app's timeout), *local*
  (the tester's own limit: no port, address or file descriptor); **closed** (ended by the
  client after its last transaction, or at the stop), **concurrent** (open now);
- **setup time**: connect called to writable, on the client's clock (SYN to established);
  **transaction latency**: request's first byte written to the response read in full;
  both as min/p50/p90/p99/max/avg from the row's fixed-bucket histograms;
- per interval: attempted, established (connections per second) and transactions per s;
- **achieved** (rate loads): attempted / due × 100, *due* being the connections the asked
  rate makes due by now (by the stop): below 100 the tester fell behind (DESIGN rule 7).
"""

from __future__ import annotations

import numpy as np

from tgen_tui.dut.attribution import CAUSE_WORDS
from tgen_tui.engine.snapshot import SetupLatency
from tgen_tui.worker import flowcounters as FC
from tgen_tui.worker.rxstats import hist_percentile_ns

#: the counts whose interval rates a sample needs from the one before
RATE_SLOTS = (FC.FC_ATTEMPTED, FC.FC_ESTABLISHED, FC.FC_TRANSACTIONS)


def quantile(h: np.ndarray, q: float, lo: float, hi: float) -> float | None:
    """The q-quantile of a histogram (its bucket's upper edge), within the exact min/max."""
    v = hist_percentile_ns(h, q)
    return None if v is None else float(min(max(v, lo), hi))


def latency(row: np.ndarray, hist: int, total: int, lo: int, hi: int) -> SetupLatency | None:
    """min/p50/p90/p99/max/avg (ns) from a histogram of the row (its count: the
    histogram's sum) and the exact min/max the worker also keeps."""
    h = row[hist : hist + FC.HIST_BUCKETS]
    n = int(h.sum())
    if n <= 0:
        return None
    lmin, lmax = float(row[lo]), float(row[hi])
    return SetupLatency(
        min=lmin,
        p50=quantile(h, 0.50, lmin, lmax),
        p90=quantile(h, 0.90, lmin, lmax),
        p99=quantile(h, 0.99, lmin, lmax),
        max=lmax,
        avg=float(row[total]) / n,
    )


def rate_counts(row: np.ndarray) -> tuple[int, ...]:
    return tuple(int(row[k]) for k in RATE_SLOTS)


def app_figures(row: np.ndarray, before: tuple[int, ...] | None, dt: float, udp: bool) -> dict:
    """The app part of a flow's figures (FlowStats fields) from its counter row."""
    refused, reset = int(row[FC.FC_FAIL_REFUSED]), int(row[FC.FC_FAIL_RESET])
    timeout, local = int(row[FC.FC_FAIL_TIMEOUT]), int(row[FC.FC_FAIL_LOCAL])
    now = rate_counts(row)
    rates: list[float | None] = [None, None, None]
    if before is not None and dt > 0:
        rates = [max(0.0, (a - b) / dt) for a, b in zip(now, before, strict=True)]
    return {
        "target": int(row[FC.FC_TARGET]) / 1000.0,
        "attempted": now[0],
        "due": int(row[FC.FC_DUE]) or None,
        "achieved_pct": 100.0 * now[0] / int(row[FC.FC_DUE]) if row[FC.FC_DUE] > 0 else None,
        "established": now[1],
        "failed": refused + reset + timeout + local,
        "failed_refused": refused,
        "failed_reset": reset,
        "failed_timeout": timeout,
        "failed_local": local,
        "closed": int(row[FC.FC_CLOSED]),
        "aborted": int(row[FC.FC_ABORTED]),
        "concurrent": int(row[FC.FC_CONCURRENT]),
        "transactions": now[2],
        "served": int(row[FC.FC_SERVED]),
        "attempted_per_s": rates[0],
        "established_per_s": rates[1],
        "transactions_per_s": rates[2],
        "retransmits": None if udp else int(row[FC.FC_RETRANS]),
        "setup_ns": None
        if udp  # no handshake
        else latency(
            row, FC.FC_SETUP_HIST, FC.FC_SETUP_SUM_NS, FC.FC_SETUP_MIN_NS, FC.FC_SETUP_MAX_NS
        ),
        "transaction_ns": latency(
            row, FC.FC_TXN_HIST, FC.FC_TXN_SUM_NS, FC.FC_TXN_MIN_NS, FC.FC_TXN_MAX_NS
        ),
    }


def failure_causes(f, dut) -> list[dict]:
    """The drop counters that moved during the run (the final snapshot's ``dut.counters``,
    those that can explain loss), next to an app flow that had failures: what the DUT or
    the tester dropped while connections failed. Packets, not connections (a SYN sent
    again after its timeout is dropped again); other traffic counts too."""
    if not f.failed or dut is None:
        return []
    rows = [r for r in dut.counters if r.loss_cause and r.frames > 0]
    rows.sort(key=lambda r: -r.frames)
    return [
        {"cause": r.cause, "counter": r.counter, "where": r.where, "packets": r.frames}
        for r in rows
    ]


def why_failed(name: str, f, causes: list[dict]) -> str:
    """``web: 1,234 failed (refused 0, reset 0, timed out 1,234, local 0); dropped meanwhile:
    3,702 nft rule drop on dut (nft ... "ct count over 1000")``."""
    head = f"{name}: {(f.get('failed') if isinstance(f, dict) else f.failed) or 0:,} failed"
    head += f" ({failure_text(f)})"
    if not causes:
        return head + "; no drop counter moved (the DUT's counters were not read, or none)"
    body = ", ".join(
        f"{c['packets']:,} {CAUSE_WORDS.get(c['cause'], c['cause'])} on {c['where']} "
        f"({c['counter']})"
        for c in causes
    )
    return f"{head}; dropped meanwhile: {body}"


def failure_text(f) -> str:
    """``refused 0, reset 2, timed out 31, local 0`` (a FlowStats or a result entry)."""
    get = f.get if isinstance(f, dict) else (lambda k: getattr(f, k))
    return (
        f"refused {get('failed_refused') or 0:,}, reset {get('failed_reset') or 0:,}, "
        f"timed out {get('failed_timeout') or 0:,}, local {get('failed_local') or 0:,}"
    )


__all__ = [
    "RATE_SLOTS",
    "app_figures",
    "failure_causes",
    "failure_text",
    "latency",
    "rate_counts",
    "why_failed",
]
