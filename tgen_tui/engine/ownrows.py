"""Which port a stream is counted on: its rx rows count only in the rx tables of its
``rx_port`` (an ICMP error from the DUT quotes the end of the frame it answers, where
the signature is, and arrives on the sending port; a frame the DUT sends the wrong way
does too): :func:`own_rows` says which rows each port owns, :func:`keep_own_rows`
blanks the others and says how many frames arrived elsewhere. And the frames a port
handed to the kernel that never left it (:func:`tx_unsent`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tgen_tui.engine.sampleinputs import SampleContext
from tgen_tui.worker import counters as C


def blank_rx_row() -> np.ndarray:
    """An rx row that adds nothing to :class:`RxTotals` or the gap gauges: counts 0,
    gauges at their "none" values."""
    row = np.zeros(C.RX_STRIDE, dtype=np.int64)
    row[C.R_MAX_SEQ] = row[C.R_LAT_MAX] = row[C.R_VLAN_LAST] = -1
    row[C.R_LAT_MIN] = C.INT64_MAX
    return row


def keep_own_rows(rx: np.ndarray, tables: dict[int, str], own: dict[str, np.ndarray]) -> np.ndarray:
    """A stream is received on its ``rx_port`` only: in each of a worker's rx tables
    (``rx``: n_rx x rows x RX_STRIDE, modified in place), the rows of streams expected on
    another port are blanked (:func:`blank_rx_row`). ``tables``: table index -> its port;
    ``own``: port -> a mask of the rows received there (streams with that rx_port or
    none). Returns, per row, the frames blanked: a stream's signature that arrived on
    another port (an ICMP error from the DUT quotes the end of the frame it answers, and
    the signature is the frame's last 12 bytes; or a frame the DUT sent the wrong way)."""
    away = np.zeros(rx.shape[1], dtype=np.int64)
    for ti in range(rx.shape[0]):
        mask = own.get(tables.get(ti, ""))
        if mask is None or mask.all():
            continue
        other = ~mask
        away[other] += rx[ti, other, C.R_FRAMES]
        rx[ti, other] = blank_rx_row()
    return away


def own_rows(ctx: SampleContext) -> dict[str, np.ndarray]:
    """Port -> a mask of the rx rows (stream index + lane x block) counted there: the rows
    of streams whose rx_port it is, of streams without one, and rows of no stream."""
    n = ctx.n_streams
    where: dict[int, str | None] = {}
    for sc in ctx.streams:
        for r in (sc.index + k * ctx.block for k in range(max(1, ctx.lanes))):  # lanes.rx_rows
            if 0 <= r < n:
                where[r] = sc.rx_port
    if all(v is None for v in where.values()):
        return {}
    out = {}
    for pc in ctx.ports:
        m = np.ones(n, dtype=bool)
        for r, rp in where.items():
            m[r] = rp is None or rp == pc.name
        out[pc.name] = m
    return out


def tx_unsent(sent: int, ifd: Any, settled: bool, link_lost: bool) -> int:
    """Frames the worker handed to the kernel that the interface never transmitted (its
    carrier was off: the qdisc or the driver dropped them, ``tx_dropped``): sent minus
    the interface's tx count. Known once the port is settled (frames still queued in a
    pacing qdisc are not unsent), or while its link failed or its tx_dropped rose; else
    0. Frames the responder sends are not in ``sent``: they can hide as many unsent ones."""
    if not ifd.known or not (settled or link_lost or ifd.tx_dropped > 0):
        return 0
    return max(0, sent - ifd.tx)


__all__ = ["blank_rx_row", "keep_own_rows", "own_rows", "tx_unsent"]
