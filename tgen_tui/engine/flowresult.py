"""The run result's ``transport`` part: the socket flows of the final snapshot, copied.

Names as the result has had them since transport flows came in (a stored run keeps its
shape): per flow ``goodput_bps`` is the goodput over the run (bytes read while due to
send / the time due to send: :func:`tgen_tui.engine.flowfigures.goodput_mean_bps`),
``rtt_ms`` the mean smoothed RTT while it delivered data, ``span_s`` the time it was due
to send, ``cwnd_final`` its last cwnd; the headline ``metrics`` (the results store's
``goodput_bps``, ``retransmit_pct``, ``fairness_jain``, ...) are sums and means of those.
"""

from __future__ import annotations

from dataclasses import asdict

from tgen_tui.engine.snapshot import FlowStats, StatsSnapshot


def flow_result(f: FlowStats) -> dict:
    """One flow's entry of ``transport.streams``."""
    d = {
        k: v
        for k, v in asdict(f).items()
        if v is not None and k not in ("goodput_bps", "tx_bps", "on", "rtt_ms", "cwnd")
    }
    d["goodput_bps"] = f.goodput_run_bps or 0.0
    d["span_s"] = round(f.active_s, 3)
    if f.protocol == "tcp":
        d["rtt_ms"] = f.rtt_mean_ms if f.rtt_mean_ms is not None else f.rtt_ms
        d["rtt_now_ms"] = f.rtt_ms
        d["cwnd_final"] = f.cwnd
    return d


def run_metrics(streams: dict[str, dict], fairness: float | None) -> dict:
    """The headline figures of the flows that were due to send during the run."""
    ran = [s for s in streams.values() if s["span_s"] > 0]
    tcp = [s for s in ran if s["protocol"] == "tcp" and s.get("rtt_ms") is not None]
    udp = [s for s in ran if s["protocol"] == "udp" and s.get("tx_packets") is not None]
    out: dict = {"goodput_bps": sum(s["goodput_bps"] for s in ran), "fairness_jain": fairness}
    if tcp:
        segs = sum(s.get("data_segs_out") or 0 for s in tcp)
        out["tcp_goodput_bps"] = sum(s["goodput_bps"] for s in tcp)
        out["rtt_ms"] = sum(s["rtt_ms"] for s in tcp) / len(tcp)
        out["retransmits"] = sum(s.get("retransmits") or 0 for s in tcp)
        out["retransmit_pct"] = 100.0 * out["retransmits"] / segs if segs else None
    if udp:
        expected = sum((s.get("lost") or 0) + (s.get("rx_packets") or 0) for s in udp)
        lost = sum(s.get("lost") or 0 for s in udp)
        out["udp_loss_pct"] = 100.0 * lost / expected if expected else None
    return out


def transport_part(snap: StatsSnapshot, workers: list[dict]) -> dict | None:
    """``transport`` of the result (None when the run had no socket flow)."""
    if not snap.flows:
        return None
    streams = {f.name: flow_result(f) for f in snap.flows}
    return {
        "streams": streams,
        "metrics": run_metrics(streams, snap.fairness_jain_run),
        "workers": workers,
    }


__all__ = ["flow_result", "run_metrics", "transport_part"]
