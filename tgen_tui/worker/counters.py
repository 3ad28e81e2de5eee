"""The shared-memory counter block: one file under /dev/shm per worker, int64 slots.

Single writer: the worker writes every slot; the engine maps the same file read-only
and copies it (:meth:`CounterView.snapshot`). Aligned 8-byte stores are atomic on the
64-bit platforms we run on, so a reader never sees a torn value, but different slots of
one snapshot may come from slightly different moments (rates use deltas over time).

Counters only increase (``clear`` does not reset them: the engine subtracts baselines).
*Gauges* are marked (g): a gauge has one writer too, but it can go down: requested rate,
timestamps, min/max latency, highest sequence number, last VLAN tag, state. ``clear``
resets the rx sequence state, which includes the gauges ``max_seq``, ``lat_min`` and
``lat_max``.

Layout (all offsets in int64 slots from the start of the file)::

    header     HDR_SLOTS (16) slots, see H_*
    ports      n_ports   x PORT_STRIDE (16)  see P_*, in configure order
    tx streams n_tx      x TX_STRIDE (8)     see T_*, in configure order (port by port)
    rx tables  n_rx      x n_streams x RX_STRIDE (32 + 2 x HIST_BUCKETS)
               one table per port with rx, indexed by global stream index; see R_*,
               R_IAT_HIST (the inter-arrival histogram) and R_HIST (the latency
               histogram, last in the row: ``row[R_HIST:]``), :mod:`tgen_tui.worker.rxstats`
    flows      n_ports   x FLOW_STRIDE (32 + HIST_BUCKETS)  see F_*, in configure order:
               the port's stateful figures (:mod:`tgen_tui.worker.liveflow`): tuples
               learned, flows sent / verified, setup latency (sum, min, max, histogram),
               the first learned tuples; not reset by ``clear`` (the engine does not
               baseline them either: they count since the start, like the final report)

Who creates and removes the file: the worker creates (and truncates) it at
``configure``; the engine removes it when it is done reading (the worker never unlinks,
so the final counters survive the worker).

Imports: the standard library and numpy only (the engine imports this module as well).
"""

from __future__ import annotations

import mmap
import os

import numpy as np

MAGIC = int.from_bytes(b"tgenctr1", "little")
VERSION = 3  # 2: the flow table, the rx rows' receive gap; 3: spacing (iat_*)

# ---- header
HDR_SLOTS = 16
H_MAGIC = 0
H_VERSION = 1
H_N_PORTS = 2
H_N_TX = 3
H_N_STREAMS = 4
H_N_RX = 5
H_HIST_BUCKETS = 6
H_PORT_STRIDE = 7
H_TX_STRIDE = 8
H_RX_STRIDE = 9
H_PORT_BASE = 10
H_TX_BASE = 11
H_RX_BASE = 12
H_TOTAL = 13
H_PID = 14  # worker pid
H_HEARTBEAT_NS = 15  # (g) CLOCK_MONOTONIC ns of the worker's last loop turn

# ---- per port
PORT_STRIDE = 16
PORT_FIELDS = (
    "tx_frames",  # 0  frames handed to the kernel
    "tx_bytes",  # 1  their lengths (no FCS)
    "tx_errors",  # 2  failed/partial send attempts (EAGAIN/ENOBUFS); frames are retried
    "rx_frames",  # 3  every frame the rx ring delivered (signature or not)
    "rx_bytes",  # 4  their lengths, + 4 per stripped VLAN tag, no FCS
    "rx_other",  # 5  frames without the magic, or with a stream index >= n_streams
    "ring_drops",  # 6  kernel drops (PACKET_STATISTICS tp_drops: ring full)
    "late_events",  # 7  tx batches that went out more than LATE_NS after their first due time
    "heartbeat_ns",  # 8  (g) CLOCK_MONOTONIC ns of the last loop turn that served this port
    "busy_ns",  # 9  ns spent on this port's tx and rx work (CPU use = d(busy)/d(time))
    "rx_kernel_packets",  # 10 PACKET_STATISTICS tp_packets (frames the ring accepted)
    "late_max_ns",  # 11 (g) the largest lateness of a batch since start
    "state",  # 12 (g) STATE_*
    "rx_table",  # 13 (g) index of this port's rx table, -1 without rx
    "tx_due",  # 14 frames due so far (sum over streams); tx_due - tx_frames = backlog
    "started_ns",  # 15 (g) t0 of the last start (CLOCK_MONOTONIC ns)
)
(
    P_TX_FRAMES,
    P_TX_BYTES,
    P_TX_ERRORS,
    P_RX_FRAMES,
    P_RX_BYTES,
    P_RX_OTHER,
    P_RING_DROPS,
    P_LATE_EVENTS,
    P_HEARTBEAT_NS,
    P_BUSY_NS,
    P_RX_KERNEL_PACKETS,
    P_LATE_MAX_NS,
    P_STATE,
    P_RX_TABLE,
    P_TX_DUE,
    P_STARTED_NS,
) = range(PORT_STRIDE)
STATE_IDLE, STATE_RUNNING, STATE_DRAINING, STATE_STOPPED = 0, 1, 2, 3

# ---- per tx stream
TX_STRIDE = 8
TX_FIELDS = (
    "stream",  # 0 (g) global stream index
    "port",  # 1 (g) port index in this worker
    "tx_frames",  # 2
    "tx_bytes",  # 3
    "requested_mpps",  # 4 (g) requested rate in milli-frames/s (set_rate changes it)
    "first_tx_ns",  # 5 (g) CLOCK_MONOTONIC ns of the first send since start
    "last_tx_ns",  # 6 (g) ... of the last send
    "due",  # 7 frames due so far (for the achieved/requested ratio)
)
T_STREAM, T_PORT, T_TX_FRAMES, T_TX_BYTES, T_REQ_MPPS, T_FIRST_TX_NS, T_LAST_TX_NS, T_DUE = range(
    TX_STRIDE
)

# ---- per rx stream (one row per global stream index, in each rx table)
RX_FIXED = 32
RX_FIELDS = (
    "frames",  # 0  frames with the signature of this stream
    "bytes",  # 1
    "ooo",  # 2  out of order: seq below the highest seen before it (duplicates excluded)
    "dup",  # 3  duplicates (seen before, within the window)
    "max_seq",  # 4  (g) highest sequence number seen, extended to 64 bits; -1 none
    "lat_count",  # 5
    "lat_sum_ns",  # 6
    "lat_min_ns",  # 7  (g) INT64_MAX when none
    "lat_max_ns",  # 8  (g) -1 when none
    "jitter_sum_ns",  # 9  sum of |D(i) - D(i-1)| between consecutive frames of the stream
    "jitter_count",  # 10
    "neg_lat",  # 11 frames whose latency came out negative (clamped to 0)
    "vlan_frames",  # 12 frames that carried a (stripped) outer VLAN tag
    "vlan_last",  # 13 (g) last outer tag seen: (tpid << 16) | tci; -1 none
    "first_rx_ns",  # 14 (g) CLOCK_MONOTONIC ns of the first frame; 0 none
    "last_rx_ns",  # 15 (g) ... of the last frame
    "too_old",  # 16 frames older than the duplicate window (counted in ooo, not checked for dup)
    "clears",  # 17 times the sequence state was cleared
    "seq_window",  # 18 (g) duplicate window (sequence numbers)
    "lat_every",  # 19 (g) latency from kernel tx timestamps of every K-th frame; 0: signature
    "lat_unstamped",  # 20 sampled frames whose kernel tx time never came (no latency taken)
    "max_gap_ns",  # 21 (g) longest gap between two received frames (kernel rx times); 0 none
    "gap_start_ns",  # 22 (g) CLOCK_MONOTONIC ns at which that gap began
    "iat_count",  # 23 inter-arrival gaps measured (frames n then n+1 of a row, rx stamps)
    "iat_sum_ns",  # 24 their sum
    "iat_asked_count",  # 25 of those, gaps whose asked gap was known (txstamps gap_ns > 0)
    "iat_abs_err_ns",  # 26 sum of |gap - asked gap| over those
    "iat_within",  # 27 of those, gaps with |gap - asked| <= 10 % of asked
    "iat_asked_ns",  # 28 (g) the asked gap seen last (ns); 0 none
    "reserved29",
    "reserved30",
    "reserved31",
)
(
    R_FRAMES,
    R_BYTES,
    R_OOO,
    R_DUP,
    R_MAX_SEQ,
    R_LAT_COUNT,
    R_LAT_SUM,
    R_LAT_MIN,
    R_LAT_MAX,
    R_JIT_SUM,
    R_JIT_COUNT,
    R_NEG_LAT,
    R_VLAN_FRAMES,
    R_VLAN_LAST,
    R_FIRST_RX_NS,
    R_LAST_RX_NS,
    R_TOO_OLD,
    R_CLEARS,
    R_SEQ_WINDOW,
    R_LAT_EVERY,
    R_LAT_UNSTAMPED,
    R_MAX_GAP,
    R_GAP_START,
    R_IAT_COUNT,
    R_IAT_SUM,
    R_IAT_ASKED_COUNT,
    R_IAT_ABS_ERR,
    R_IAT_WITHIN,
    R_IAT_ASKED,
) = range(29)

# latency histogram geometry (see rxstats.lat_bucket): 16 linear buckets of 64 ns below
# 1024 ns, then 16 sub-buckets per power of two from 2^10 ns to 2^32 ns (4.29 s)
HIST_SUB = 16
HIST_LINEAR_SHIFT = 6
HIST_MIN_EXP = 10
HIST_MAX_EXP = 31
HIST_BUCKETS = HIST_SUB + (HIST_MAX_EXP - HIST_MIN_EXP + 1) * HIST_SUB  # 368
R_IAT_HIST = RX_FIXED  # the inter-arrival histogram (same geometry), then ...
R_HIST = RX_FIXED + HIST_BUCKETS  # ... the latency histogram, to the end of the row
RX_STRIDE = RX_FIXED + 2 * HIST_BUCKETS

INT64_MAX = np.iinfo(np.int64).max

# ---- per port: stateful figures (one writer: the port's worker; gauges marked (g))
FLOW_FIXED = 32
SAMPLES = 5  # learned tuples kept as samples (the first ones learned)
FLOW_FIELDS = (
    "learned",  # 0  distinct tuples this port's learner holds
    "flows",  # 1  distinct flows (own address, port) this port sent (verifying ports)
    "flows_verified",  # 2  of those, flows whose reply arrived here
    "setup_sum_ns",  # 3  sum of the verified flows' setup latencies (first reply - first send)
    "setup_min_ns",  # 4  (g) INT64_MAX when none
    "setup_max_ns",  # 5  (g) -1 when none
    "n_samples",  # 6  (g) learned tuples in the sample slots
)
F_LEARNED, F_FLOWS, F_VERIFIED, F_SETUP_SUM, F_SETUP_MIN, F_SETUP_MAX, F_N_SAMPLES = range(7)
F_SAMPLES = 8  # SAMPLES x (src, dst, sport, dport) of learned tuples, (g)
F_HIST = FLOW_FIXED  # setup latency histogram (rxstats.lat_bucket geometry)
FLOW_STRIDE = FLOW_FIXED + HIST_BUCKETS


def layout_size(n_ports: int, n_tx: int, n_streams: int, n_rx: int) -> int:
    """Slots for a block with these dimensions."""
    return (
        HDR_SLOTS
        + n_ports * PORT_STRIDE
        + n_tx * TX_STRIDE
        + n_rx * n_streams * RX_STRIDE
        + n_ports * FLOW_STRIDE
    )


def create_block(path: str, slots: int) -> mmap.mmap:
    """A new shared counter file of ``slots`` int64s (truncated, mode 0600), mapped
    read-write: the writer's side (a worker)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, slots * 8)
        return mmap.mmap(fd, slots * 8, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


def map_block(path: str) -> mmap.mmap:
    """An existing shared counter file, mapped read-only: the reader's side (the engine)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ)
    finally:
        os.close(fd)


class CounterView:
    """A numpy int64 view of one worker's counter file (writer or reader).

    Writer (worker)::

        cv = CounterView.create(path, n_ports=2, n_tx=3, n_streams=8, n_rx=1)
        cv.ports[0, P_TX_FRAMES] += n

    Reader (engine)::

        cv = CounterView.open(path)
        snap = cv.snapshot()        # plain dict, copied
    """

    def __init__(self, path: str, mm: mmap.mmap, writable: bool):
        self.path = path
        self._mm = mm
        self.writable = writable
        a = np.frombuffer(mm, dtype=np.int64)
        if not writable:
            a = a.view()
            a.flags.writeable = False
        self.arr = a
        h = a[:HDR_SLOTS]
        if int(h[H_MAGIC]) != MAGIC or int(h[H_VERSION]) != VERSION:
            raise ValueError(f"{path}: not a tgen counter block (version {VERSION})")
        self.n_ports = int(h[H_N_PORTS])
        self.n_tx = int(h[H_N_TX])
        self.n_streams = int(h[H_N_STREAMS])
        self.n_rx = int(h[H_N_RX])
        self.header = h
        self.ports, self.tx, self.rx = self.tables(a)
        self.flows = self.flow_table(a)

    def tables(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The port, tx and rx tables of ``a`` (this block or a copy of it): the one place
        that slices the layout (with :meth:`flow_table`). Shapes: (n_ports, PORT_STRIDE),
        (n_tx, TX_STRIDE), (n_rx, n_streams, RX_STRIDE)."""
        h = self.header
        pb, tb, rb = int(h[H_PORT_BASE]), int(h[H_TX_BASE]), int(h[H_RX_BASE])
        ports = a[pb : pb + self.n_ports * PORT_STRIDE].reshape(self.n_ports, PORT_STRIDE)
        tx = a[tb : tb + self.n_tx * TX_STRIDE].reshape(self.n_tx, TX_STRIDE)
        rx = a[rb : rb + self.n_rx * self.n_streams * RX_STRIDE].reshape(
            self.n_rx, self.n_streams, RX_STRIDE
        )
        return ports, tx, rx

    def flow_table(self, a: np.ndarray) -> np.ndarray:
        """The per-port flow table of ``a``: shape (n_ports, FLOW_STRIDE), right after the
        rx tables."""
        fb = int(self.header[H_RX_BASE]) + self.n_rx * self.n_streams * RX_STRIDE
        return a[fb : fb + self.n_ports * FLOW_STRIDE].reshape(self.n_ports, FLOW_STRIDE)

    # ------------------------------------------------------------------ open / create
    @classmethod
    def create(cls, path: str, n_ports: int, n_tx: int, n_streams: int, n_rx: int) -> CounterView:
        """Create (truncate) the file and write the header. Used by the worker."""
        total = layout_size(n_ports, n_tx, n_streams, n_rx)
        mm = create_block(path, total)
        a = np.frombuffer(mm, dtype=np.int64)
        pb = HDR_SLOTS
        tb = pb + n_ports * PORT_STRIDE
        rb = tb + n_tx * TX_STRIDE
        a[H_N_PORTS] = n_ports
        a[H_N_TX] = n_tx
        a[H_N_STREAMS] = n_streams
        a[H_N_RX] = n_rx
        a[H_HIST_BUCKETS] = HIST_BUCKETS
        a[H_PORT_STRIDE] = PORT_STRIDE
        a[H_TX_STRIDE] = TX_STRIDE
        a[H_RX_STRIDE] = RX_STRIDE
        a[H_PORT_BASE] = pb
        a[H_TX_BASE] = tb
        a[H_RX_BASE] = rb
        a[H_TOTAL] = total
        a[H_PID] = os.getpid()
        a[H_VERSION] = VERSION
        a[H_MAGIC] = MAGIC  # last: a reader that sees the magic sees a complete header
        del a
        cv = cls(path, mm, writable=True)
        cv.ports[:, P_RX_TABLE] = -1
        cv.flows[:, F_SETUP_MIN] = INT64_MAX
        cv.flows[:, F_SETUP_MAX] = -1
        if n_rx:
            cv.reset_rx_gauges()
        return cv

    @classmethod
    def open(cls, path: str) -> CounterView:
        """Map an existing block read-only. Used by the engine."""
        return cls(path, map_block(path), writable=False)

    def reset_rx_gauges(self, table: int | None = None) -> None:
        """Writer: put the rx sequence gauges in their 'none seen' state."""
        t = self.rx if table is None else self.rx[table : table + 1]
        t[:, :, R_MAX_SEQ] = -1
        t[:, :, R_LAT_MIN] = INT64_MAX
        t[:, :, R_LAT_MAX] = -1
        t[:, :, R_VLAN_LAST] = -1

    def close(self) -> None:
        self.header = self.ports = self.tx = self.rx = self.arr = None  # type: ignore[assignment]
        self.flows = None  # type: ignore[assignment]
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass

    # ------------------------------------------------------------------ reading
    def snapshot(self, hist: bool = True, all_streams: bool = False) -> dict:
        """A copied, plain-Python picture of the block.

        ``rx`` holds, per rx table, only the streams that have received frames (unless
        ``all_streams``), keyed by global stream index; ``hist`` is the list of
        HIST_BUCKETS counts (see :func:`tgen_tui.worker.rxstats.hist_edges_ns`).
        """
        a = np.array(self.arr, copy=True)
        ports, tx, rx = self.tables(a)
        out = {
            "pid": int(a[H_PID]),
            "heartbeat_ns": int(a[H_HEARTBEAT_NS]),
            "ports": [dict(zip(PORT_FIELDS, map(int, row), strict=True)) for row in ports],
            "tx": [dict(zip(TX_FIELDS, map(int, row), strict=True)) for row in tx],
            "rx": [],
        }
        for t in range(self.n_rx):
            tab = rx[t]
            idx = np.arange(self.n_streams) if all_streams else np.flatnonzero(tab[:, R_FRAMES])
            streams = {}
            for s in idx:
                row = tab[s]
                d = {
                    k: int(v)
                    for k, v in zip(RX_FIELDS, row[:RX_FIXED], strict=True)
                    if not k.startswith("reserved")
                }
                if hist:
                    d["hist"] = row[R_HIST:].tolist()
                    d["iat_hist"] = row[R_IAT_HIST:R_HIST].tolist()
                streams[int(s)] = d
            out["rx"].append(streams)
        return out
