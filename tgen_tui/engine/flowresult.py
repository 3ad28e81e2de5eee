"""The run result's ``transport`` part: the socket flows of the final snapshot, copied.

Names as the result has had them since transport flows came in (a stored run keeps its
shape): per flow ``goodput_bps`` is the goodput over the run (bytes read while due to
send / the time due to send: :func:`tgen_tui.engine.flowfigures.goodput_mean_bps`),
``rtt_ms`` the mean smoothed RTT while it delivered data, ``span_s`` the time it was due
to send, ``cwnd_final`` its last cwnd; the headline ``metrics`` (the results store's
``goodput_bps``, ``retransmit_pct``, ``fairness_jain``, ...) are sums and means of those.
A request/response flow's entry has its connection counts, failures by reason, setup and
transaction times (engine/appfigures.py), and ``established_per_s`` and
``transactions_per_s`` over the run (its counts / ``span_s``, not the last interval's);
the metrics add ``app_*`` sums over the app flows (p50/p99: the worst flow's).
"""

from __future__ import annotations

from dataclasses import asdict

from tgen_tui.engine.appfigures import failure_causes
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
    if f.app is not None:
        span = f.active_s
        d.pop("attempted_per_s", None)
        d["established_per_s"] = (f.established or 0) / span if span > 0 else None
        d["transactions_per_s"] = (f.transactions or 0) / span if span > 0 else None
    elif f.protocol == "tcp":
        d["rtt_ms"] = f.rtt_mean_ms if f.rtt_mean_ms is not None else f.rtt_ms
        d["rtt_now_ms"] = f.rtt_ms
        d["cwnd_final"] = f.cwnd
    return d


def run_metrics(streams: dict[str, dict], fairness: float | None) -> dict:
    """The headline figures of the flows that were due to send during the run."""
    ran = [s for s in streams.values() if s["span_s"] > 0]
    app = [s for s in ran if s.get("app")]
    ran = [s for s in ran if not s.get("app")] + app
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
    if app:
        out.update(app_metrics(app))
    return out


APP_SUMS: tuple[str, ...] = ("attempted", "established", "failed", "failed_refused")
APP_SUMS += ("failed_reset", "failed_timeout", "failed_local", "closed", "aborted")
APP_SUMS += ("transactions",)


def app_metrics(app: list[dict]) -> dict:
    """``app_attempted`` ... sums over the app flows; setup and transaction p50/p99 (ns),
    the worst flow's."""
    out: dict = {f"app_{k}": sum(s.get(k) or 0 for s in app) for k in APP_SUMS}
    out["app_established_per_s"] = sum(s.get("established_per_s") or 0.0 for s in app)
    out["app_transactions_per_s"] = sum(s.get("transactions_per_s") or 0.0 for s in app)
    for part in ("setup_ns", "transaction_ns"):
        for q in ("p50", "p99"):
            vals = [s[part][q] for s in app if s.get(part) and s[part].get(q) is not None]
            out[f"app_{part[:-3]}_{q}_ns"] = max(vals) if vals else None
    return out


def transport_part(snap: StatsSnapshot, workers: list[dict]) -> dict | None:
    """``transport`` of the result (None when the run had no socket flow)."""
    if not snap.flows:
        return None
    streams = {f.name: flow_result(f) for f in snap.flows}
    for f in snap.flows:
        causes = failure_causes(f, snap.dut) if f.app is not None else []
        if causes:
            streams[f.name]["failure_causes"] = causes
    return {
        "streams": streams,
        "metrics": run_metrics(streams, snap.fairness_jain_run),
        "workers": workers,
    }


__all__ = ["flow_result", "run_metrics", "transport_part"]
