"""Per-flow figures of a replayed capture, from the receiving workers' final reports.

The receiving port counts every frame of a ``pcap:`` stream by its destination flow
(:mod:`tgen_tui.worker.replayrx`) and reports, per flow, its frames per loop and the
frames received. With the stream's frames sent (``tx_frames``, N frames a loop), a
flow's frames sent are ``per_loop x tx // N`` (exact for whole loops; a run stopped
inside a loop rounds its partial loop in proportion), and its loss is sent − received.
The later fragments of a datagram carry no port: they count with the one flow of the
stream to that protocol and destination (as conntrack sees the reassembled datagram), or
as a flow of their own when there are several. The result's stream gets ``flows``
(destination flows), ``flows_verified`` (those that lost nothing) and ``flow_loss`` (one
entry per flow, the lossy first).
"""

from __future__ import annotations

from typing import Any

from tgen_tui.worker.replayrx import describe_key

MAX_LISTED = 64  # flows listed per stream in the result


def merge_fragments(entries: list[dict]) -> list[dict]:
    """The later fragments of a datagram (key port FRAG_PORT) counted with their flow when
    exactly one flow of the stream goes to that protocol and destination."""
    from tgen_tui.worker.replayrx import FRAG_PORT

    base = lambda k: int(k) >> 17  # noqa: E731  (family, protocol, destination)
    ported: dict[int, list[dict]] = {}
    for e in entries:
        if int(e["key"]) & 0x1FFFF != FRAG_PORT:
            ported.setdefault(base(e["key"]), []).append(e)
    out = []
    for e in entries:
        if int(e["key"]) & 0x1FFFF != FRAG_PORT:
            continue
        same = ported.get(base(e["key"]), [])
        if len(same) == 1:
            same[0] = dict(same[0], per_loop=same[0]["per_loop"] + e["per_loop"],
                           rx_frames=same[0]["rx_frames"] + e["rx_frames"])  # fmt: skip
            ported[base(e["key"])] = same
        else:
            out.append(e)
    return [e for group in ported.values() for e in group] + out


def flow_rows(tx_frames: int, frames: int, entries: list[dict]) -> list[dict]:
    """Each flow's sent, received and lost frames, the lossy first (at most MAX_LISTED)."""
    loops, part = divmod(int(tx_frames), max(1, int(frames)))
    rows = []
    for e in merge_fragments(entries):
        sent = e["per_loop"] * loops + round(e["per_loop"] * part / max(1, frames))
        rows.append(
            {
                "flow": describe_key(int(e["key"])),
                "sent": sent,
                "rx": int(e["rx_frames"]),
                "lost": max(0, sent - int(e["rx_frames"])),
            }
        )
    rows.sort(key=lambda r: (-r["lost"], r["flow"]))
    return rows


def apply_replay_reports(result: Any, programs: list, reports: dict[str, Any]) -> None:
    """Set ``flows``, ``flows_verified`` and ``flow_loss`` of every replayed stream."""
    by_index = {p.index: p for p in programs}
    per_stream: dict[int, list[dict]] = {}
    for rep in reports.values():
        for e in rep.get("replay") or []:
            per_stream.setdefault(int(e["stream"]), []).append(e)
    for i, entries in per_stream.items():
        p = by_index.get(i)
        if p is None or p.replay is None or p.name not in result.streams:
            continue
        sr = result.streams[p.name]
        rows = flow_rows(sr.tx_frames, p.replay.frames, entries)
        sr.flows = len(rows)
        sr.flows_verified = sum(1 for r in rows if r["lost"] == 0 and r["rx"] > 0)
        sr.flow_loss = rows[:MAX_LISTED]


__all__ = ["apply_replay_reports", "flow_rows"]
