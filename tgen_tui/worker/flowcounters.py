"""The socket-flow counter block: one file under /dev/shm per flow worker, int64 slots.

As for frame workers (:mod:`tgen_tui.worker.counters`): the flow worker is the single
writer of every slot, the engine maps the file read-only and copies it each sample, and
counters only increase (the engine subtracts baselines at ``clear``). *Gauges* (g) can go
down: the kernel's TCP_INFO figures (RTT, cwnd, delivery rate), the flow's state, whether
its schedule has it on, its requested rate.

A flow's TCP figures span its connections: a port that is stopped and started again
opens a new connection, and the cumulative ones (segments out, retransmits, bytes
retransmitted) add the closed connections' totals to the open one's.

Layout (int64 slots)::

    header  HDR_SLOTS (8)              see H_*
    flows   n_flows x FLOW_STRIDE      see FC_*, in configure order: 48 scalar slots, then
            two HIST_BUCKETS histograms (FC_SETUP_HIST, FC_TXN_HIST: the frame workers'
            log-linear geometry, :func:`tgen_tui.worker.rxstats.lat_bucket`)

The request/response slots (FC_ATTEMPTED ... FC_TXN_HIST) are written by an app flow
(:mod:`tgen_tui.worker.appflows`) only; a bulk flow leaves them 0. An app flow counts its
clients' request bytes in tx_bytes, the response bytes they read in rx_bytes (and
rx_bytes_due), and its connections' TCP retransmits (SYNs included) in retrans.

Imports: the standard library and numpy only.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from tgen_tui.worker.counters import HIST_BUCKETS, create_block, map_block

MAGIC = int.from_bytes(b"tgenflw1", "little")
VERSION = 2

HDR_SLOTS = 8
H_MAGIC, H_VERSION, H_N_FLOWS, H_STRIDE, H_PID, H_HEARTBEAT_NS = range(6)

FLOW_SCALARS = 48
FLOW_FIELDS = (
    "flow",  # 0  (g) the flow's id (FlowProgram.id)
    "state",  # 1  (g) STATE_*
    "on",  # 2  (g) 1 while the schedule has the flow sending
    "tx_bytes",  # 3  bytes the application handed to the kernel
    "rx_bytes",  # 4  bytes the receiving application read
    "rx_bytes_due",  # 5  of those, bytes read while the flow was due to send (its goodput)
    "active_ns",  # 6  time the flow was due to send (schedule on, port running)
    "tx_packets",  # 7  UDP: datagrams sent
    "rx_packets",  # 8  UDP: datagrams received
    "expected",  # 9  UDP: datagrams the receiver should have (highest sequence + 1)
    "jitter_ns",  # 10 (g) UDP: RFC 3550 interarrival jitter
    "rate_bps",  # 11 (g) UDP: requested payload bit/s now (set_rate changes it)
    "rtt_us",  # 12 (g) TCP_INFO: smoothed RTT
    "rttvar_us",  # 13 (g)
    "min_rtt_us",  # 14 (g)
    "cwnd",  # 15 (g) segments
    "mss",  # 16 (g) bytes
    "delivery_rate",  # 17 (g) bytes/s, the kernel's estimate
    "retrans",  # 18 segments retransmitted (all connections)
    "data_segs_out",  # 19 data segments sent (all connections)
    "bytes_retrans",  # 20
    "bytes_acked",  # 21
    "connections",  # 22 connections opened (TCP)
    "rtt_sum_us",  # 23 sum of RTT samples taken while the flow delivered data
    "rtt_samples",  # 24 how many
    "errors",  # 25 send/receive/connect errors (the last one's text goes as an event)
    "ti_reads",  # 26 TCP_INFO reads (the figures are this fresh)
    "started_ns",  # 27 (g) CLOCK_MONOTONIC ns of the port start the flow last ran from
    # request/response (app) flows: connections from the client side's view
    "attempted",  # 28 connections begun (connect called, UDP: socket opened)
    "established",  # 29 connects that completed (TCP: writable without error)
    "fail_refused",  # 30 connect refused (RST to the SYN, ECONNREFUSED)
    "fail_reset",  # 31 reset (or EPIPE) after it was established
    "fail_timeout",  # 32 no answer in the app's timeout: connect, or a response
    "fail_local",  # 33 the tester's own limit: no port or address, no file descriptor
    "closed",  # 34 connections that ended after their last transaction (FIN or RST sent)
    "concurrent",  # 35 (g) client connections open now (connecting or established)
    "transactions",  # 36 responses read in full
    "setup_sum_ns",  # 37 connect start to writable, summed over established connections
    "setup_max_ns",  # 38 (g) the longest of those
    "txn_sum_ns",  # 39 request sent (first byte) to response read in full, summed
    "txn_max_ns",  # 40 (g) the longest of those
    "target",  # 41 (g) the load asked now (conn/s, connections or transactions/s) x 1000
    "served",  # 42 server side: responses written in full
    "accepted",  # 43 server side: connections accepted (TCP) or first requests (UDP)
    "setup_min_ns",  # 44 (g) the shortest setup time (0: none yet)
    "txn_min_ns",  # 45 (g) the shortest transaction
    "aborted",  # 46 of closed: still open when the drain ended, closed with RST
    "due",  # 47 rate loads: connections due by now (by the stop) at the asked rate
)
(
    FC_FLOW,
    FC_STATE,
    FC_ON,
    FC_TX_BYTES,
    FC_RX_BYTES,
    FC_RX_BYTES_DUE,
    FC_ACTIVE_NS,
    FC_TX_PACKETS,
    FC_RX_PACKETS,
    FC_EXPECTED,
    FC_JITTER_NS,
    FC_RATE_BPS,
    FC_RTT_US,
    FC_RTTVAR_US,
    FC_MIN_RTT_US,
    FC_CWND,
    FC_MSS,
    FC_DELIVERY_RATE,
    FC_RETRANS,
    FC_DATA_SEGS_OUT,
    FC_BYTES_RETRANS,
    FC_BYTES_ACKED,
    FC_CONNECTIONS,
    FC_RTT_SUM_US,
    FC_RTT_SAMPLES,
    FC_ERRORS,
    FC_TI_READS,
    FC_STARTED_NS,
    FC_ATTEMPTED,
    FC_ESTABLISHED,
    FC_FAIL_REFUSED,
    FC_FAIL_RESET,
    FC_FAIL_TIMEOUT,
    FC_FAIL_LOCAL,
    FC_CLOSED,
    FC_CONCURRENT,
    FC_TRANSACTIONS,
    FC_SETUP_SUM_NS,
    FC_SETUP_MAX_NS,
    FC_TXN_SUM_NS,
    FC_TXN_MAX_NS,
    FC_TARGET,
    FC_SERVED,
    FC_ACCEPTED,
    FC_SETUP_MIN_NS,
    FC_TXN_MIN_NS,
    FC_ABORTED,
    FC_DUE,
) = range(48)
assert len(FLOW_FIELDS) == FLOW_SCALARS
FC_SETUP_HIST = FLOW_SCALARS  # setup time histogram (connect start to writable)
FC_TXN_HIST = FLOW_SCALARS + HIST_BUCKETS  # transaction latency histogram
FLOW_STRIDE = FLOW_SCALARS + 2 * HIST_BUCKETS

#: an app flow's gauges (the other app slots only increase)
APP_GAUGES = (FC_CONCURRENT, FC_SETUP_MAX_NS, FC_TXN_MAX_NS, FC_TARGET)
APP_GAUGES += (FC_SETUP_MIN_NS, FC_TXN_MIN_NS)
#: the slots that only increase: the engine subtracts their baselines at a clear
MONOTONIC = (
    FC_TX_BYTES,
    FC_RX_BYTES,
    FC_RX_BYTES_DUE,
    FC_ACTIVE_NS,
    FC_TX_PACKETS,
    FC_RX_PACKETS,
    FC_EXPECTED,
    FC_RETRANS,
    FC_DATA_SEGS_OUT,
    FC_BYTES_RETRANS,
    FC_BYTES_ACKED,
    FC_CONNECTIONS,
    FC_RTT_SUM_US,
    FC_RTT_SAMPLES,
    FC_ERRORS,
    *(k for k in range(FC_ATTEMPTED, FC_DUE + 1) if k not in APP_GAUGES),
    *range(FC_SETUP_HIST, FLOW_STRIDE),
)

# a flow's life; the engine shows it by these names
STATES = ("idle", "connecting", "sending", "off", "draining", "stopped", "failed")
(
    STATE_IDLE,
    STATE_CONNECTING,
    STATE_SENDING,
    STATE_OFF,
    STATE_DRAINING,
    STATE_STOPPED,
    STATE_FAILED,
) = range(len(STATES))


class FlowCounterView:
    """A numpy int64 view of one flow worker's counter file (writer or reader)."""

    def __init__(self, path: str, mm: mmap.mmap, writable: bool) -> None:
        self.path = path
        self._mm = mm
        a = np.frombuffer(mm, dtype=np.int64)
        if not writable:
            a = a.view()
            a.flags.writeable = False
        if int(a[H_MAGIC]) != MAGIC or int(a[H_VERSION]) != VERSION:
            raise ValueError(f"{path}: not a tgen flow counter block (version {VERSION})")
        self.arr = a
        self.n_flows = int(a[H_N_FLOWS])
        self.rows = self.table(a)

    def table(self, a: np.ndarray) -> np.ndarray:
        """The flow rows of ``a`` (this block or a copy of it): (n_flows, FLOW_STRIDE)."""
        return a[HDR_SLOTS : HDR_SLOTS + self.n_flows * FLOW_STRIDE].reshape(
            self.n_flows, FLOW_STRIDE
        )

    @classmethod
    def create(cls, path: str, flow_ids: list[int]) -> FlowCounterView:
        """Create (truncate) the file for these flows. Used by the flow worker."""
        n = len(flow_ids)
        total = HDR_SLOTS + n * FLOW_STRIDE
        mm = create_block(path, total)
        a = np.frombuffer(mm, dtype=np.int64)
        a[H_N_FLOWS] = n
        a[H_STRIDE] = FLOW_STRIDE
        a[H_PID] = os.getpid()
        a[H_VERSION] = VERSION
        a[H_MAGIC] = MAGIC  # last: a reader that sees the magic sees a complete header
        del a
        cv = cls(path, mm, writable=True)
        cv.rows[:, FC_FLOW] = flow_ids
        return cv

    @classmethod
    def open(cls, path: str) -> FlowCounterView:
        """Map an existing block read-only. Used by the engine."""
        return cls(path, map_block(path), writable=False)

    @classmethod
    def anonymous(cls, flow_ids: list[int]) -> FlowCounterView:
        """A block in memory (the console's fake engine writes simulated flows into it)."""
        n = len(flow_ids)
        mm = mmap.mmap(-1, (HDR_SLOTS + n * FLOW_STRIDE) * 8)
        a = np.frombuffer(mm, dtype=np.int64)
        a[H_N_FLOWS], a[H_STRIDE], a[H_VERSION], a[H_MAGIC] = n, FLOW_STRIDE, VERSION, MAGIC
        del a
        cv = cls("(memory)", mm, writable=True)
        cv.rows[:, FC_FLOW] = flow_ids
        return cv

    def close(self) -> None:
        self.rows = self.arr = None  # type: ignore[assignment]
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass


__all__ = [name for name in dir() if name.startswith(("FC_", "STATE_", "H_"))] + [
    "FLOW_FIELDS",
    "FLOW_SCALARS",
    "FLOW_STRIDE",
    "FlowCounterView",
    "HIST_BUCKETS",
    "HDR_SLOTS",
    "MONOTONIC",
    "STATES",
]
