"""The RFC 9693 Responder's state table: translated 4-tuples learned from the receive ring.

A port whose spec carries ``"learn": {"path": ".../tgen-learn-X.npy", "streams": [i, ...],
"max": M}`` reads the IPv4 addresses and L4 ports of every received frame
(``RxRing(headers=True)``). The tuples (source address, destination address, source
port, destination port) of signature frames of the listed streams, that is the
Initiator's frames as the NAT translated them, are collected per poll and merged into
the table every ``MERGE_NS`` (not per frame): ``np.unique`` over 12-byte keys drops the
repeats within the batch, a ``searchsorted`` into the sorted keys of the table drops
those already learned, and the new ones are appended in order of first arrival until
the table holds M tuples (RFC 9693's Responder table size; later new tuples are
counted as ``overflow``, not stored).

When the port stops, the table is written atomically (a temporary file, then rename) as
an (M', 4) uint32 ``.npy`` in arrival order, columns ``TABLE_COLUMNS``; the Responder's
reply stream reads it (``FieldOp`` mode ``table``).

Imports: the standard library and numpy only.
"""

from __future__ import annotations

import os

import numpy as np

from tgen_tui.packets.program import TABLE_COLUMNS

MERGE_NS = 100_000_000  # merge the collected tuples into the table every 100 ms
_KEY = np.dtype("V12")


def tuple_keys(rows: np.ndarray) -> np.ndarray:
    """12-byte keys of (n, 4) uint32 tuples: address, address, port << 16 | port."""
    k = np.empty((len(rows), 3), dtype=">u4")
    k[:, 0] = rows[:, 0]
    k[:, 1] = rows[:, 1]
    k[:, 2] = (rows[:, 2] << 16) | (rows[:, 3] & 0xFFFF)
    return k.view(_KEY).reshape(-1)


class Learner:
    """Collects, deduplicates and caps the tuples of one port's received frames."""

    def __init__(self, path: str, streams, max_rows: int, merge_ns: int = MERGE_NS):
        if int(max_rows) < 1:
            raise ValueError(f"learn: max must be at least 1, got {max_rows}")
        self.path = str(path)
        self.streams = np.unique(np.asarray(list(streams), dtype=np.uint16))
        self.max = int(max_rows)
        self.merge_ns = int(merge_ns)
        self.frames = 0  # signature frames of the learned streams
        self.unparsed = 0  # ... of which no IPv4 UDP/TCP tuple could be read
        self.overflow = 0  # distinct new tuples seen once the table was full (per merge)
        self.merges = 0
        self._pending: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []  # learned tuples, arrival order, in chunks
        self._n = 0
        self._sorted = np.empty(0, dtype=_KEY)  # keys of every learned tuple, sorted
        self._last_merge = 0

    @property
    def learned(self) -> int:
        return self._n

    @property
    def full(self) -> bool:
        return self._n >= self.max

    def add(self, batch, now_ns: int) -> None:
        """Take the tuples of one polled batch (an RxBatch with ``hdr``)."""
        if len(batch) == 0 or batch.hdr is None:
            self._maybe_merge(now_ns)
            return
        mine = batch.has_sig & np.isin(batch.stream, self.streams)
        k = int(np.count_nonzero(mine))
        if k:
            self.frames += k
            sel = mine & batch.hdr_ok
            self.unparsed += k - int(np.count_nonzero(sel))
            self._pending.append(batch.hdr[sel])
        self._maybe_merge(now_ns)

    def _maybe_merge(self, now_ns: int) -> None:
        if self._pending and now_ns - self._last_merge >= self.merge_ns:
            self.merge()
            self._last_merge = now_ns

    def merge(self) -> None:
        """Fold the collected tuples into the table (dedup, arrival order, cap at max)."""
        if not self._pending:
            return
        rows = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending = []
        self.merges += 1
        if len(rows) == 0:
            return
        keys = tuple_keys(rows)
        ukeys, first = np.unique(keys, return_index=True)  # sorted, and where each came first
        if len(self._sorted):
            pos = np.searchsorted(self._sorted, ukeys)
            hit = self._sorted[np.minimum(pos, len(self._sorted) - 1)] == ukeys
            ukeys, first = ukeys[~hit], first[~hit]
        if len(ukeys) == 0:
            return
        room = self.max - self._n
        if len(ukeys) > room:
            self.overflow += len(ukeys) - room
            keep = np.sort(np.argsort(first, kind="stable")[:room])  # the earliest arrivals
            ukeys, first = ukeys[keep], first[keep]
        if len(ukeys) == 0:
            return
        self._rows.append(rows[np.sort(first)])  # arrival order
        self._n += len(ukeys)
        pos = np.searchsorted(self._sorted, ukeys)
        self._sorted = np.insert(self._sorted, pos, ukeys)

    def table(self) -> np.ndarray:
        """The learned tuples so far, (n, 4) uint32, in order of first arrival."""
        self.merge()
        if not self._rows:
            return np.empty((0, len(TABLE_COLUMNS)), dtype=np.uint32)
        if len(self._rows) > 1:
            self._rows = [np.concatenate(self._rows)]
        return self._rows[0]

    def write(self) -> dict:
        """Write the table atomically to ``path``; return what was learned."""
        t = np.ascontiguousarray(self.table(), dtype=np.uint32)
        tmp = f"{self.path}.tmp{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                np.save(f, t, allow_pickle=False)
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return self.summary() | {"error": f"could not write {self.path}: {e}"}
        return self.summary()

    def summary(self) -> dict:
        return {
            "path": self.path,
            "tuples": self._n,
            "max": self.max,
            "full": self.full,
            "frames": self.frames,
            "unparsed": self.unparsed,
            "overflow": self.overflow,
        }


def from_spec(spec: dict | None) -> Learner | None:
    """A Learner from a port spec's ``learn`` entry (None: the port does not learn)."""
    if not spec:
        return None
    return Learner(spec["path"], spec.get("streams", []), int(spec.get("max") or 1 << 62))
