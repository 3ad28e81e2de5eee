"""How ``tgen run`` shows a run: the live progress line, and the summary tables of its
typed result (ports, streams, socket flows, latency, the DUT, loss causes, hooks, events,
thresholds), with units. Reads :class:`~tgen_tui.results.models.RunResult`, never dicts.
"""

from __future__ import annotations

from typing import Any

from tgen_tui import fmt
from tgen_tui.engine.appfigures import why_failed
from tgen_tui.results.models import RunResult


def progress_line(snap: Any) -> str:
    """One line for a terminal: per port tx/rx pps, flows' goodput, loss, conntrack."""
    parts = [f"t={snap.t:6.1f}s"]
    for p in snap.ports:
        flag = " FAILED" if p.state == "failed" else ""
        parts.append(
            f"{p.name} tx {fmt.rate_short(p.tx_pps)}pps rx {fmt.rate_short(p.rx_pps)}pps{flag}"
        )
    for f in snap.flows:
        if f.app is not None:
            parts.append(
                f"{f.name} {f.established_per_s or 0:,.0f}conn/s open {f.concurrent or 0:,} "
                f"failed {f.failed or 0:,}"
            )
            continue
        rtt = f" rtt {f.rtt_ms:.1f}ms" if f.rtt_ms is not None else ""
        parts.append(f"{f.name} {f.goodput_bps / 1e6:.2f}Mbit/s{rtt}")
    if snap.streams:
        parts.append(f"lost {sum(s.lost for s in snap.streams)}")
    if snap.dut and snap.dut.conntrack_count is not None:
        parts.append(f"conntrack {snap.dut.conntrack_count:,}/{snap.dut.conntrack_max or 0:,}")
    return " | ".join(parts)


def _lat(v: float | None) -> str:
    return fmt.ns(v).replace(" ", "")


def _num(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _get(part: Any, name: str, default: Any = 0) -> Any:
    v = getattr(part, name, default)
    return default if v is None else v


def port_lines(r: RunResult) -> list[str]:
    from tgen_tui.engine.figures import l2_bps

    out = [
        f"{'port':<8}{'tx frames':>12}{'rx frames':>12}{'if tx':>12}{'if rx':>12}"
        f"{'req fps':>11}{'achieved':>11}{'tx Mbit/s':>11}{'rx Mbit/s':>11}  state"
    ]
    dur = r.duration_s or 1
    for name, p in r.ports.items():
        tx_b, rx_b = _get(p, "tx_bytes"), _get(p, "rx_bytes")
        failure = _get(p, "failure", None)
        out.append(
            f"{name:<8}{p.tx_frames:>12,}{p.rx_frames:>12,}{_get(p, 'if_tx_frames'):>12,}"
            f"{_get(p, 'if_rx_frames'):>12,}{p.requested_pps or 0:>11,.0f}"
            f"{p.achieved_pps or 0:>11,.0f}"
            f"{l2_bps(tx_b / dur, p.tx_frames / dur) / 1e6:>11.2f}"
            f"{l2_bps(rx_b / dur, p.rx_frames / dur) / 1e6:>11.2f}  {_get(p, 'state', '')}"
            + (f" ({failure})" if failure else "")
        )
    return out


def stream_lines(r: RunResult) -> list[str]:
    if not r.streams:
        return []
    out = [
        f"{'stream':<16}{'tx':>11}{'rx':>11}{'lost':>9}{'loss %':>9}{'ooo':>6}{'dup':>6}"
        f"{'lat min':>10}{'avg':>10}{'p99':>10}{'max':>10}"
    ]
    for name, s in r.streams.items():
        lat = s.latency_ns
        out.append(
            f"{name[:15]:<16}{s.tx_frames:>11,}{s.rx_frames:>11,}{s.lost:>9,}"
            f"{s.loss_pct or 0:>9.4f}{s.out_of_order:>6}{s.duplicates:>6}{_lat(lat.min):>10}"
            f"{_lat(lat.avg):>10}{_lat(lat.p99):>10}{_lat(lat.max):>10}"
        )
    return out + stateful_lines(r)


def stateful_lines(r: RunResult) -> list[str]:
    """Flows verified, setup latency, learned tuples; a stream's longest receive gap
    only when it lost frames."""
    out = []
    for name, s in r.streams.items():
        parts = []
        if s.flows_verified is not None:
            parts.append(f"flows verified {s.flows_verified:,} of {s.flows or 0:,}")
            lat = s.setup_latency_ns or {}
            if lat:
                parts.append(
                    f"setup latency p50 {_lat(lat.get('p50'))} p99 {_lat(lat.get('p99'))}"
                    f" max {_lat(lat.get('max'))}"
                )
        if s.learned is not None:
            parts.append(
                f"learned {s.learned:,} tuples, e.g. {', '.join((s.learned_samples or [])[:2])}"
            )
        if s.outage_ms is not None and s.lost:
            gone = " (not recovered)" if getattr(s, "outage_recovered", None) is False else ""
            parts.append(f"longest receive gap {s.outage_ms:.1f} ms at {s.outage_at_s} s{gone}")
        if parts:
            out.append(f"stream {name}: " + "; ".join(parts))
    return out


def flow_lines(r: RunResult) -> list[str]:
    """The socket flows: goodput over the run, RTT, retransmits, UDP loss and jitter."""
    t = r.transport
    if t is None or not t.streams:
        return []
    out = [
        f"{'flow':<14}{'proto':<11}{'goodput Mbit/s':>15}{'rtt ms':>9}{'min rtt ms':>12}"
        f"{'retrans':>9}{'retr %':>8}{'loss %':>8}{'jitter ms':>10}{'tx bytes':>14}{'rx bytes':>14}"
    ]
    for name, f in t.streams.items():
        proto = f.protocol + (f"/{f.cc}" if f.cc else "")
        out.append(
            f"{name[:13]:<14}{proto:<11}{f.goodput_bps / 1e6:>15.3f}{_num(f.rtt_ms, '.2f'):>9}"
            f"{_num(f.min_rtt_ms, '.2f'):>12}{_num(f.retransmits, 'd'):>9}"
            f"{_num(f.retransmit_pct, '.3f'):>8}{_num(f.loss_pct, '.3f'):>8}"
            f"{_num(f.jitter_ms, '.3f'):>10}{f.tx_bytes:>14,}{f.rx_bytes:>14,}"
        )
    for name, f in t.streams.items():
        if f.mathis_bps:
            out.append(
                f"Mathis (Reno) for {name}: predicted {f.mathis_bps / 1e6:.3f} Mbit/s from MSS "
                f"{f.mss} B, RTT {f.rtt_ms or 0:.1f} ms, p = {(f.retransmit_pct or 0) / 100:.4f}; "
                f"measured {f.goodput_bps / 1e6:.3f} Mbit/s, ratio {f.mathis_ratio or 0:.2f}"
            )
    out += app_lines(r)
    m = t.metrics
    out.append(
        f"flows: total goodput {(m.get('goodput_bps') or 0) / 1e6:.3f} Mbit/s (bytes read while "
        f"due to send / time due to send), Jain's fairness {_num(m.get('fairness_jain'), '.3f')}"
    )
    return out


def app_lines(r: RunResult) -> list[str]:
    """A line per request/response flow: connections, failures by reason, setup and
    transaction percentiles (tgen_tui.engine.appfigures)."""
    out = []
    for name, f in (r.transport.streams if r.transport else {}).items():
        if f.app is None:
            continue
        s, x = f.setup_ns or {}, f.transaction_ns or {}
        due = ""
        if f.due:
            late = ": the tester fell behind" if (f.achieved_pct or 0) < 99.0 else ""
            due = f" of {f.due:,} due ({f.achieved_pct or 0:.1f} % of the asked rate{late})"
        out.append(
            f"app {name} ({f.app}): attempted {f.attempted or 0:,}{due}, established "
            f"{f.established or 0:,} ({_num(f.established_per_s, ',.0f')} conn/s over the run), "
            f"closed {f.closed or 0:,}, failed {f.failed or 0:,} (refused "
            f"{f.failed_refused or 0:,}, reset {f.failed_reset or 0:,}, timed out "
            f"{f.failed_timeout or 0:,}, tester limits {f.failed_local or 0:,}); transactions "
            f"{f.transactions or 0:,}; setup p50 {_lat(s.get('p50'))} p99 {_lat(s.get('p99'))}; "
            f"transaction p50 {_lat(x.get('p50'))} p99 {_lat(x.get('p99'))}"
        )
        if f.failed:
            out.append("why " + why_failed(name, f.model_dump(), f.failure_causes or []))
    return out


def latency_line(r: RunResult) -> list[str]:
    if not r.streams:
        return []
    how = {
        "kernel": "latency from the kernel's tx and rx timestamps (sampled frames)",
        "signature": "latency from the frames' user-space send stamps (includes the send path)",
        "mixed": "latency: kernel timestamps for some streams, signature stamps for others",
    }.get(r.latency_source or "", "latency")
    floor = r.latency_floor_ns
    if floor is None:
        return [f"{how}; run tgen calibrate to measure the tester's own floor"]
    return [
        f"{how}; the tester's own floor is {_lat(floor)} (p50, back to back; "
        "tgen calibrate measured it)"
    ]


def dut_lines(r: RunResult) -> list[str]:
    out = []
    d = r.dut
    if d is not None:
        full = f", full at {d.full_at_s:.2f} s" if d.full_at_s is not None else ""
        if d.conntrack_rise is not None:
            full = f" (+{d.conntrack_rise:,} during the run{full})"
        out.append(
            f"DUT conntrack peak {d.conntrack_peak or 0:,} of max {d.conntrack_max or 0:,}{full}"
        )
    return out + loss_lines(r)


def loss_lines(r: RunResult) -> list[str]:
    """``why up: lost 912: 640 nft rule drop on dut (...); unexplained 0``, per stream
    with loss or causes."""
    from tgen_tui.dut.attribution import LossCause, why_line

    out = []
    for name, s in r.streams.items():
        causes = tuple(LossCause(**c.to_doc()) for c in s.loss_causes or ())
        if s.lost or causes:
            out.append(f"why {name}: {why_line(s.lost, causes, s.loss_unexplained or 0)}")
    note = (r.dut.model_extra or {}).get("counters_note") if r.dut else None
    if note:
        out.append(f"DUT counters: {note}")
    return out


def tail_lines(r: RunResult) -> list[str]:
    """Hosts, the TCP connections, DUT events, breached thresholds, warnings."""
    from tgen_tui.engine.dut_events import event_line
    from tgen_tui.session.tcprun import summary

    out = []
    for h in (r.cluster or {}).get("hosts", []):
        clock = (
            f"clock offset {h['clock_offset_ns'] / 1e3:+.1f} us +/- {h['uncertainty_ns'] / 1e3:.1f} us"
            if h.get("clock_offset_ns") is not None
            else f"clock offset not measured ({h.get('clock_error')})"
        )
        lost = f"; LOST: {h['lost']}" if h.get("lost") else ""
        out.append(f"host {h['host']} ({h.get('hostname')}): {clock}{lost}")
    out += summary(r.tcp or {})
    out += [event_line(rec) for rec in r.dut_events or ()]
    out += [f"FAIL {b['threshold']}: {b['where']} = {b['value']:.6g}" for b in r.breached]
    out += [f"warning: {w}" for w in r.warnings]
    return out


def summary_table(r: RunResult) -> str:
    """Plain-text tables with units: every part of the result that the run has."""
    lines = [
        f"profile {r.profile}  duration {r.duration_s or 0:.2f} s  seed {r.seed}"
        + ("  (PARTIAL: interrupted)" if r.partial else "")
    ]
    lines += port_lines(r) + stream_lines(r) + flow_lines(r) + latency_line(r)
    lines += dut_lines(r) + tail_lines(r)
    return "\n".join(lines)


__all__ = ["loss_lines", "progress_line", "summary_table"]
