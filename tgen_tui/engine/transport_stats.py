"""Figures of transport flows: pure functions over the workers' cumulative reports.

A worker reports per flow, once per interval, cumulative ``tx_bytes``/``rx_bytes`` and
(TCP) the sender's ``TCP_INFO`` or (UDP) packets sent, received, expected (highest
sequence + 1) and RFC 3550 jitter. From two consecutive reports:

- goodput = bytes the receiving application read in the interval x 8 / interval (for the
  whole run: the bytes read while the flow was due to send, over that time; what was
  still queued arrives during the drain and counts only in ``rx_bytes``);
- TCP: RTT and RTT variance (the kernel's smoothed estimate, ms), cwnd (segments),
  retransmits (segments retransmitted in the interval), delivery rate (bit/s);
- UDP: loss in the interval (sequence numbers expected but not received), jitter (ms).

Per run: Jain's fairness index over the flows' goodput, and for each Reno flow the
throughput equation of Mathis et al. (1997), ``MSS/RTT x sqrt(3/2)/sqrt(p)``, with ``p``
the share of data segments retransmitted and RTT the flow's mean smoothed RTT, next to
the measured goodput.
"""

from __future__ import annotations

import math

MATHIS_C = math.sqrt(1.5)


def jain(values: list[float]) -> float | None:
    """Jain's fairness index ``(sum x)^2 / (n sum x^2)``: 1 = equal shares, 1/n = one takes all."""
    xs = [float(v) for v in values if v is not None]
    sq = sum(x * x for x in xs)
    if not xs or sq <= 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def mathis_bps(mss_bytes: float, rtt_s: float, p: float) -> float | None:
    """Reno's steady-state throughput predicted by Mathis et al., in bit/s (None if p or RTT is 0)."""
    if p <= 0 or rtt_s <= 0 or mss_bytes <= 0:
        return None
    return mss_bytes * 8.0 / rtt_s * MATHIS_C / math.sqrt(p)


def interval_figures(prev: dict | None, cur: dict, dt: float) -> dict:
    """One flow's figures over one interval, from its previous and current report."""
    p = prev or {}
    out: dict = {
        "goodput_bps": _rate(cur.get("rx_bytes", 0) - p.get("rx_bytes", 0), dt),
        "tx_bps": _rate(cur.get("tx_bytes", 0) - p.get("tx_bytes", 0), dt),
        "rx_bytes": cur.get("rx_bytes", 0),
        "tx_bytes": cur.get("tx_bytes", 0),
    }
    ti = cur.get("tcp_info")
    if ti is not None:
        pti = p.get("tcp_info") or {}
        out |= {
            "rtt_ms": ti["rtt"] / 1e3,
            "rttvar_ms": ti["rttvar"] / 1e3,
            "cwnd": ti["snd_cwnd"],
            "retransmits": ti["total_retrans"] - pti.get("total_retrans", 0),
            "delivery_rate_bps": ti["delivery_rate"] * 8,
        }
    if "rx_packets" in cur:
        exp = cur["expected"] - p.get("expected", 0)
        got = cur["rx_packets"] - p.get("rx_packets", 0)
        out |= {
            "loss_pct": 100.0 * max(0, exp - got) / exp if exp > 0 else None,
            "jitter_ms": cur["jitter_ns"] / 1e6,
        }
    if cur.get("error"):
        out["error"] = cur["error"]
    return out


def _rate(nbytes: int, dt: float) -> float:
    return nbytes * 8.0 / dt if dt > 0 else 0.0


def flow_summary(spec: dict, final: dict, rtts_ms: list[float], run_s: float) -> dict:
    """A flow's figures for the whole run (the result's ``transport.streams`` entry)."""
    start = float(spec.get("start") or 0.0)
    stop = spec.get("stop")
    raw = (min(float(stop), run_s) if stop is not None else run_s) - start
    span = max(1e-9, raw)  # <= 0: the run ended before the flow was due to start
    out: dict = {
        "protocol": spec["proto"],
        "port": spec.get("port"),
        "rx_port": spec.get("rx_port"),
        "tx_bytes": final.get("tx_bytes", 0),
        "rx_bytes": final.get("rx_bytes", 0),
        "span_s": round(max(0.0, raw), 3),
        "goodput_bps": final.get("rx_bytes_span", final.get("rx_bytes", 0)) * 8.0 / span,
    }
    ti = final.get("tcp_info")
    if ti is not None:
        segs = ti.get("data_segs_out", 0)
        p = ti["total_retrans"] / segs if segs else 0.0
        rtt = sum(rtts_ms) / len(rtts_ms) if rtts_ms else ti["rtt"] / 1e3
        out |= {
            "cc": spec.get("cc"),
            "rtt_ms": round(rtt, 3),
            "min_rtt_ms": ti["min_rtt"] / 1e3,
            "retransmits": ti["total_retrans"],
            "data_segs_out": segs,
            "retransmit_pct": 100.0 * p,
            "mss": ti["snd_mss"],
            "cwnd_final": ti["snd_cwnd"],
        }
        if spec.get("cc") == "reno":
            pred = mathis_bps(ti["snd_mss"], rtt / 1e3, p)
            out["mathis_bps"] = pred
            out["mathis_ratio"] = out["goodput_bps"] / pred if pred else None
    if "rx_packets" in final:
        sent, got = final["tx_packets"], final["rx_packets"]
        out |= {
            "tx_packets": sent,
            "rx_packets": got,
            "lost": max(0, sent - got),
            "loss_pct": 100.0 * max(0, sent - got) / sent if sent else None,
            "jitter_ms": final["jitter_ns"] / 1e6,
        }
    if final.get("error"):
        out["error"] = final["error"]
    return out


def run_metrics(streams: dict[str, dict]) -> dict:
    """Headline figures for the results store: total goodput, mean RTT, retransmits, fairness."""
    ran = [s for s in streams.values() if s["span_s"] > 0]  # due to send during the run
    tcp = [s for s in ran if s["protocol"] == "tcp" and "rtt_ms" in s]  # with TCP_INFO
    udp = [s for s in ran if s["protocol"] == "udp" and "tx_packets" in s]
    out: dict = {
        "goodput_bps": sum(s["goodput_bps"] for s in ran),
        "fairness_jain": jain([s["goodput_bps"] for s in tcp] or [s["goodput_bps"] for s in udp]),
    }
    if tcp:
        out["tcp_goodput_bps"] = sum(s["goodput_bps"] for s in tcp)
        out["rtt_ms"] = sum(s["rtt_ms"] for s in tcp) / len(tcp)
        out["retransmits"] = sum(s["retransmits"] for s in tcp)
        segs = sum(s["data_segs_out"] for s in tcp)
        out["retransmit_pct"] = 100.0 * out["retransmits"] / segs if segs else None
    if udp:
        sent = sum(s["tx_packets"] for s in udp)
        out["udp_loss_pct"] = 100.0 * sum(s["lost"] for s in udp) / sent if sent else None
    return out
