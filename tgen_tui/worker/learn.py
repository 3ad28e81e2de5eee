"""The RFC 9693 Responder's state table: translated 4-tuples learned from the receive ring.

A port whose spec carries ``"learn": {"path": ".../tgen-learn-X.npy", "streams": [i, ...],
"max": M}`` reads the IPv4 addresses and L4 ports of every received frame
(``RxRing(headers=True)``). The tuples (source address, destination address, source
port, destination port) of signature frames of the listed streams, that is the
Initiator's frames as the NAT translated them, are collected per poll and merged into
the table every ``MERGE_NS`` (not per frame), all in numpy:

- each tuple becomes a 64-bit key: an id of its (source, destination) address pair
  (a handful of pairs in practice: the NAT's public address and the Responder's) above
  its two ports;
- one sort of ``key << 20 | arrival index`` finds the distinct keys of the batch and
  where each came first (``np.unique(..., return_index=True)`` when a batch is too big
  or has too many address pairs for that packing);
- a ``searchsorted`` into the sorted runs of the keys already learned drops the known
  ones (runs are merged like a binary counter: O(log M) runs, each key copied O(log M)
  times);
- the new tuples are appended in order of first arrival; the table is a ring of size M
  (RFC 9693's Responder table): it holds the latest M distinct tuples, and those it
  overwrote are counted as ``overflow``.

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
KEEP_EXTRA = 1 << 22  # distinct tuples held beyond M before the oldest are dropped
_IDX_BITS = 20  # arrival index bits of the packed sort (batches up to 1 Mi tuples)
_PAIR_BITS_PACKED = 64 - 32 - _IDX_BITS  # address pairs the packed sort can tell apart
_U32, _U16, _U20 = np.uint64(32), np.uint64(16), np.uint64(_IDX_BITS)


class Learner:
    """Collects and deduplicates the tuples of one port's received frames (a ring of M)."""

    def __init__(self, path: str, streams, max_rows: int, merge_ns: int = MERGE_NS):
        if int(max_rows) < 1:
            raise ValueError(f"learn: max must be at least 1, got {max_rows}")
        self.path = str(path)
        self.streams = np.unique(np.asarray(list(streams), dtype=np.uint16))
        self.max = int(max_rows)
        self.merge_ns = int(merge_ns)
        self.frames = 0  # signature frames of the learned streams
        self.unparsed = 0  # ... of which no IPv4 UDP/TCP tuple could be read
        self.overflow = 0  # distinct tuples the ring of M overwrote (learned beyond M)
        self.merges = 0
        self._pending: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []  # learned tuples, arrival order, in chunks
        self._n = 0
        self._runs: list[np.ndarray] = []  # sorted uint64 keys of the learned tuples
        self._pairs: dict[int, int] = {}  # (src << 32 | dst) address pair -> its id
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
        if len(self.streams) == 1:
            mine = batch.has_sig & (batch.stream == self.streams[0])
        else:
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

    # ------------------------------------------------------------------ keys
    def keys(self, rows: np.ndarray) -> np.ndarray:
        """uint64 keys of (n, 4) tuples: address-pair id << 32 | src port << 16 | dst port."""
        pairs = (rows[:, 0].astype(np.uint64) << _U32) | rows[:, 1]
        if (pairs == pairs[0]).all():  # the common case: one NAT address, one Responder
            ids = np.uint64(self._pair_id(int(pairs[0])))
        else:
            up, inv = np.unique(pairs, return_inverse=True)
            ids = np.array([self._pair_id(int(p)) for p in up], dtype=np.uint64)[inv]
        ports = (rows[:, 2].astype(np.uint64) << _U16) | (rows[:, 3] & 0xFFFF)
        return (ids << _U32) | ports

    def _pair_id(self, pair: int) -> int:
        i = self._pairs.get(pair)
        if i is None:
            i = self._pairs[pair] = len(self._pairs)
        return i

    def _distinct(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct keys (sorted) and the index where each came first."""
        n = len(keys)
        if n < 1 << _IDX_BITS and len(self._pairs) <= 1 << _PAIR_BITS_PACKED:
            s = np.sort((keys << _U20) | np.arange(n, dtype=np.uint64))
            k = s >> _U20
            head = np.empty(n, dtype=bool)
            head[0] = True
            np.not_equal(k[1:], k[:-1], out=head[1:])
            return k[head], (s[head] & np.uint64((1 << _IDX_BITS) - 1)).astype(np.int64)
        return np.unique(keys, return_index=True)

    def _known(self, ukeys: np.ndarray) -> np.ndarray:
        hit = np.zeros(len(ukeys), dtype=bool)
        for run in self._runs:
            pos = np.minimum(np.searchsorted(run, ukeys), len(run) - 1)
            hit |= run[pos] == ukeys
        return hit

    def _add_run(self, ukeys: np.ndarray) -> None:
        self._runs.append(ukeys)
        while len(self._runs) > 1 and len(self._runs[-2]) <= 2 * len(self._runs[-1]):
            b = self._runs.pop()
            a = self._runs.pop()
            self._runs.append(np.sort(np.concatenate([a, b])))

    # ------------------------------------------------------------------ merge
    def merge(self) -> None:
        """Fold the collected tuples into the table (dedup, arrival order, ring of max)."""
        if not self._pending:
            return
        rows = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending = []
        self.merges += 1
        if len(rows) == 0:
            return
        ukeys, first = self._distinct(self.keys(rows))
        if self._runs:
            new = ~self._known(ukeys)
            ukeys, first = ukeys[new], first[new]
        if len(ukeys) == 0:
            return
        self._rows.append(rows[np.sort(first)])  # arrival order
        self._n += len(ukeys)
        self.overflow = max(0, self._n - self.max)
        self._add_run(ukeys)
        held = sum(len(r) for r in self._rows)
        if held > self.max + KEEP_EXTRA:  # only the latest M are ever written
            self._rows = [np.concatenate(self._rows)[-self.max :]]

    def table(self) -> np.ndarray:
        """The state table: the latest M distinct tuples, (n, 4) uint32, in order of
        first arrival (RFC 9693's ring of size M)."""
        self.merge()
        if not self._rows:
            return np.empty((0, len(TABLE_COLUMNS)), dtype=np.uint32)
        if len(self._rows) > 1:
            self._rows = [np.concatenate(self._rows)]
        return self._rows[0][-self.max :]

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
            "tuples": min(self._n, self.max),
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
