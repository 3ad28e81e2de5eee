"""Every figure of a socket flow, defined once: pure functions from a flow worker's
counter row (:mod:`tgen_tui.worker.flowcounters`, baselines subtracted) and the row of
the sample before. The snapshot's ``flows`` table, the NDJSON lines, the console and the
run's result (``transport``) all read these numbers; nothing recomputes them.

- **goodput** (live): bytes the receiving application read over the interval × 8 / the
  interval (:func:`per_s_bits`); **goodput over the run** (:func:`goodput_mean_bps`): the
  bytes read while the flow was due to send (its schedule on, its port running) × 8 /
  the time it was due to send, so an on/off flow's off time does not dilute it and bytes
  still queued at the stop (read during the drain) count in ``rx_bytes`` only;
- **RTT** (TCP): the kernel's smoothed estimate now, and its mean over the samples taken
  while the flow had data acknowledged (:func:`rtt_mean_ms`);
- **retransmitted share** = segments retransmitted / data segments sent;
- **UDP loss** = datagrams the receiver should have (the highest sequence + 1 while the
  flow runs; every datagram sent once it stopped and drained) − datagrams received, as %
  of those it should have (:func:`udp_loss`);
- **Jain's fairness index** ``(Σx)² / (n Σx²)`` over the TCP flows (UDP when there are
  none) that are due to send, a starved one counting with 0 (:func:`fairness`): live over
  the interval goodput, for the run over the run goodput;
- **Mathis et al. (1997)**: Reno's steady-state throughput ``MSS/RTT × √(3/2) / √p``,
  from the flow's MSS, mean RTT and retransmitted share, next to its goodput.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tgen_tui.worker import flowcounters as FC

MATHIS_C = math.sqrt(1.5)


def per_s_bits(now_bytes: int, before_bytes: int, dt: float) -> float:
    """Bit/s from two readings of a byte counter ``dt`` seconds apart."""
    return (now_bytes - before_bytes) * 8.0 / dt if dt > 0 else 0.0


def goodput_mean_bps(rx_bytes_due: int, active_ns: int) -> float | None:
    """The run's goodput: bytes read while due to send × 8 / the time due to send."""
    return rx_bytes_due * 8e9 / active_ns if active_ns > 0 else None


def rtt_mean_ms(rtt_sum_us: int, samples: int) -> float | None:
    """The mean smoothed RTT over the samples taken while the flow delivered data."""
    return rtt_sum_us / samples / 1e3 if samples > 0 else None


def retransmit_pct(retrans: int, data_segs_out: int) -> float | None:
    return 100.0 * retrans / data_segs_out if data_segs_out > 0 else None


def udp_loss(expected: int, received: int) -> tuple[int, float | None]:
    """(datagrams lost, loss %) of a UDP flow: those it should have minus those it got."""
    lost = max(0, expected - received)
    return lost, (100.0 * lost / expected if expected > 0 else None)


def jain(values: Iterable[float]) -> float | None:
    """Jain's fairness index ``(Σx)² / (n Σx²)``: 1 = equal shares, 1/n = one takes all
    (None without a value, or when every value is 0)."""
    xs = [float(v) for v in values]
    sq = sum(x * x for x in xs)
    if not xs or sq <= 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def fairness(flows: Iterable[tuple[str, bool, float | None]]) -> float | None:
    """Jain's index over the TCP flows (else the UDP flows) that are due to send:
    ``flows`` gives (protocol, due to send, goodput); a starved flow counts with 0."""
    items = [(proto, x) for proto, due, x in flows if due]
    tcp = [x or 0.0 for proto, x in items if proto == "tcp"]
    return jain(tcp or [x or 0.0 for _, x in items])


def mathis_bps(mss_bytes: float, rtt_s: float, p: float) -> float | None:
    """Reno's throughput predicted by Mathis et al., bit/s (None if p, RTT or MSS is 0)."""
    if p <= 0 or rtt_s <= 0 or mss_bytes <= 0:
        return None
    return mss_bytes * 8.0 / rtt_s * MATHIS_C / math.sqrt(p)


def tcp_figures(row, cc: str | None, goodput_run: float | None) -> dict:
    """The TCP part of a flow's figures from its counter row."""
    rtt_mean = rtt_mean_ms(int(row[FC.FC_RTT_SUM_US]), int(row[FC.FC_RTT_SAMPLES]))
    segs = int(row[FC.FC_DATA_SEGS_OUT])
    pct = retransmit_pct(int(row[FC.FC_RETRANS]), segs)
    read = bool(row[FC.FC_TI_READS])
    out: dict = {
        "rtt_ms": int(row[FC.FC_RTT_US]) / 1e3 if read else None,
        "rttvar_ms": int(row[FC.FC_RTTVAR_US]) / 1e3 if read else None,
        "min_rtt_ms": int(row[FC.FC_MIN_RTT_US]) / 1e3 if read else None,
        "rtt_mean_ms": rtt_mean,
        "cwnd": int(row[FC.FC_CWND]) if read else None,
        "mss": int(row[FC.FC_MSS]) or None,
        "delivery_rate_bps": int(row[FC.FC_DELIVERY_RATE]) * 8.0 if read else None,
        "retransmits": int(row[FC.FC_RETRANS]),
        "data_segs_out": segs,
        "retransmit_pct": pct,
        "connections": int(row[FC.FC_CONNECTIONS]),
    }
    if cc == "reno" and pct and rtt_mean and out["mss"]:
        pred = mathis_bps(out["mss"], rtt_mean / 1e3, pct / 100.0)
        out["mathis_bps"] = pred
        out["mathis_ratio"] = goodput_run / pred if (pred and goodput_run is not None) else None
    return out


def udp_figures(row) -> dict:
    """The UDP part of a flow's figures from its counter row."""
    got = int(row[FC.FC_RX_PACKETS])
    lost, pct = udp_loss(int(row[FC.FC_EXPECTED]), got)
    return {
        "requested_bps": float(row[FC.FC_RATE_BPS]),
        "tx_packets": int(row[FC.FC_TX_PACKETS]),
        "rx_packets": got,
        "lost": lost,
        "loss_pct": pct,
        "jitter_ms": int(row[FC.FC_JITTER_NS]) / 1e6,
    }


def state_name(code: int) -> str:
    return FC.STATES[code] if 0 <= code < len(FC.STATES) else "unknown"


__all__ = [
    "MATHIS_C",
    "fairness",
    "goodput_mean_bps",
    "jain",
    "mathis_bps",
    "per_s_bits",
    "retransmit_pct",
    "rtt_mean_ms",
    "state_name",
    "tcp_figures",
    "udp_figures",
    "udp_loss",
]
