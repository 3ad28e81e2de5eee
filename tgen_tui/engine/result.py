"""The final result document of a run (``tgen run --json``): a public interface.

Shape (names are stable; fields are only ever added):
  ports:   {NAME: {interface, tx_frames, rx_frames, tx_bytes, rx_bytes, requested_pps,
                   achieved_pps, if_tx_frames, if_rx_frames, ...}}
  streams: {NAME: {tx_frames, rx_frames, lost, out_of_order, duplicates,
                   latency_ns: {min, avg, p50, p99, max},
                   spacing: {asked_gap_ns, gaps, mean_gap_ns, mae_ns, within_10pct,
                             p50_ns, p99_ns, ks, law}, ...}}
  duration_s, seed, profile, profile_hash, partial, environment, dut, thresholds, ...
What every result records follows METHODOLOGY.md: profile and hash, seed, address/port
ranges and how they vary, frame sizes, DUT settings, tester version, requested and
achieved rates.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict

from tgen_tui import __version__
from tgen_tui.dut.channel import DutChannel
from tgen_tui.dut.settings import dut_settings
from tgen_tui.engine import figures as F
from tgen_tui.engine.flowresult import transport_part
from tgen_tui.engine.losscauses import loss_fields
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.engine.spacing import spacing_warnings
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.program import FCS_LEN
from tgen_tui.results.models import RunResult


def environment() -> dict:
    """Facts about the tester machine recorded with every result."""
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "tester": f"tgen-tui {__version__}",
        "hostname": platform.node(),
    }


def stream_description(compiled: CompiledProfile) -> dict:
    """How each stream's fields vary (ranges, modes), sizes and rate: recorded with results."""
    out = {}
    for p in compiled.streams:
        out[p.name] = {
            "index": p.index,
            "port": p.port,
            "rx_port": p.rx_port,
            "l3": f"ipv{p.l3}",
            "l4": p.l4,
            "fields": [
                {"name": f.name, "mode": f.mode, "min": f.min, "max": f.max, "step": f.step}
                for f in p.fields
            ],
            "frame_size": {
                "mode": p.sizes.mode,
                "min": p.sizes.min + FCS_LEN,
                "max": p.sizes.max + FCS_LEN,
                "mean": round(p.sizes.mean + FCS_LEN, 2),
            },
            "vlan": list(p.vlan_ids),
            "seed": p.seed,
            "schedule": asdict(p.schedule),
        }
    return out


def build_result(
    compiled: CompiledProfile,
    snap: StatsSnapshot,
    *,
    duration_s: float,
    partial: bool,
    profile_path: str,
    events: list[str],
    plan: list[str],
    breaches: list[dict] | None = None,
    thresholds: list[str] | None = None,
    dut_channel: DutChannel | None = None,
) -> RunResult:
    """The final result (typed; ``to_doc()`` is the JSON document): the final snapshot's
    figures, copied (each is defined once, in :mod:`tgen_tui.engine.figures`), and what
    the run recorded about itself."""
    ports = {}
    for p in snap.ports:
        d = asdict(p)
        d["tx_pps_mean"] = F.mean_pps(p.tx_frames, duration_s)
        d["rx_pps_mean"] = F.mean_pps(p.rx_frames, duration_s)
        d["achieved_pct"] = F.achieved_pct(p.achieved_pps, p.requested_pps)
        ports[p.name] = d
    streams = {}
    for s in snap.streams:
        d = asdict(s)
        d["latency_source"] = s.latency_source
        streams[s.name] = d
    dut = None
    if snap.dut is not None:
        dut = {
            "source": snap.dut.source,
            "conntrack_peak": snap.dut.conntrack_peak,
            "conntrack_start": snap.dut.conntrack_start,
            "conntrack_rise": F.conntrack_rise(snap.dut.conntrack_peak, snap.dut.conntrack_start),
            "conntrack_max": snap.dut.conntrack_max,
            "conntrack_final": snap.dut.conntrack_count,
            "conntrack_states_final": dict(snap.dut.conntrack_states) or None,
            "full_at_s": snap.dut.full_at_s,
            "mem_available_bytes": snap.dut.mem_available_bytes,
            "settings": dut_settings(dut_channel),
            "error": snap.dut.error,
            **loss_fields(snap),
        }
    doc = {
        "tool": "tgen-tui",
        "profile": compiled.name,
        "profile_path": profile_path,
        "profile_hash": compiled.profile_hash,
        "seed": compiled.seed,
        "duration_s": round(duration_s, 6),
        "partial": partial,
        "passed": not breaches,
        "thresholds": thresholds or [],
        "breached": breaches or [],
        "ports": ports,
        "streams": streams,
        "workers": [asdict(w) for w in snap.workers],
        "worker_plan": plan,
        "dut": dut,
        "environment": environment(),
        "stream_config": stream_description(compiled),
        "warnings": list(snap.warnings)
        + rate_warnings(snap)
        + spacing_warnings(snap.streams)
        + elsewhere_warnings(snap),
        "events": events,
        **_latency_fields(snap.streams),
    }
    flow_workers = [asdict(w) for w in snap.workers if w.kind == "flows"]
    transport = transport_part(snap, flow_workers)
    if transport is not None:
        doc["transport"] = transport
        doc["metrics"] = transport["metrics"]
    return RunResult.model_validate(doc)


def _latency_fields(streams) -> dict:
    """latency_source and this host's latency_floor_ns (tgen calibrate measures it)."""
    try:
        from tgen_tui.calibrate.floor import result_fields

        return result_fields(s.latency_source for s in streams if s.latency_ns.p50 is not None)
    except Exception as e:  # noqa: BLE001 - a cache problem must not lose the result
        return {
            "latency_source": None,
            "latency_floor_ns": None,
            "latency_floor": {"error": str(e)},
        }


def elsewhere_warnings(snap: StatsSnapshot) -> list[str]:
    """Frames with a stream's signature that arrived on another port than its rx_port:
    said, not counted as received (a stream's counts never exceed its rx_port's)."""
    return [
        f"stream {s.name}: {s.rx_elsewhere:,} frames with its signature arrived on another "
        f"port than its rx_port {s.rx_port} (e.g. the DUT's ICMP errors, which quote the "
        "end of the frame they answer): not counted as received"
        for s in snap.streams
        if s.rx_elsewhere
    ]


def rate_warnings(snap: StatsSnapshot, tolerance_pct: float = 1.0) -> list[str]:
    """DESIGN rule 7: a sender that fell behind is reported, never hidden."""
    out = []
    for p in snap.ports:
        pct = F.achieved_pct(p.achieved_pps, p.requested_pps)
        if pct is not None and p.requested_pps > 0 and p.tx_frames > 0:
            if pct < 100.0 - tolerance_pct:
                out.append(
                    f"port {p.name} achieved {pct:.1f} % of the requested rate "
                    f"({p.achieved_pps:,.0f} of {p.requested_pps:,.0f} fps): the sender could not keep up"
                )
    return out
