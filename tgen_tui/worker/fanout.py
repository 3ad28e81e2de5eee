"""Lanes on the worker side: a port served by several workers (see tgen_tui.packets.lanes).

- **Receive**: every lane worker of a port opens its own RX ring and joins one
  ``PACKET_FANOUT`` group (``PACKET_FANOUT_HASH``: by the kernel's flow hash), so each
  frame reaches exactly one of them and every flow always the same one. Each keeps its own
  rx table; the engine sums the tables (counts, duplicates, out-of-order, histograms).
- **Rows**: the signature's stream index of lane L of stream s is ``s + L * block``; an rx
  table has one row per (stream, lane) (``n_streams = block * lanes``), and a clear of
  stream s clears all of its rows.

The port spec (engine/lanes.py writes it) carries ``lane``: {lane, lanes, block} and
``fanout``: the group id (unique per port within the engine's namespace use).

Imports: the standard library and the packets' plain-data lane module.
"""

from __future__ import annotations

import socket

from tgen_tui.packets.lanes import Lane

SOL_PACKET = 263
PACKET_FANOUT = 18
PACKET_FANOUT_HASH = 0
# the group's own hook must skip outgoing frames too (PACKET_IGNORE_OUTGOING on a member
# socket does not apply to the group): without it a lane counts its port's own sends
PACKET_FANOUT_FLAG_IGNORE_OUTGOING = 0x4000


def lane_from_spec(spec: dict) -> Lane | None:
    """The port spec's lane (None: the port has one sender)."""
    d = spec.get("lane")
    if not d or int(d.get("lanes", 1)) <= 1:
        return None
    return Lane(int(d["lane"]), int(d["lanes"]), int(d["block"]))


def join_fanout(sock: socket.socket, group: int) -> None:
    """Join ``sock`` (a bound AF_PACKET socket) to fanout group ``group`` (hash mode)."""
    val = (int(group) & 0xFFFF) | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_IGNORE_OUTGOING) << 16)
    sock.setsockopt(SOL_PACKET, PACKET_FANOUT, val)


def open_lane_tx(open_tx, interface: str, kind: str, kw: dict, spec: dict):
    """The port's send path for this lane: AF_XDP binds the lane's own queue (queue L of
    the interface: two AF_XDP sockets cannot share one queue without a shared UMEM);
    sendmmsg and the TX ring need nothing per lane."""
    lane = lane_from_spec(spec)
    if lane is None or kind != "af_xdp":
        return open_tx(interface, kind, **kw)
    try:
        return open_tx(interface, kind, queue=lane.lane, **kw)
    except OSError as e:
        raise OSError(
            e.errno,
            f"af_xdp lane {lane.lane} of {lane.lanes}: cannot bind queue {lane.lane} of "
            f"{interface} ({e.strerror or e}): each lane needs its own queue; give the "
            f"interface {lane.lanes} queues (veth: ip link add ... numtxqueues {lane.lanes} "
            f"numrxqueues {lane.lanes}) or use sendmmsg",
        ) from None


def lane_rows(streams: list[int] | None, block: int, n_rows: int) -> list[int] | None:
    """Every rx row of the global stream indexes ``streams`` (None: all)."""
    if streams is None or block <= 0:
        return streams
    return [s + k * block for s in streams for k in range(max(1, n_rows // block))]


__all__ = ["join_fanout", "lane_from_spec", "lane_rows", "open_lane_tx"]
