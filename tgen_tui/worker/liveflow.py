"""Stateful figures of one port, in numpy batches: live replies to learned tuples, per-flow
verification and the longest receive gap (outage) of every stream.

- :class:`LiveReplies`: a ``learn: true`` stream (``StreamProgram.table == LIVE_TABLE``)
  replies to the tuples its own port learns while it runs. Its sending waits (paused)
  until the first tuple is learned; then its builder's table is refreshed as the
  :class:`~tgen_tui.worker.learn.Learner` merges new tuples (every few ms), and frame i
  goes to row ``i mod M`` (M: tuples learned so far).
- :class:`FlowVerify`: on the port that sends the forward streams and receives the
  replies, a flow is keyed by its own (address, port): the source of the frames it sends
  and, after the NAT translated the reply back, the destination of the replies it
  receives. The first send and first reply of every key are kept (sorted numpy arrays,
  merged every ``MERGE_NS``); at the end: flows sent, flows verified (both ways) and the
  setup latency of each verified flow (first reply received minus first frame sent, both
  CLOCK_MONOTONIC).
- :class:`GapTracker`: per stream, the longest gap between two received signature frames
  (kernel receive times) and when it began: the outage a DUT event caused.

The live figures go into the counter block (DESIGN rule 4, one writer: this worker):
the receive gap of each stream into its rx row (``R_MAX_GAP``, ``R_GAP_START``), and the
port's learned count, samples, flows, verified flows and setup-latency histogram into its
flow row (``counters.F_*``), updated as they change (verification: at each merge, every
``MERGE_NS``; a pair is counted once, when the later of its two keys is merged). The
final report (:meth:`PortFlows.report`) writes them once more, so the engine's final
snapshot and the report agree.

Imports: the standard library and numpy only.
"""

from __future__ import annotations

import numpy as np

from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import lat_bucket

LIVE_MERGE_NS = 5_000_000  # a live learner merges (and its replies see new tuples) every 5 ms
MERGE_NS = 50_000_000  # first-seen tables merge their pending keys every 50 ms
SAMPLES = C.SAMPLES  # learned tuples named in the report
_U16 = np.uint64(16)


def _ip_port_keys(ip: np.ndarray, port: np.ndarray) -> np.ndarray:
    return (ip.astype(np.uint64) << _U16) | port.astype(np.uint64)


class FirstSeen:
    """Distinct uint64 keys and the earliest time each was seen (sorted, merged in batches)."""

    def __init__(self) -> None:
        self.keys = np.empty(0, dtype=np.uint64)
        self.times = np.empty(0, dtype=np.int64)
        self._pk: list[np.ndarray] = []
        self._pt: list[np.ndarray] = []

    def add(self, keys: np.ndarray, times: np.ndarray) -> None:
        if len(keys):
            self._pk.append(keys)
            self._pt.append(times)

    def merge(self) -> tuple[np.ndarray, np.ndarray]:
        """Fold the pending keys in; return the keys (and times) that were new."""
        if not self._pk:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        k = np.concatenate(self._pk)
        t = np.concatenate(self._pt)
        self._pk, self._pt = [], []
        # earliest time of each key (times arrive in order, but sort to be sure)
        order = np.lexsort((t, k))
        k, t = k[order], t[order]
        head = np.ones(len(k), dtype=bool)
        head[1:] = k[1:] != k[:-1]
        k, t = k[head], t[head]
        if len(self.keys):
            pos = np.searchsorted(self.keys, k)
            hit = pos < len(self.keys)
            hit[hit] = self.keys[pos[hit]] == k[hit]
            k, t, pos = k[~hit], t[~hit], pos[~hit]
            self.keys = np.insert(self.keys, pos, k)
            self.times = np.insert(self.times, pos, t)
        else:
            self.keys, self.times = k, t
        return k, t

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mask of ``keys`` held here, their times)."""
        if len(self.keys) == 0 or len(keys) == 0:
            return np.zeros(len(keys), dtype=bool), np.empty(0, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        hit = self.keys[pos] == keys
        return hit, self.times[pos[hit]]


class GapTracker:
    """The longest receive gap of every stream, in kernel receive time (ns)."""

    def __init__(self, table: np.ndarray | None = None) -> None:
        self.last: dict[int, int] = {}
        self.gap: dict[int, int] = {}
        self.gap_at: dict[int, int] = {}
        self.table = table  # the port's rx table (n_streams, RX_STRIDE): the live gauges

    def reset(self) -> None:
        self.last.clear()
        self.gap.clear()
        self.gap_at.clear()
        if self.table is not None:
            self.table[:, C.R_MAX_GAP] = 0
            self.table[:, C.R_GAP_START] = 0

    def _set(self, s: int, gap: int, at: int) -> None:
        self.gap[s] = gap
        self.gap_at[s] = at
        t = self.table
        if t is not None and 0 <= s < len(t):
            t[s, C.R_GAP_START] = at
            t[s, C.R_MAX_GAP] = gap

    def add(self, stream: np.ndarray, rx_ns: np.ndarray, sig: np.ndarray) -> None:
        if len(stream) == 0:
            return
        if sig.all():  # the usual batch: no copies
            st, t = stream, rx_ns
        elif sig.any():
            st, t = stream[sig], rx_ns[sig]
        else:
            return
        s0 = st[0]
        if st[-1] == s0 and (st == s0).all():  # one stream (a few passes over the batch)
            self._one(int(s0), t)
            return
        # several streams: a stable (radix) sort by stream keeps each one's times in
        # order; one diff, and per stream the largest gap inside the batch
        order = np.argsort(st, kind="stable")
        ss, ts = st[order], t[order]
        cut = np.flatnonzero(ss[1:] != ss[:-1]) + 1
        starts = np.concatenate(([0], cut))
        ends = np.concatenate((cut, [len(ss)]))
        d = np.diff(ts)
        d[cut - 1] = -1  # across two streams: not a gap
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            self._seg(int(ss[a]), ts, d, a, b)

    def _seg(self, s: int, ts: np.ndarray, d: np.ndarray, a: int, b: int) -> None:
        """Stream ``s``'s frames are ts[a:b]; d[a:b-1] their gaps."""
        gap, at = -1, 0
        if b - a > 1:
            i = a + int(d[a : b - 1].argmax())
            gap, at = int(d[i]), int(ts[i])
        prev = self.last.get(s)
        if prev is not None and int(ts[a]) - prev > gap:
            gap, at = int(ts[a]) - prev, prev
        if gap >= 0 and gap > self.gap.get(s, -1):
            self._set(s, gap, at)
        self.last[s] = int(ts[b - 1])

    def _one(self, s: int, ts: np.ndarray) -> None:
        gap, at = -1, 0
        if len(ts) > 1:
            d = np.diff(ts)
            i = int(d.argmax())
            gap, at = int(d[i]), int(ts[i])
        prev = self.last.get(s)
        if prev is not None and int(ts[0]) - prev > gap:
            gap, at = int(ts[0]) - prev, prev
        if gap >= 0 and gap > self.gap.get(s, -1):
            self._set(s, gap, at)
        self.last[s] = int(ts[-1])

    def report(self) -> dict[int, dict]:
        return {
            s: {"max_gap_ns": self.gap.get(s, 0), "gap_start_ns": self.gap_at.get(s)}
            for s in self.last
        }


class LiveReplies:
    """The port's ``learn: true`` streams reply to the tuples its Learner holds so far."""

    def __init__(self, learner, streams: list, row: np.ndarray | None = None) -> None:
        self.learner = learner
        learner.merge_ns = LIVE_MERGE_NS
        self.streams = streams
        self.row = row  # the port's flow row (counters.F_*)
        self.rows = 0
        self.next_ns = 0
        for st in streams:  # nothing to reply to yet
            st.set_paused(True, 0.0)

    def update(self, now_ns: int, rel_s: float) -> None:
        if now_ns < self.next_ns or self.learner.learned == self.rows:
            return
        t = self.learner.table()
        if len(t) == 0:
            return
        for st in self.streams:
            st.builder.set_table(t)
        if self.rows == 0:
            for st in self.streams:
                st.set_paused(False, rel_s)
        self.rows = len(t)
        self.write_samples(t)
        # a big table is copied less often (each refresh is O(M))
        self.next_ns = now_ns + LIVE_MERGE_NS + 50 * self.rows

    def write_samples(self, t: np.ndarray) -> None:
        """The first SAMPLES tuples learned, into the flow row (once there are that many)."""
        r = self.row
        if r is None or int(r[C.F_N_SAMPLES]) >= SAMPLES:
            return
        k = min(SAMPLES, len(t))
        r[C.F_SAMPLES : C.F_SAMPLES + 4 * k] = np.asarray(t[:k], dtype=np.int64).reshape(-1)
        r[C.F_N_SAMPLES] = k

    def samples(self) -> list[list[int]]:
        t = self.learner.table()
        self.write_samples(t)
        return [[int(x) for x in r] for r in t[:SAMPLES]]


class FlowVerify:
    """Flows sent by this port (source address, port) against replies received here
    (destination address, port): verified when both ways happened."""

    def __init__(self, tx_streams, rx_streams, row: np.ndarray | None = None) -> None:
        self.tx_streams = {int(s) for s in tx_streams}
        self.rx_streams = np.array(sorted(int(s) for s in rx_streams), dtype=np.uint16)
        self.tx = FirstSeen()
        self.rx = FirstSeen()
        self.next_ns = 0
        self.row = row  # the port's flow row (counters.F_*): the live figures

    def merge(self) -> None:
        """Merge both sides; count the flows verified by this merge into the flow row."""
        rx_before = self.rx.keys
        k, t = self.tx.merge()
        lat = []
        if len(rx_before) and len(k):  # new flows whose reply was already merged
            pos = np.minimum(np.searchsorted(rx_before, k), len(rx_before) - 1)
            hit = rx_before[pos] == k
            lat.append(self.rx.times[pos[hit]] - t[hit])  # rx.keys is still rx_before
        k, t = self.rx.merge()
        hit, tt = self.tx.lookup(k)  # new replies of flows sent (this merge's included)
        lat.append(t[hit] - tt)
        r = self.row
        if r is None:
            return
        r[C.F_FLOWS] = len(self.tx.keys)
        d = np.concatenate(lat)
        if len(d):
            r[C.F_SETUP_SUM] += int(d.sum())
            r[C.F_SETUP_MIN] = min(int(r[C.F_SETUP_MIN]), int(d.min()))
            r[C.F_SETUP_MAX] = max(int(r[C.F_SETUP_MAX]), int(d.max()))
            b = lat_bucket(np.clip(d, 0, (1 << 32) - 1))
            r[C.F_HIST :] += np.bincount(b, minlength=C.HIST_BUCKETS)[: C.HIST_BUCKETS]
            r[C.F_VERIFIED] += len(d)  # last: a reader sees the histogram first

    def on_tx(self, prog, buf: np.ndarray, m: int, send_ns: int) -> None:
        if prog.index not in self.tx_streams or m <= 0:
            return
        a, b = prog.l3_offset + 12, prog.l4_offset
        rows = buf[:m]
        ip = (
            (rows[:, a].astype(np.uint64) << np.uint64(24))
            | (rows[:, a + 1].astype(np.uint64) << np.uint64(16))
            | (rows[:, a + 2].astype(np.uint64) << np.uint64(8))
            | rows[:, a + 3].astype(np.uint64)
        )
        port = (rows[:, b].astype(np.uint64) << np.uint64(8)) | rows[:, b + 1].astype(np.uint64)
        self.tx.add(_ip_port_keys(ip, port), np.full(m, send_ns, dtype=np.int64))

    def on_rx(self, batch, now_ns: int) -> None:
        if batch.hdr is not None and len(batch):
            mine = batch.has_sig & np.isin(batch.stream, self.rx_streams) & batch.hdr_ok
            if mine.any():
                h = batch.hdr[mine]
                self.rx.add(_ip_port_keys(h[:, 1], h[:, 3]), batch.rx_ns[mine])
        if now_ns >= self.next_ns:
            self.merge()
            self.next_ns = now_ns + MERGE_NS

    def report(self) -> dict:
        self.merge()
        _, it, ir = np.intersect1d(
            self.tx.keys, self.rx.keys, assume_unique=True, return_indices=True
        )
        lat = self.rx.times[ir] - self.tx.times[it]
        out: dict = {
            "flows": len(self.tx.keys),
            "flows_verified": len(it),
            "reply_flows": len(self.rx.keys),
            "tx_streams": sorted(self.tx_streams),
        }
        if len(lat):
            q = np.percentile(lat, [50, 90, 99])
            out["setup_latency_ns"] = {
                "min": int(lat.min()),
                "p50": float(q[0]),
                "p90": float(q[1]),
                "p99": float(q[2]),
                "max": int(lat.max()),
                "avg": float(lat.mean()),
            }
        return out


class PortFlows:
    """What one port keeps of the above (see :func:`attach`)."""

    def __init__(
        self,
        gaps: GapTracker,
        live: LiveReplies | None,
        verify: FlowVerify | None,
        learner=None,
        row: np.ndarray | None = None,
    ):
        self.gaps = gaps
        self.live = live
        self.verify = verify
        self.learner = learner
        self.row = row  # the port's flow row: learned count

    def _learned(self) -> None:
        if self.learner is not None and self.row is not None:
            self.row[C.F_LEARNED] = self.learner.learned

    def on_tx(self, prog, buf, m: int, send_ns: int) -> None:
        if self.verify is not None:
            self.verify.on_tx(prog, buf, m, send_ns)

    def on_rx(self, batch, now_ns: int, rel_s: float) -> None:
        if len(batch):
            self.gaps.add(batch.stream, batch.rx_ns, batch.has_sig)
        if self.verify is not None:
            self.verify.on_rx(batch, now_ns)
        if self.live is not None:
            self.live.update(now_ns, rel_s)
        self._learned()

    def report(self) -> dict:
        """The final figures (after the learner's last merge); the flow row gets them too."""
        self._learned()
        out: dict = {"gaps": {str(k): v for k, v in self.gaps.report().items()}}
        if self.verify is not None:
            out["verify"] = self.verify.report()
        if self.live is not None:
            out["learned_samples"] = self.live.samples()
            out["live_streams"] = [st.index for st in self.live.streams]
        return out


def attach(
    spec: dict,
    learner,
    streams: list,
    row: np.ndarray | None = None,
    rx_table: np.ndarray | None = None,
) -> PortFlows:
    """The port's flow figures: live replies when it sends ``learn: true`` streams (and
    learns), verification when its spec has ``flows: {tx_streams, rx_streams}``. ``row``:
    the port's flow row, ``rx_table``: its rx table (the live figures; None: report only)."""
    from tgen_tui.packets.program import LIVE_TABLE

    live_streams = [st for st in streams if st.prog.table == LIVE_TABLE]
    live = None
    if live_streams:
        if learner is None:
            names = ", ".join(st.prog.name for st in live_streams)
            raise ValueError(
                f"stream(s) {names} reply to learned tuples, but port {spec.get('name')} "
                "does not learn (no stream arrives there: set the forward stream's rx_port)"
            )
        live = LiveReplies(learner, live_streams, row)
    fl = spec.get("flows")
    verify = FlowVerify(fl["tx_streams"], fl["rx_streams"], row) if fl else None
    return PortFlows(GapTracker(rx_table), live, verify, learner, row)
