"""Kernel transmit times of sampled frames, shared between the sending and receiving worker.

Why: a signature timestamp is taken in user space before ``sendmmsg``; a frame late in a
large batch leaves the port hundreds of µs later (the kernel sends the batch one frame
after another and runs the receive softirqs of the earlier ones in between), so latency
from it measures the tester. The kernel's software transmit timestamp
(``SOF_TIMESTAMPING_TX_SOFTWARE``, taken by the driver as it takes the frame, where a
tcpdump tap on the port sees it too) does not.

How: the sender asks the kernel to stamp every K-th frame of a stream (sequence number
``seq % K == 0``, K a power of two chosen from the rate, :func:`sample_every`), reads
the reports from the socket's error queue in batches and writes them here, into the
stream's row at slot ``(seq // K) % window``. The receiver looks up the sampled frames it
receives by (stream, seq) with numpy and takes latency = its kernel receive time - the
kernel transmit time (both CLOCK_MONOTONIC ns, 64 bits: no 4.29 s wrap).

Without kernel stamps (the tx_ring and AF_XDP paths) the sender records the user-space
send time of every K-th frame instead (``every`` = -K): the receiver keeps the
signature's latency but widens its 32-bit stamp to 64 bits from the nearest sampled frame,
so a frame held past 4.29 s is not reported as a wrapped value.

Layout of the file (int64): a 8-slot header, ``every[n_streams]`` (K; -K: user-space send
times; 0: nothing, receivers use the signature alone), ``gap_ns[n_streams]`` (the asked
mean gap of the stream's current schedule in ns, 0: unknown or not sending; written by
the sender, read by the receiver to measure spacing), then ``seq1[n_streams, window]``
(sequence number + 1; 0 empty) and ``tx_ns[n_streams, window]``. One writer per stream
row (its sender). The writer stores the time before the sequence number; the reader
reads the sequence number before and after the time, so a slot being overwritten is
never matched. The engine creates the file and every local worker maps it; a worker
without one (``tgen calibrate``'s single worker) makes a private table.

Imports: the standard library and numpy only.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

MAGIC = int.from_bytes(b"tgents02", "little")  # 02: gap_ns
HDR = 8
# stamped frames per second and stream (RFC 8219: >= 500 a trial). Each stamp is a
# cloned skb on the socket's error queue, read back with recvmmsg: at 8,192/s a 20 kpps
# worker spent 0.7 s of 5 in system time, at 1,024/s 0.33 s (benchmarks/worker_cpu.py)
TARGET_SAMPLES_PS = 1024
SLOT_BUDGET = 1 << 21  # slots over all streams (32 MiB of file, sparse until used)
WINDOW_MIN = 256
WINDOW_MAX = 1 << 14
TAG_SEQ_BITS = 40  # tag = stream << 40 | seq
TAG_SEQ_MASK = (1 << TAG_SEQ_BITS) - 1


def sample_every(pps: float) -> int:
    """K for a stream at ``pps``: the smallest power of two with pps / K <= TARGET_SAMPLES_PS."""
    k = 1
    while pps / k > TARGET_SAMPLES_PS and k < 1 << 20:
        k <<= 1
    return k


def window_for(n_streams: int) -> int:
    w = SLOT_BUDGET // max(1, n_streams)
    w = 1 << max(0, w.bit_length() - 1)
    return int(max(WINDOW_MIN, min(WINDOW_MAX, w)))


def _slots(n_streams: int, window: int) -> int:
    return HDR + 2 * n_streams + 2 * n_streams * window


class StampTable:
    """The table (see the module docstring), over a file mapping or private memory."""

    def __init__(self, arr: np.ndarray, mm: mmap.mmap | None = None, path: str | None = None):
        if int(arr[0]) != MAGIC:
            raise ValueError(f"{path}: not a tgen stamp table")
        self._mm = mm
        self.path = path
        self.n_streams = int(arr[1])
        self.window = int(arr[2])
        n, w = self.n_streams, self.window
        self.arr = arr
        self.every = arr[HDR : HDR + n]
        self.gap_ns = arr[HDR + n : HDR + 2 * n]
        base = HDR + 2 * n
        self.seq1 = arr[base : base + n * w].reshape(n, w)
        self.tx_ns = arr[base + n * w : base + 2 * n * w].reshape(n, w)
        self._wmask = np.int64(w - 1)

    # ------------------------------------------------------------------ create / open
    @staticmethod
    def _init(a: np.ndarray, n_streams: int, window: int) -> None:
        a[1] = n_streams
        a[2] = window
        a[0] = MAGIC

    @classmethod
    def create(cls, path: str, n_streams: int, window: int | None = None) -> StampTable:
        """Create (truncate) the shared file. The engine does this before the workers start."""
        w = int(window or window_for(n_streams))
        size = _slots(n_streams, w) * 8
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        a = np.frombuffer(mm, dtype=np.int64)
        cls._init(a, n_streams, w)
        return cls(a, mm, path)

    @classmethod
    def open(cls, path: str) -> StampTable:
        """Map an existing table read-write (workers)."""
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        return cls(np.frombuffer(mm, dtype=np.int64), mm, path)

    @classmethod
    def private(cls, n_streams: int, window: int | None = None) -> StampTable:
        """A table in this process's memory (one worker sends and receives)."""
        w = int(window or window_for(n_streams))
        a = np.zeros(_slots(n_streams, w), dtype=np.int64)
        cls._init(a, n_streams, w)
        return cls(a)

    def close(self) -> None:
        self.arr = self.every = self.gap_ns = self.seq1 = self.tx_ns = None  # type: ignore[assignment]
        if self._mm is not None:
            try:
                self._mm.close()
            except (BufferError, ValueError):
                pass

    # ------------------------------------------------------------------ the sender
    def begin_stream(self, stream: int, every: int) -> None:
        """The sender of ``stream`` has the kernel stamp every ``every``-th frame from now
        on; ``-K``: it records the user-space send time of every K-th frame instead (the
        receiver keeps signature latency and uses them only to widen its 32-bit range);
        0: nothing."""
        k = abs(int(every))
        if k & (k - 1):
            raise ValueError("every must be a power of two")
        self.seq1[stream] = 0
        self.every[stream] = int(every)

    def set_gap(self, stream: int, gap_ns: int) -> None:
        """The sender of ``stream`` now asks for a mean gap of ``gap_ns`` ns between its
        frames (0: unknown, or not sending); the receiver measures spacing against it."""
        if 0 <= stream < self.n_streams:
            self.gap_ns[stream] = max(0, int(gap_ns))

    def record(self, tags: np.ndarray, tx_ns: np.ndarray) -> None:
        """Store kernel transmit times (CLOCK_MONOTONIC ns) of frames named by their tags."""
        if len(tags) == 0:
            return
        tags = np.asarray(tags, dtype=np.uint64)
        stream = (tags >> np.uint64(TAG_SEQ_BITS)).astype(np.int64)
        seq = (tags & np.uint64(TAG_SEQ_MASK)).astype(np.int64)
        ok = stream < self.n_streams
        if not ok.all():
            stream, seq, tx_ns = stream[ok], seq[ok], tx_ns[ok]
        every = np.maximum(np.abs(self.every[stream]), 1)
        slot = (seq // every) & self._wmask
        self.tx_ns[stream, slot] = tx_ns  # the time first, then the key that validates it
        self.seq1[stream, slot] = seq + 1

    # ------------------------------------------------------------------ the receiver
    def lookup(self, stream: np.ndarray, seq: np.ndarray, every: np.ndarray) -> np.ndarray:
        """Kernel transmit time of each (stream, seq) (sampled frames), -1 where not (yet) known."""
        slot = (seq // every) & self._wmask
        key = seq + 1
        s1 = self.seq1[stream, slot]
        t = self.tx_ns[stream, slot]
        s2 = self.seq1[stream, slot]
        return np.where((s1 == key) & (s2 == key), t, -1)

    def overwritten(self, stream: np.ndarray, seq: np.ndarray, every: np.ndarray) -> np.ndarray:
        """Whether the slot of each (stream, seq) already holds a later frame: the frame was
        sent more than ``window`` samples ago."""
        slot = (seq // every) & self._wmask
        return self.seq1[stream, slot] > seq + 1


def tags_at(stream: int, seq: np.ndarray) -> np.ndarray:
    """Tags (stream << 40 | seq) of frames ``seq`` of ``stream``: how a stamp names its frame."""
    return (np.uint64(stream) << np.uint64(TAG_SEQ_BITS)) | (
        np.asarray(seq).astype(np.uint64) & np.uint64(TAG_SEQ_MASK)
    )


def tags_for(stream: int, first_seq: int, n: int) -> np.ndarray:
    """Tags of frames ``first_seq .. first_seq + n - 1`` of ``stream``."""
    return tags_at(stream, np.arange(first_seq, first_seq + n, dtype=np.uint64))
