"""Stateful streams in any run: ``learn: true`` reply streams, per-flow verification and
the longest receive gap (outage) of each stream.

The workers do the work (:mod:`tgen_tui.worker.liveflow`); this module says what each
port's worker does (:func:`live_options`: which port learns which streams' tuples, which
port verifies which flows) and fills in, from the workers' final reports, what the final snapshot lacks
(:func:`apply_flow_reports`; the live figures: :mod:`tgen_tui.engine.flowstats`):

- ``streams.<reply>.learned``: distinct tuples the reply stream's port learned, and
  ``learned_samples``: a few of them, as received (``NAT address:port -> own address:port``);
- ``streams.<forward>.flows`` / ``.flows_verified``: flows the forward stream's port sent
  and how many of them had frames both ways (a reply came back through the DUT);
  ``.setup_latency_ns``: first reply received minus first frame sent, per verified flow
  (min, p50, p90, p99, max, avg);
- ``streams.<any>.outage_ms``: the longest gap between two received frames of the stream
  (kernel receive times), and ``outage_at_s``: when it began, from the start of sending.
"""

from __future__ import annotations

import contextlib
import glob
import ipaddress
import os
import secrets
from typing import Any

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.options import LearnSpec
from tgen_tui.packets.program import LIVE_TABLE, StreamProgram

LEARN_DIR = "/dev/shm"
LIVE_MAX = 1 << 40  # a live table is not a ring: it keeps every tuple


def live_options(
    programs: tuple[StreamProgram, ...] | list[StreamProgram],
) -> tuple[dict[str, LearnSpec], dict[str, dict]]:
    """(learn, flows) for the ``learn: true`` streams among ``programs``.

    learn: port -> its LearnSpec: the reply stream's port learns the
    tuples of every other stream that arrives there. flows: port -> ``{"tx_streams",
    "rx_streams"}``: the port that sends those streams and receives the replies verifies
    the flows."""
    learn: dict[str, LearnSpec] = {}
    flows: dict[str, dict] = {}
    live = [p for p in programs if p.table == LIVE_TABLE]
    for p in live:
        fwd = [q for q in programs if q.rx_port == p.port and q.table != LIVE_TABLE]
        if not fwd:
            raise BadInput(
                f"stream {p.name}: learn: true replies to the streams that arrive at port "
                f"{p.port}, and none does (give the forward stream rx_port: {p.port})"
            )
        if p.port not in learn:
            learn[p.port] = LearnSpec(
                os.path.join(
                    LEARN_DIR, f"tgen-learn-{os.getpid()}-live-{secrets.token_hex(4)}.npy"
                ),
                tuple(sorted({q.index for q in fwd})),
                LIVE_MAX,
            )
        for q in fwd:
            # flows are keyed by IPv4 address and UDP/TCP port: other forward streams have none
            if p.rx_port != q.port or q.l3 != 4 or q.l4 not in ("udp", "tcp"):
                continue
            f = flows.setdefault(q.port, {"tx_streams": [], "rx_streams": []})
            if q.index not in f["tx_streams"]:
                f["tx_streams"].append(q.index)
            if p.index not in f["rx_streams"]:
                f["rx_streams"].append(p.index)
    return learn, flows


def remove_live_tables(learn: dict[str, LearnSpec] | None) -> None:
    """Delete the tables the live learners wrote when they stopped."""
    for spec in (learn or {}).values():
        path = spec.path
        if "-live-" not in path:
            continue
        for f in [path, *glob.glob(glob.escape(path) + ".tmp*")]:
            with contextlib.suppress(OSError):
                os.unlink(f)


def tuple_text(row) -> str:
    """A learned tuple (src, dst, sport, dport) as ``a:p -> b:q``."""
    src, dst, sp, dp = (int(x) for x in row)
    return f"{ipaddress.IPv4Address(src)}:{sp} -> {ipaddress.IPv4Address(dst)}:{dp}"


def apply_flow_reports(
    result, programs, reports: dict[str, Any], learned: dict[str, dict], t0_s: float | None
) -> None:
    """Fill in the stateful figures the final snapshot lacks (tgen_tui.engine.flowstats
    defines them from the counters, and the result copies those: a figure already set
    stays, so the result equals the last live figures) from the workers' final reports:
    ``reports`` is port -> the worker's ``flows`` report, ``learned`` port -> its
    learner's summary, ``t0_s`` the start of sending (CLOCK_MONOTONIC s)."""
    by_index = {p.index: p for p in programs}
    streams = result.streams
    from tgen_tui.engine.replayflows import apply_replay_reports

    apply_replay_reports(result, programs, reports)  # a replayed capture's flows

    def fill(sr, **kw) -> None:
        for k, v in kw.items():
            if getattr(sr, k, None) is None:
                setattr(sr, k, v)

    gaps: dict[int, tuple[int, int | None]] = {}
    for rep in reports.values():
        for s, g in (rep.get("gaps") or {}).items():
            cur = gaps.get(int(s))
            if cur is None or g["max_gap_ns"] > cur[0]:
                gaps[int(s)] = (int(g["max_gap_ns"]), g.get("gap_start_ns"))
    for i, (gap, at) in gaps.items():
        p = by_index.get(i)
        if p is None or p.name not in streams:
            continue
        sr = streams[p.name]
        at_s = round(at / 1e9 - t0_s, 3) if at is not None and t0_s is not None else None
        if sr.outage_ms is None:
            fill(sr, outage_ms=round(gap / 1e6, 3), outage_at_s=at_s)
    for port, rep in reports.items():
        v = rep.get("verify")
        if v:
            for i in v.get("tx_streams", []):
                p = by_index.get(i)
                if p is None or p.name not in streams:
                    continue
                fill(
                    streams[p.name],
                    flows=v["flows"],
                    flows_verified=v["flows_verified"],
                    setup_latency_ns=v.get("setup_latency_ns") or None,
                )
        for i in rep.get("live_streams", []):
            p = by_index.get(i)
            if p is None or p.name not in streams:
                continue
            fill(
                streams[p.name],
                learned=int((learned.get(port) or {}).get("tuples", 0)),
                learned_samples=[tuple_text(r) for r in rep.get("learned_samples", [])],
            )


__all__ = ["LIVE_MAX", "apply_flow_reports", "live_options", "remove_live_tables", "tuple_text"]
