"""The vectorised frame builder: any batch of frames ``[k, k+n)`` of a stream, in numpy.

No per-frame Python (DESIGN rule 3). For a batch the builder

1. copies the template into the rows of a reused ``(n, stride)`` uint8 buffer (only
   when frame sizes vary, or on first use: fixed-size rows are fully rewritten anyway);
2. computes every varying field for all n frames at once (inc/dec arithmetic, a
   counter-based PRNG for RFC 4814 random fields, a Feistel permutation for unique
   tuples, a gather from the learned-tuple table for table fields) and writes it through
   a strided big-endian view;
3. writes lengths and the 12-byte signature (magic, stream, seq, timestamp);
4. fixes the IPv4 header checksum and the L4 checksum *incrementally*: the template's
   word sum is precomputed, and only the words of varying fields, lengths and the
   signature are added per frame.

Identical (index, seed) always give identical bytes, whatever the batch boundaries.
Imports: numpy and the plain-data program only (workers use this).
"""

from __future__ import annotations

import time

import numpy as np

from tgen_tui.packets.flowsplit import PAYLOAD_FIELDS
from tgen_tui.packets.prng import GOLDEN as _GOLDEN
from tgen_tui.packets.prng import FeistelPermutation, splitmix64, uniform_int
from tgen_tui.packets.program import (
    CSUM_IP,
    CSUM_L4,
    DEC,
    FIXED,
    INC,
    LIVE_TABLE,
    RANDOM,
    SIG_DTYPE,
    SIG_LEN,
    SIG_MAGIC,
    TABLE,
    TABLE_COLUMNS,
    TABLE_ORDERS,
    UNIQUE,
    StreamProgram,
)

_SIG_DTYPE = SIG_DTYPE
_BE = {1: np.dtype("u1"), 2: np.dtype(">u2"), 4: np.dtype(">u4"), 8: np.dtype(">u8")}
_U16 = np.uint64(0xFFFF)
_S16 = np.uint64(16)
_S8 = np.uint64(8)
_S32 = np.uint64(32)


def fold16(s: np.ndarray) -> np.ndarray:
    """Fold a one's-complement sum (uint64) to 16 bits."""
    s = (s & _U16) + (s >> _S16)
    s = (s & _U16) + (s >> _S16)
    return (s & _U16) + (s >> _S16)  # exact for any sum < 2**48


def word_sum(data: bytes) -> int:
    """Unfolded sum of big-endian 16-bit words (odd length padded with a zero byte)."""
    if len(data) % 2:
        data = data + b"\0"
    return int(np.frombuffer(data, dtype=">u2").astype(np.uint64).sum())


def _words(v: np.ndarray, width: int) -> np.ndarray:
    """Sum of the 16-bit big-endian words of ``width``-byte values (width even)."""
    if width == 2:
        return v & _U16
    s = np.zeros_like(v)
    for j in range(0, width, 2):
        s += (v >> np.uint64(8 * (width - 2 - j))) & _U16
    return s


def read_learned_table(path: str) -> np.ndarray:
    """The learned-tuple table at ``path`` as an (M, 4) uint32 array (M >= 1), or a
    ValueError that says in one line what is wrong with it."""
    if not path:
        raise ValueError("a table field needs the stream's learned-tuple table (none given)")
    try:
        t = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(
            f"no learned-tuple table at {path}: the Responder has not learned any tuples "
            "(phase 1 did not run, or its port did not learn)"
        ) from None
    except (OSError, ValueError) as e:
        raise ValueError(f"learned-tuple table {path} is unreadable: {e}") from None
    if t.ndim != 2 or t.shape[1] != len(TABLE_COLUMNS):
        raise ValueError(f"learned-tuple table {path} has shape {t.shape}, not (M, 4)")
    if len(t) == 0:
        raise ValueError(
            f"the learned-tuple table {path} is empty: the Responder received no frames "
            "of the Initiator's streams in phase 1"
        )
    return t.astype(np.uint32, copy=False)


def table_rows(order: str, key: int, idx: np.ndarray, m: int) -> np.ndarray:
    """Row of the learned table for each frame index: fixed (0), inc (i mod M), dec
    (M-1 - i mod M) or random (the RFC 4814 PRNG: uniform in [0, M), keyed)."""
    if order == "fixed":
        return np.zeros(idx.shape, dtype=np.int64)
    if order == "inc":
        return (idx % np.uint64(m)).astype(np.int64)
    if order == "dec":
        return (m - 1) - (idx % np.uint64(m)).astype(np.int64)
    if order == "random":
        return uniform_int(key, idx, 0, m).astype(np.int64)
    raise ValueError(f"unknown table order {order!r} (one of {', '.join(TABLE_ORDERS)})")


def _bswap16(v: np.ndarray) -> np.ndarray:
    return ((v & np.uint64(0xFF)) << _S8) | ((v >> _S8) & np.uint64(0xFF))


class BatchBuilder:
    """Builds batches of one stream's frames into a reused buffer."""

    def __init__(self, program: StreamProgram, max_batch: int = 1024) -> None:
        self.p = program
        self.max_batch = int(max_batch)
        self.max_len = len(program.template)
        self.stride = (self.max_len + 15) & ~15
        self._template = np.frombuffer(program.template, dtype=np.uint8)
        self._buf = np.zeros((self.max_batch, self.stride), dtype=np.uint8)
        self._buf[:, : self.max_len] = self._template
        self._lengths = np.empty(self.max_batch, dtype=np.int64)
        self._fixed_size = program.sizes.mode == "fixed"
        self._perm = None
        if program.unique:
            self._perm = FeistelPermutation(program.unique_space, program.unique_key)
        self._imix = (
            np.array(program.sizes.pattern, dtype=np.int64) if program.sizes.pattern else None
        )
        self._views: dict[tuple[int, int, int], np.ndarray] = {}
        self._uchunk_base = -1
        self._uchunk: list = []
        narrow = [
            i for i, f in enumerate(program.fields) if f.mode == RANDOM and 1 < f.span <= 1 << 32
        ]
        self._rand_idx = narrow
        self._rand_keys = np.array([[program.fields[i].key] for i in narrow], dtype=np.uint64)
        self._rand_spans = np.array([[program.fields[i].span] for i in narrow], dtype=np.uint64)
        self._rand_mins = np.array([[program.fields[i].min] for i in narrow], dtype=np.uint64)
        self._rchunk_base = -1
        self._rchunk: np.ndarray | None = None
        self._table_cols: list[np.ndarray] = []
        if any(f.mode == TABLE for f in program.fields):
            if program.table_order not in TABLE_ORDERS:
                raise ValueError(f"unknown table order {program.table_order!r}")
            if program.table == LIVE_TABLE:  # filled as the port learns (set_table)
                t = np.zeros((1, len(TABLE_COLUMNS)), dtype=np.uint32)
            else:
                t = read_learned_table(program.table)
            self.set_table(t)
        if self._fixed_size:
            self._setup_fixed()

    def set_table(self, t: np.ndarray) -> None:
        """Take the rows of table fields from ``t`` ((M, 4) uint32, M >= 1) from now on."""
        self._table_cols = [t[:, c].astype(np.uint64) for c in range(t.shape[1])]

    # ------------------------------------------------------------------ helpers
    def _view(self, n: int, offset: int, width: int) -> np.ndarray:
        """A strided big-endian column view: element r is bytes [offset, offset+width) of row r."""
        key = (n, offset, width)
        v = self._views.get(key)
        if v is None:
            v = np.ndarray(
                (n,), dtype=_BE[width], buffer=self._buf, offset=offset, strides=(self.stride,)
            )
            if len(self._views) > 64:
                self._views.clear()
            self._views[key] = v
        return v

    def lengths(self, idx: np.ndarray) -> np.ndarray:
        """Frame lengths without FCS for frame indexes."""
        sz = self.p.sizes
        if sz.mode == "fixed":
            return np.full(idx.shape, sz.min, dtype=np.int64)
        if sz.mode == "inc":
            steps = (sz.max - sz.min) // sz.step + 1
            return sz.min + (idx.astype(np.int64) % steps) * sz.step
        if sz.mode == "random":
            return uniform_int(sz.key, idx, sz.min, sz.max - sz.min + 1).astype(np.int64)
        return self._imix[idx.astype(np.int64) % len(self._imix)]

    UNIQUE_CHUNK = 65536

    def _unique_chunk(self, idx: np.ndarray, out: list) -> None:
        """Decode the permuted product index into each unique field (last varies fastest)."""
        p = self.p
        flat = self._perm(idx)
        for fi in reversed(p.unique):
            f = p.fields[fi]
            if f.span >= 1 << 64:  # a full 64-bit field takes the whole index
                out[fi] = flat + np.uint64(f.min)
                flat = np.zeros_like(flat)
                continue
            span = np.uint64(f.span)
            out[fi] = flat % span + np.uint64(f.min)
            flat = flat // span

    def _unique_values(self, idx: np.ndarray, out: list) -> None:
        """Unique tuples, served from a cached chunk of UNIQUE_CHUNK consecutive frames.

        The keyed permutation costs tens of numpy calls per evaluation, so it is evaluated
        once per 65,536 frames (about 1 MiB of values, whatever N is) and paced batches
        slice the chunk; a batch that straddles two chunks is computed directly.
        """
        p = self.p
        start, n = int(idx[0]), len(idx)
        base = start - start % self.UNIQUE_CHUNK
        if n > self.UNIQUE_CHUNK or start + n > base + self.UNIQUE_CHUNK:
            self._unique_chunk(idx, out)
            return
        if self._uchunk_base != base:
            vals: list = [None] * len(p.fields)
            self._unique_chunk(np.arange(base, base + self.UNIQUE_CHUNK, dtype=np.uint64), vals)
            self._uchunk = vals
            self._uchunk_base = base
        off = start - base
        for fi in p.unique:
            out[fi] = self._uchunk[fi][off : off + n]

    # Narrow random fields of consecutive frames come from a cached chunk of this many
    # frames (rows: fields): the hash runs once per chunk, in one long pass, instead of a
    # dozen short numpy calls per batch. Paced streams send small batches, where those
    # calls dominate (benchmarks/results/fresh_vs_prebuilt.json). 0 hashes every batch.
    RANDOM_CHUNK = 4096

    def _random_hash(self, idx: np.ndarray) -> np.ndarray:
        """Every narrow random field for ``idx`` from one 2-D hash (rows: fields)."""
        h = splitmix64((idx * _GOLDEN)[None, :] ^ self._rand_keys)
        return (((h >> _S32) * self._rand_spans) >> _S32) + self._rand_mins

    def _random_block(self, start: int, n: int, idx: np.ndarray) -> np.ndarray:
        """Narrow random fields of frames ``start .. start+n-1`` (``idx``), chunk-cached."""
        c = self.RANDOM_CHUNK
        base = start - start % c if c else 0
        if not c or n > c or start + n > base + c:
            return self._random_hash(idx)  # straddles two chunks (or caching is off)
        if self._rchunk_base != base:
            self._rchunk = self._random_hash(np.arange(base, base + c, dtype=np.uint64))
            self._rchunk_base = base
        return self._rchunk[:, start - base : start - base + n]

    def field_values(self, idx: np.ndarray, contiguous: bool = False) -> list[np.ndarray]:
        """Values (uint64) of every field op for the frame indexes, in ``program.fields`` order.

        ``contiguous``: ``idx`` is ``arange(idx[0], idx[0] + len(idx))`` (the builder's own
        batches), so cached chunks may serve it. With ``blocks`` B > 1 the header fields
        take frame ``i // B``'s values (each computed once, then repeated); the payload's
        own fields (RTP's sequence and timestamp) keep frame i's.
        """
        b = self.p.blocks
        if b <= 1 or not len(idx):
            return self._field_values(idx, contiguous)
        q = idx.astype(np.uint64) // np.uint64(b)
        if contiguous:
            uq = np.arange(int(q[0]), int(q[-1]) + 1, dtype=np.uint64)
            inv = (q - q[0]).astype(np.int64)
        else:
            uq, inv = np.unique(q, return_inverse=True)
        out = [v[inv] for v in self._field_values(uq, contiguous)]
        own = [fi for fi, f in enumerate(self.p.fields) if f.name.startswith(PAYLOAD_FIELDS)]
        if own:
            mine = self._field_values(idx, contiguous)
            for fi in own:
                out[fi] = mine[fi]
        return out

    def _field_values(self, idx: np.ndarray, contiguous: bool) -> list[np.ndarray]:
        p = self.p
        out: list[np.ndarray | None] = [None] * len(p.fields)
        if p.unique:
            self._unique_values(idx, out)
        if self._table_cols:  # one row per frame, shared by every table field
            rows = table_rows(p.table_order, p.table_key, idx, len(self._table_cols[0]))
            for fi, f in enumerate(p.fields):
                if f.mode == TABLE:
                    out[fi] = self._table_cols[f.column][rows]
        if self._rand_idx:  # every narrow random field from one 2-D hash: fewer numpy calls
            if contiguous and len(idx):
                v = self._random_block(int(idx[0]), len(idx), idx)
            else:
                v = self._random_hash(idx)
            for row, fi in enumerate(self._rand_idx):
                out[fi] = v[row]
        for fi, f in enumerate(p.fields):
            if out[fi] is not None:
                continue
            if f.mode == FIXED:
                out[fi] = np.full(idx.shape, f.min, dtype=np.uint64)
            elif f.mode in (INC, DEC):
                with np.errstate(over="ignore"):
                    off = idx * np.uint64(f.step)  # wraps mod 2**64: right for a full 64-bit span
                    if f.span < 1 << 64:
                        off %= np.uint64(f.span)
                with np.errstate(over="ignore"):
                    out[fi] = (
                        (np.uint64(f.min) + off) if f.mode == INC else (np.uint64(f.max) - off)
                    )
            elif f.mode == RANDOM:
                out[fi] = uniform_int(f.key, idx, f.min, f.span)
            elif f.mode == UNIQUE:  # unique listed but not in the group: treat as its own group
                with np.errstate(over="ignore"):
                    out[fi] = FeistelPermutation(f.span, f.key)(idx) + np.uint64(f.min)
            else:
                raise ValueError(f"unknown field mode {f.mode!r}")
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ fixed-size fast path
    def _setup_fixed(self) -> None:
        """Precompute everything constant for a fixed frame size.

        Lengths, magic and stream index go into the row template once. The checksums are
        split into a constant part (every 16-bit word that never changes) and the words that
        do (varying fields, sequence number, timestamp), which ``_build_fixed`` gathers from
        the finished rows with one fancy-index and one sum per checksum. This keeps the cost
        of a call nearly independent of the batch size, so paced low rates stay cheap.
        """
        L = self.max_len
        t = self._fixed_template()
        sig_off = L - SIG_LEN
        self._fixed_checksums(t, sig_off)
        self._template = np.frombuffer(bytes(t), dtype=np.uint8)
        self._buf[:, :L] = self._template
        self._lengths[:] = L
        self._sig_off = sig_off
        self._words2d = np.ndarray(
            (self.max_batch, self.stride // 2),
            dtype=">u2",
            buffer=self._buf,
            strides=(self.stride, 2),
        )
        self._seq_view = self._column("<u4", sig_off + 4)
        self._ts_view = self._column("<u4", sig_off + 8)

    def _column(self, dtype: str, offset: int) -> np.ndarray:
        """One field of every row of the batch buffer, as an array (a strided view)."""
        return np.ndarray(
            (self.max_batch,), dtype=dtype, buffer=self._buf, offset=offset, strides=(self.stride,)
        )

    def _fixed_template(self) -> bytearray:
        """The template at the fixed size: lengths, magic and stream index written."""
        p, L = self.p, self.max_len
        t = bytearray(p.template)
        ulen = L - p.l4_offset
        if p.l3 == 4:
            t[p.l3_offset + 2 : p.l3_offset + 4] = (L - p.l3_offset).to_bytes(2, "big")
        elif p.l3 == 6:
            t[p.l3_offset + 4 : p.l3_offset + 6] = ulen.to_bytes(2, "big")
        if p.l4 == "udp":
            t[p.l4_offset + 4 : p.l4_offset + 6] = ulen.to_bytes(2, "big")
        sig_off = L - SIG_LEN
        t[sig_off : sig_off + 4] = SIG_MAGIC.to_bytes(2, "little") + p.index.to_bytes(2, "little")
        return t

    def _fixed_checksums(self, t: bytearray, sig_off: int) -> None:
        """Split each checksum into its constant part and the words that vary; a wholly
        constant IPv4 header gets its checksum in the template ``t``."""
        p, L = self.p, self.max_len
        ulen = L - p.l4_offset
        pseudo_fixed = p.l4_csum_base - word_sum(bytes(p.template[p.l4_offset :]))
        varying: set[int] = set(range(sig_off + 4, L))  # seq + ts bytes
        l4_extra: set[int] = set()  # words outside the L4 region that the L4 checksum covers
        ip_vary = False
        for f in p.fields:
            rng = range(f.offset, f.offset + f.width)
            varying.update(rng)
            if f.csum & CSUM_L4 and f.offset < p.l4_offset:
                l4_extra.update(b // 2 for b in rng)
            ip_vary = ip_vary or bool(f.csum & CSUM_IP)
        vwords = {b // 2 for b in varying}
        words = np.frombuffer(bytes(t) + b"\0" * (L % 2), dtype=">u2").astype(np.uint64)

        def region(lo: int, hi: int) -> tuple[int, list[int]]:
            span = range(lo // 2, (hi + 1) // 2)
            const = int(sum(int(words[w]) for w in span if w not in vwords))
            return const, sorted(w for w in vwords if w in span)

        self._l4_cols = np.array([], dtype=np.intp)
        self._ip_cols = None
        if p.l4_csum_offset >= 0:
            const, cols = region(p.l4_offset, L)
            if p.l4_pseudo:
                const += pseudo_fixed + ulen
            self._l4_const = np.uint64(const)
            self._l4_cols = np.array(sorted(set(cols) | l4_extra), dtype=np.intp)
        if p.l3 != 4:
            return
        if ip_vary:
            const, cols = region(p.l3_offset, p.l3_offset + 20)
            self._ip_const = np.uint64(const)
            self._ip_cols = np.array(cols, dtype=np.intp)
            return
        # the whole IPv4 header is constant: its checksum goes in the template
        hsum = np.array([word_sum(bytes(t[p.l3_offset : p.l3_offset + 20]))], dtype=np.uint64)
        c = ~int(fold16(hsum)[0]) & 0xFFFF
        t[p.l3_offset + 10 : p.l3_offset + 12] = c.to_bytes(2, "big")

    def _build_fixed(self, start: int, n: int, ts_ns) -> tuple[np.ndarray, np.ndarray]:
        p = self.p
        idx = np.arange(start, start + n, dtype=np.uint64)
        if p.fields:
            for f, v in zip(p.fields, self.field_values(idx, contiguous=True), strict=True):
                self._view(n, f.offset, f.width)[:] = v
        self._seq_view[:n] = idx  # uint64 -> <u4 keeps the low 32 bits
        if ts_ns is None:
            ts_ns = time.monotonic_ns()
        if isinstance(ts_ns, np.ndarray):
            self._ts_view[:n] = ts_ns & np.uint64(0xFFFFFFFF)
        else:
            self._ts_view[:n] = int(ts_ns) & 0xFFFFFFFF
        words = self._words2d[:n]
        if self._ip_cols is not None:
            s = words[:, self._ip_cols].sum(axis=1, dtype=np.uint64) + self._ip_const
            self._view(n, p.l3_offset + 10, 2)[:] = ~fold16(s) & _U16
        if p.l4_csum_offset >= 0:
            s = words[:, self._l4_cols].sum(axis=1, dtype=np.uint64) + self._l4_const
            c = ~fold16(s) & _U16
            if p.l4 == "udp":
                c[c == 0] = 0xFFFF
            self._view(n, p.l4_csum_offset, 2)[:] = c
        return self._buf[:n], self._lengths[:n]

    # ------------------------------------------------------------------ build
    def build(
        self, start: int, n: int, ts_ns: int | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Frames ``start .. start+n-1`` → (buf (n, stride) uint8 view, lengths int64 (n,)).

        The buffer is reused by the next call. ``ts_ns`` is the transmit timestamp written
        into the signature (scalar or per frame; default: CLOCK_MONOTONIC now).
        """
        if n > self.max_batch:
            raise ValueError(f"batch of {n} exceeds max_batch {self.max_batch}")
        if self._fixed_size:
            return self._build_fixed(start, n, ts_ns)
        # variable sizes: rows are rewritten from the template (stale signatures move)
        p = self.p
        buf = self._buf[:n]
        idx = np.arange(start, start + n, dtype=np.uint64)
        lens = self._lengths[:n]
        lens[:] = self.lengths(idx)
        buf[:, : self.max_len] = self._template

        ip_sum = np.full(n, p.ip_csum_base, dtype=np.uint64)
        l4_sum = np.full(n, p.l4_csum_base, dtype=np.uint64)

        for f, v in zip(p.fields, self.field_values(idx), strict=True):
            self._view(n, f.offset, f.width)[:] = v
            if f.csum:
                w = _words(v, f.width)
                if f.csum & CSUM_IP:
                    ip_sum += w
                if f.csum & CSUM_L4:
                    l4_sum += w

        # lengths
        ulen = (lens - p.l4_offset).astype(np.uint64)
        if p.l3 == 4:
            tot = (lens - p.l3_offset).astype(np.uint64)
            self._view(n, p.l3_offset + 2, 2)[:] = tot
            ip_sum += tot
        elif p.l3 == 6:
            self._view(n, p.l3_offset + 4, 2)[:] = ulen
        if p.l4 == "udp":
            self._view(n, p.l4_offset + 4, 2)[:] = ulen
            l4_sum += ulen
        if p.l4_pseudo:
            l4_sum += ulen

        # signature
        if ts_ns is None:
            ts_ns = time.monotonic_ns()
        sig = np.empty(n, dtype=_SIG_DTYPE)
        sig["magic"] = SIG_MAGIC
        sig["stream"] = p.index
        sig["seq"] = (idx & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        sig["ts"] = (np.asarray(ts_ns, dtype=np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        tsv = sig["ts"].astype(np.uint64)
        ssum = (
            np.uint64(SIG_MAGIC + p.index)
            + (idx & _U16)
            + ((idx >> _S16) & _U16)
            + (tsv & _U16)
            + (tsv >> _S16)
        )
        ssum = fold16(ssum)
        sig_off = lens - SIG_LEN
        flat = self._buf.reshape(-1)
        pos = (np.arange(n, dtype=np.int64) * self.stride + sig_off)[:, None] + np.arange(SIG_LEN)
        flat[pos] = sig.view(np.uint8).reshape(n, SIG_LEN)
        odd = ((sig_off - p.l4_offset) & 1).astype(bool)
        l4_sum += np.where(odd, ssum, _bswap16(ssum))

        # checksums
        if p.l3 == 4:
            self._view(n, p.l3_offset + 10, 2)[:] = ~fold16(ip_sum) & _U16
        if p.l4_csum_offset >= 0:
            c = ~fold16(l4_sum) & _U16
            if p.l4 == "udp":
                c[c == 0] = 0xFFFF
            self._view(n, p.l4_csum_offset, 2)[:] = c
        return buf, lens

    def frames(self, start: int, n: int, ts_ns: int | np.ndarray | None = None) -> list[bytes]:
        """Convenience for tests and pcap export: the frames as bytes objects."""
        return frames_of(self, start, n, ts_ns)


def frames_of(builder, start: int, n: int, ts_ns: int | np.ndarray | None = None) -> list[bytes]:
    """Frames ``start .. start+n-1`` of any builder (``build``, ``max_batch``) as bytes."""
    out: list[bytes] = []
    done = 0
    while done < n:
        k = min(builder.max_batch, n - done)
        tsk = ts_ns[done : done + k] if isinstance(ts_ns, np.ndarray) else ts_ns
        buf, lens = builder.build(start + done, k, tsk)
        out.extend(bytes(buf[i, : lens[i]]) for i in range(k))
        done += k
    return out
