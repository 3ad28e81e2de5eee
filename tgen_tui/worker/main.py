"""The worker process: one core, its ports' tx and rx, paced, counting into shared memory.

See :mod:`tgen_tui.worker.protocol` for the command protocol. Imports: the standard
library, numpy, ``tgen_tui.packets.{program,batch,schedule}`` and this package.
"""

from __future__ import annotations

import dataclasses
import os
import select
import sys
import time

import numpy as np

from tgen_tui.packets.program import SIG_MAGIC, VLAN_TAG_LEN, StreamProgram, program_from_dict
from tgen_tui.packets.schedule import DueTimes
from tgen_tui.worker import counters as C
from tgen_tui.worker import cpace
from tgen_tui.worker import fanout as lanes
from tgen_tui.worker import protocol as P
from tgen_tui.worker.cpace import PaceOut
from tgen_tui.worker.learn import Learner
from tgen_tui.worker.learn import from_spec as learner_from_spec
from tgen_tui.worker.liveflow import PortFlows
from tgen_tui.worker.liveflow import attach as attach_flows
from tgen_tui.worker.netns import netns
from tgen_tui.worker.pacing import (
    QDISC_DRAIN_MAX_NS,
    QDISC_KEEP_DRAIN,
    QDISC_KEEP_MIN,
    QDISC_WAKE_NS,
    TRIM_EVERY_NS,
    QdiscPacer,
    WakeMargin,
    remove_tbf,
)
from tgen_tui.worker.process import run_worker
from tgen_tui.worker.protocol import EXIT_OK, LATE_NS, MIN_WAKE_NS
from tgen_tui.worker.replayrx import ReplayRx, interface_mtu, replay_receiver
from tgen_tui.worker.responder import PortResponder, receive_all_multicast, with_macs
from tgen_tui.worker.rxring import RESPOND_RETIRE_MS, RxRing, mono_minus_real_ns
from tgen_tui.worker.rxstats import RxStats
from tgen_tui.worker.spaced import (
    TIMER_CHUNK,
    TIMER_CHUNK_COMPILED,
    TIMER_CHUNK_COMPILED_NS,
    TIMER_CHUNK_NS,
    qdisc_step,
    timer_step,
)
from tgen_tui.worker.txpath import DEFAULT_TX, open_tx
from tgen_tui.worker.txstamps import TAG_SEQ_BITS, TAG_SEQ_MASK, StampTable, sample_every, tags_at

XDP_PACED_CALL = 64  # frames per call of a paced tx_path xdp stream (a quarter of a veth XDP ring)
XDP_FLAT_OUT_PPS = 1e6  # from this rate on, whole max_batch calls
MAX_TURN_BATCHES = 8  # batches per stream per loop turn before rx and commands get a look
STATS_EVERY_NS = 100_000_000  # PACKET_STATISTICS read interval
MAX_SLEEP_NS = 100_000_000  # heartbeat at least every 100 ms
RESOLVE_EVERY_NS = 1_000_000  # waiting frames look for their kernel tx stamp again after 1 ms


class WorkerError(Exception):
    pass


# ---------------------------------------------------------------------- tx streams
class TxStream:
    """One stream's pacer: frame i is due at t0 + t_base + due(i - idx_base)."""

    def __init__(
        self, prog: StreamProgram, row: np.ndarray, port_idx: int, max_batch: int, lane=None
    ):
        from tgen_tui.packets.lanes import lane_schedule, make_builder  # numpy-only

        self.prog = prog
        self.index = prog.index
        # a lane (tgen_tui.packets.lanes): its share of the frames, rate and sequence space
        self.lanes = lane.lanes if lane is not None else 1
        self.sig = lane.sig_index(prog.index) if lane is not None else prog.index
        self.row = row  # counter row (TX_STRIDE)
        self.xdp_slot = -1  # tx_path xdp: the stream's slot in the kernel sender
        self.xdp_lens: np.ndarray | None = None
        self.xdp_call = max_batch  # frames per BPF_PROG_RUN (see Port._open_xdp)
        self.xdp_batch = 0  # frames the kernel makes per flush (0: its 64)
        self.builder = make_builder(prog, lane, max_batch)
        self.max_batch = max_batch
        self.chunk_max = TIMER_CHUNK  # pacing timer: frames built ahead at most ...
        self.chunk_ns = TIMER_CHUNK_NS  # ... and the time they cover (larger when compiled)
        self.row[C.T_STREAM] = prog.index
        self.row[C.T_PORT] = port_idx
        split = getattr(self.builder, "split", None)  # the lane's flow split (LaneBuilder)
        self.share = split.share if split is not None else 1.0 / self.lanes  # of the rate
        self.schedule = prog.schedule if lane is None else lane_schedule(prog.schedule, lane, split)
        self.paused = False
        self.stamp_every = 0  # the kernel stamps frames with seq % stamp_every == 0 (0: none)
        self.ref_every = 0  # else: user-space send times of those frames, for the range
        self.sent = 0  # frames sent since configure or the last clear = the next sequence number
        self.run_first = 0  # ``sent`` when the current run began (due counts from it)
        self.due_prev = 0  # T_DUE at the start of the current run (the counter is monotonic)
        self.begin()
        for k in (1, min(64, max_batch)):  # warm up: the first numpy calls are slow
            self.builder.build(0, k)

    def begin(self) -> None:
        """A (re)start: the schedule runs again from the port's new t0, but the sequence
        numbers go on from where they stopped, so the receiver's window stays valid
        (DESIGN: a restart never creates phantom loss)."""
        self.dt = self._due_times(self.schedule)
        self.chunk = None  # timer pacing: frames built ahead (worker.spaced)
        self.ahead = None  # ... and the chunk after it, built while the pacer had time
        self.idx_base = self.sent
        self.run_first = self.sent
        self.due_prev = int(self.row[C.T_DUE])
        self.t_base = 0.0
        t = self.dt.total()
        self.total = None if t is None else self.sent + t
        self.done = t == 0
        self.next_due_s = self.dt.due_one(0)
        self.late = 0
        self.row[C.T_REQ_MPPS] = (
            0 if self.paused or self.share <= 0 else round(self.schedule.pps * 1000)
        )
        self.row[C.T_FIRST_TX_NS] = 0
        self.row[C.T_LAST_TX_NS] = 0

    def _due_times(self, schedule):
        """The schedule's due times; a replayed capture's builder gives its own (the
        recorded pace: tgen_tui.packets.replaybuild)."""
        own = getattr(self.builder, "due_times", None)
        return own(schedule) if own is not None else DueTimes(schedule)

    def clear_sequence(self) -> None:
        """Sequence numbers start from 0 again (with the receiver's clear; port not sending)."""
        self.sent = 0
        self.begin()

    def due_count(self, rel_s: float) -> int:
        if self.paused:
            return self.sent
        n = self.idx_base + self.dt.count_until(rel_s - self.t_base)
        if self.dt.shape is not None and self.share > 0:  # the shape's rate now is the ask
            self.row[C.T_REQ_MPPS] = round(self.dt.rate_at(rel_s - self.t_base) * 1000)
        return n

    def set_paused(self, paused: bool, rel_s: float) -> None:
        """Pause (nothing more becomes due) or resume (re-based at the current frame/time)."""
        if paused:
            self.paused = True
            self.row[C.T_REQ_MPPS] = 0
        elif self.paused:
            self.paused = False
            self.set_rate(self.schedule.pps, rel_s)

    def set_rate(self, pps: float, rel_s: float) -> None:
        if pps <= 0:
            self.set_paused(True, rel_s)
            return
        s = self.schedule
        self.schedule = dataclasses.replace(s, pps=float(pps))  # a restart keeps the new rate
        remaining = None if s.count is None else max(0, s.count - self.sent)
        if self.sent == 0 and rel_s < s.start_s:
            new = dataclasses.replace(self.dt.schedule, pps=float(pps))
            self.dt, self.idx_base, self.t_base = self._due_times(new), 0, 0.0
        else:
            stop = None if s.stop_s is None else s.stop_s - rel_s
            new = dataclasses.replace(
                self.dt.schedule,
                pps=float(pps),
                start_s=0.0,
                count=remaining,
                stop_s=stop,
                shape_phase_s=self.dt.shape_phase(rel_s - self.t_base),  # the shape goes on
            )
            if stop is not None and stop <= 0:
                new = dataclasses.replace(new, count=0, stop_s=None)
            self.dt, self.idx_base, self.t_base = self._due_times(new), self.sent, rel_s
        self.chunk = self.ahead = None
        t = self.dt.total()
        self.total = None if t is None else self.idx_base + t
        self.done = self.total is not None and self.sent >= self.total
        self.next_due_s = self.t_base + self.dt.due_one(self.sent - self.idx_base)
        self.row[C.T_REQ_MPPS] = 0 if self.paused or self.share <= 0 else round(pps * 1000)


# ---------------------------------------------------------------------- ports
class Port:
    def __init__(self, w: Worker, idx: int, spec: dict):
        self.w = w
        self.idx = idx
        self.name = str(spec["name"])
        self.interface = str(spec["interface"])
        self.netns = spec.get("netns") or None
        self.spec = spec
        self.ctr = w.cv.ports[idx]
        self.state = C.STATE_IDLE
        self.t0_ns = 0
        self.drain_until = 0
        self.stop_ns = 0
        self.rx: RxRing | None = None
        self.rxstats: RxStats | None = None
        self.learn: Learner | None = None  # RFC 9693 Responder: tuples learned on rx
        self.replay_rx: ReplayRx | None = None  # replayed captures' unsigned frames, by flow
        self.flows: PortFlows | None = None  # live replies, flow verification, rx gaps
        self.tx = None
        self.streams: list[TxStream] = []
        self.tx_done_sent = False
        self.qdisc_done_ns = 0  # when the last frame went to the TBF (0: not yet)
        self.last_stats_ns = 0
        self.stop_ids: list = []
        self.stamping = False  # this port's sender has kernel tx timestamps on
        self.resolve_at_ns = 0  # next look at received frames still waiting for their stamp
        self.responder: PortResponder | None = None  # ARP/ND/echo (issue 19)
        self.pacing = str(spec.get("pacing") or "burst")  # qdisc | timer | burst (worker.pacing)
        self.pacer: QdiscPacer | None = None  # pacing qdisc: the TBF on this port
        self.qdisc_steady: tuple[int, bool] | None = None  # (streams, all constant-rate)
        self.qdisc_ahead_ns = 0  # the due time of the last frame handed to the TBF
        self.min_wake_ns = MIN_WAKE_NS if self.pacing == "burst" else 0
        self.wake_margin = WakeMargin()  # pacing timer: how early to wake (measured)
        self.cpace = None  # pacing timer on sendmmsg: the compiled per-frame loop (cpace)
        self.pace_out: PaceOut | None = None

    def open(self, tx_rows: list[np.ndarray], rx_table: int | None, ring_opts: dict) -> None:
        progs = [program_from_dict(d) for d in self.spec.get("tx_streams", [])]
        l3 = self.spec.get("l3") or {}
        progs = with_macs(progs, l3)
        max_batch = int(self.spec.get("max_batch", 1024))
        with netns(self.netns):
            if rx_table is not None:
                self.learn = learner_from_spec(self.spec.get("learn"))
                hdrs = self.learn is not None or bool(self.spec.get("flows"))
                opts = dict(ring_opts)
                if l3.get("respond"):  # ARP/ND replies leave from the ring's turn
                    opts.setdefault("retire_ms", RESPOND_RETIRE_MS)
                self.rx = RxRing(
                    self.interface, headers=hdrs, respond=bool(l3.get("respond")), **opts
                )
                if l3.get("respond"):
                    receive_all_multicast(self.rx.sock, self.interface)
                    self.responder = PortResponder(self.interface, l3["respond"], progs)
                    self.responder.announce()
                if self.spec.get("fanout") is not None:  # one of the port's lane workers
                    lanes.join_fanout(self.rx.sock, int(self.spec["fanout"]))
                self.rxstats = RxStats(
                    self.w.cv.rx[rx_table],
                    skew=self.spec.get("clock_skew_ns"),
                    stamps=self.w.stamps,
                )
                self.ctr[C.P_RX_TABLE] = rx_table
                self.replay_rx = replay_receiver(self.spec.get("rx_replays"))
                self.rx.replay_keys = self.replay_rx is not None
            if progs:
                kind = self.spec.get("tx_path", DEFAULT_TX)
                kw = {"max_batch": max_batch}
                if kind == "tx_ring":
                    kw["max_len"] = max(len(p.template) for p in progs)
                self.tx = lanes.open_lane_tx(open_tx, self.interface, kind, kw, self.spec)
                self._open_pacer(progs)
                if self.pacing == "timer" and hasattr(self.tx, "send_paced"):
                    self.cpace = cpace.load()
                    self.pace_out = PaceOut(TIMER_CHUNK) if self.cpace is not None else None
        lane = lanes.lane_from_spec(self.spec)
        for p, row in zip(progs, tx_rows, strict=True):
            self.streams.append(TxStream(p, row, self.idx, max_batch, lane))
            if self.cpace is not None:  # one call per chunk: fewer, longer chunks
                self.streams[-1].chunk_max = TIMER_CHUNK_COMPILED
                self.streams[-1].chunk_ns = TIMER_CHUNK_COMPILED_NS
        if self.tx is not None and self.tx.kind == "xdp":
            self._open_xdp(lane)
        self._check_replay_mtu()
        self._setup_stamps()
        rx_rows = self.w.cv.rx[rx_table] if rx_table is not None else None
        self.flows = attach_flows(
            self.spec, self.learn, self.streams, self.w.cv.flows[self.idx], rx_rows
        )

    def _open_xdp(self, lane) -> None:
        """tx_path xdp: each stream's field program into the kernel's sender; a probe
        frame that refuses, in one line, a receiving end that would drop every frame."""
        if lane is not None and lane.lanes > 1:
            raise WorkerError(f"port {self.name}: tx_path xdp sends with one lane per port")
        if self.pacing == "timer":
            raise WorkerError(
                f"port {self.name}: tx_path xdp paces by calls (pacing burst or auto): the "
                "kernel sends a call's frames back to back"
            )
        try:
            for st in self.streams:
                st.xdp_slot = self.tx.add_stream(st.prog)
                st.xdp_lens = np.full(st.max_batch, len(st.prog.template), dtype=np.int64)
                # a paced stream's catch-up after a stall comes in calls no longer than a
                # veth's XDP ring (the kernel may defer the receiver's NAPI to ksoftirqd for
                # a whole call): flat out, whole batches
                # and each frame flushed as it is made: its stamp then waits for no other
                # frame of the call (latency; tgen_tui.worker.xdplive.send_stream)
                if st.schedule.pps < XDP_FLAT_OUT_PPS:
                    st.xdp_call = min(st.max_batch, XDP_PACED_CALL)
                    st.xdp_batch = 1
            with netns(self.netns):
                self.tx.probe()
        except ValueError as e:
            raise WorkerError(f"port {self.name}: {e}") from None

    def _check_replay_mtu(self) -> None:
        """A replayed capture's largest IP packet against the interface's MTU (the
        profile's pcap.mtu is checked before the run; the interface's only here)."""
        replays = [st for st in self.streams if st.prog.replay is not None]
        if not replays:
            return
        with netns(self.netns):
            mtu = interface_mtu(self.interface)
        for st in replays:
            r = st.builder.r
            ip = r.layout.l3end - r.layout.l3off
            i = int(np.argmax(ip))
            if mtu and int(ip[i]) > mtu:
                raise WorkerError(
                    f"port {self.name}: stream {st.prog.name}: frame {int(r.frame_numbers[i])} "
                    f"of {st.prog.replay.file} is {int(ip[i])} B of IP, over the MTU of "
                    f"{self.interface} ({mtu} B): filter it out (pcap.filter) or raise the MTU"
                )

    def _open_pacer(self, progs: list[StreamProgram]) -> None:
        """pacing: qdisc: this port's TBF (made at the streams' rate, removed at close).
        Another pacing takes off a TBF of tgen's left by a worker that was killed."""
        if self.pacing != "qdisc":
            remove_tbf(self.interface)
            return
        if self.tx.kind in ("af_xdp", "xdp"):
            raise WorkerError(
                f"port {self.name}: pacing: qdisc needs a send path through the qdisc "
                f"(tx_path sendmmsg or tx_ring); {self.tx.kind} bypasses it"
            )
        self.pacer = QdiscPacer(self.interface, max(len(p.template) for p in progs))
        self.min_wake_ns = 0
        self.tx.retry_s = 0.0  # a full queue waits for the next turn: never spin on it
        self.tx.grow_sndbuf()  # room for the frames the TBF holds
        self._lags: list[float] = []
        self._trim_at = 0
        with netns(self.netns):  # at the streams' rate from the start (changes are cheap)
            self.pacer.set_rate(sum(p.schedule.pps for p in progs))

    def _follow(self, tags: np.ndarray, mono: np.ndarray, now_ns: int) -> None:
        """pacing: qdisc: the lag of the stamped frames behind their due times trims the
        TBF's rate (tgen_tui.worker.pacing.QdiscPacer.trim), every TRIM_EVERY_NS."""
        sig = (tags >> np.uint64(TAG_SEQ_BITS)).astype(np.int64)
        seq = (tags & np.uint64(TAG_SEQ_MASK)).astype(np.int64)
        for st in self.streams:
            k = (sig == st.sig) & (seq >= st.idx_base)
            if k.any():
                i = int(seq[k][-1])
                due = self.t0_ns + (st.t_base + st.dt.due_one(i - st.idx_base)) * 1e9
                self._lags.append((float(mono[k][-1]) - due) / 1e9)
        if now_ns >= self._trim_at and self._lags:
            self.pacer.trim(float(np.median(self._lags)))
            self._lags.clear()
            self._trim_at = now_ns + TRIM_EVERY_NS

    def _setup_stamps(self) -> None:
        """Kernel transmit timestamps on a sample of every stream's frames (sendmmsg only;
        see tgen_tui.worker.txstamps). The port spec's ``tx_stamps``: true (default: K
        from each stream's rate), false (signature stamps only) or a power of two K."""
        table = self.w.stamps
        want = self.spec.get("tx_stamps", True)
        on = (
            table is not None
            and self.tx is not None
            and self.tx.kind == "sendmmsg"
            and want is not False
        )
        if on:
            self.tx.enable_tx_timestamps(every=1)
            self.stamping = True
        forced = int(want) if not isinstance(want, bool) else 0
        for st in self.streams:
            k = forced or sample_every(st.schedule.pps)
            st.stamp_every = k if on else 0
            # without kernel stamps the table still gets the 64-bit send time of every
            # K-th frame: the receiver widens the 32-bit signature stamps with it
            st.ref_every = 0 if on or table is None else k
            if table is not None and st.sig < table.n_streams:
                table.begin_stream(st.sig, k if on else -k)

    def publish_gaps(self) -> None:
        """Tell the receivers the mean gap each stream now asks for (the stamp table's
        gap_ns; 0 while paused): they measure the spacing against it."""
        if self.w.stamps is None:
            return
        for st in self.streams:
            pps = st.schedule.pps if not st.paused and st.share > 0 else 0.0
            if st.schedule.shape:  # the asked gap changes with the shape: none to hold to
                pps = 0.0
            self.w.stamps.set_gap(st.sig, int(round(1e9 / pps)) if pps > 0 else 0)

    def _record_refs(self, st: TxStream, m: int, send_ns: int) -> None:
        """User-space send times of the sampled frames of a batch just sent (see ref_every)."""
        rows = np.arange((-st.sent) % st.ref_every, m, st.ref_every)
        if len(rows):
            times = np.full(len(rows), send_ns, dtype=np.int64)
            self.w.stamps.record(tags_at(st.sig, rows + st.sent), times)

    def stamp_step(self, now_ns: int) -> None:
        """Move the kernel's transmit timestamps into the shared table; resolve received
        frames that were waiting for theirs."""
        if self.stamping:
            tags, real_ns = self.tx.read_tx_timestamps()
            if len(tags):
                mono = real_ns + mono_minus_real_ns()
                self.w.stamps.record(tags, mono)
                if self.pacer is not None and self.state == C.STATE_RUNNING:
                    self._follow(tags, mono, now_ns)
        if self.rxstats is not None and self.rxstats.pending and now_ns >= self.resolve_at_ns:
            self.rxstats.resolve_pending(now_ns)  # a sort of the waiting frames: not every turn
            self.resolve_at_ns = now_ns + RESOLVE_EVERY_NS

    # -------------------------------------------------------------- tx
    def _send(self, st: TxStream, buf: np.ndarray, lens: np.ndarray, first_due_ns: int) -> int:
        """Hand ``len(lens)`` built frames of ``st`` (from sequence ``st.sent``) to the kernel
        and account what it took: counters, lateness, kernel stamps; the frames sent."""
        n = len(lens)
        send_ns = time.monotonic_ns()
        try:
            if st.stamp_every:
                rows = np.arange((-st.sent) % st.stamp_every, n, st.stamp_every)
                m = self.tx.send(buf, lens, tags_at(st.sig, rows + st.sent), rows)
            else:
                m = self.tx.send(buf, lens)
                if st.ref_every and m > 0:
                    self._record_refs(st, m, send_ns)
        finally:
            self.ctr[C.P_TX_ERRORS] = self.tx.errors
        if m > 0:
            self._account(st, buf, lens, m, send_ns, first_due_ns)
        return m

    def _send_xdp(self, st: TxStream, n: int, first_due_ns: int) -> int:
        """tx_path xdp: one BPF_PROG_RUN makes and sends ``n`` frames of ``st`` in the
        kernel (tgen_tui.worker.xdplive); the frames it produced are accounted like a
        batch (the ones the kernel then dropped show in the interface's tx_dropped)."""
        send_ns = time.monotonic_ns()
        try:
            m = self.tx.send_stream(st.xdp_slot, st.sent, n, st.xdp_batch)
        finally:
            self.ctr[C.P_TX_ERRORS] = self.tx.errors
        if m > 0:
            if st.ref_every:
                self._record_refs(st, m, send_ns)
            buf = None
            if self.flows is not None and self.flows.verify is not None:
                buf = st.builder.build(st.sent, m)[0]  # the same bytes, for the flow check
            self._account(st, buf, st.xdp_lens, m, send_ns, first_due_ns)
        return m

    def _account(
        self, st: TxStream, buf: np.ndarray | None, lens: np.ndarray, m: int, send_ns: int,
        first_due_ns: int,
    ) -> None:  # fmt: skip
        """Count ``m`` frames of ``st`` the kernel took at ``send_ns`` (the first due at
        ``first_due_ns``): stream and port counters, lateness, the live-flow check."""
        ctr = self.ctr
        late = send_ns - first_due_ns
        if late > LATE_NS:
            ctr[C.P_LATE_EVENTS] += 1
            st.late += 1
        if late > ctr[C.P_LATE_MAX_NS]:
            ctr[C.P_LATE_MAX_NS] = late
        nb = int(lens[:m].sum())
        if self.flows is not None:
            self.flows.on_tx(st.prog, buf, m, send_ns)
        st.sent += m
        st.row[C.T_TX_FRAMES] += m
        st.row[C.T_TX_BYTES] += nb
        if st.row[C.T_FIRST_TX_NS] == 0:
            st.row[C.T_FIRST_TX_NS] = send_ns
        st.row[C.T_LAST_TX_NS] = send_ns
        ctr[C.P_TX_FRAMES] += m
        ctr[C.P_TX_BYTES] += nb

    def tx_step(self, now_ns: int) -> int:
        """Send what is due; return the ns time of the next due frame (or far future)."""
        if self.pacing == "burst":
            return self.burst_step(now_ns)
        t0 = time.perf_counter_ns()
        step = qdisc_step if self.pacing == "qdisc" else timer_step
        nxt, all_done = step(self, now_ns)
        if all_done and self.pacer is not None and not self._queue_empty(now_ns):
            all_done = False  # tx done means on the wire: the TBF still holds frames
            nxt = min(nxt, now_ns + QDISC_WAKE_NS)
        elif not all_done:
            self.qdisc_done_ns = 0
        self._tx_tail(all_done, t0)
        return nxt

    def _queue_empty(self, now_ns: int) -> bool:
        """pacing: qdisc: whether the TBF has released every frame handed to it (the
        socket's SIOCOUTQ), or QDISC_DRAIN_MAX_NS have passed since the last was handed
        (a port whose link went down keeps its queue: the trial's timeout still ends)."""
        if self.tx_done_sent:
            return True
        if not self.qdisc_done_ns:
            self.qdisc_done_ns = now_ns
        return self.tx.outq() == 0 or now_ns - self.qdisc_done_ns > QDISC_DRAIN_MAX_NS

    def _tx_tail(self, all_done: bool, t0: int) -> None:
        """After a send step: the port's due count, tx_done once, the busy time."""
        self.ctr[C.P_TX_DUE] = sum(int(s.row[C.T_DUE]) for s in self.streams)
        if all_done and not self.tx_done_sent and self.streams:
            self.tx_done_sent = True
            self.w.emit(P.TxDone(port=self.name))
        self.ctr[C.P_BUSY_NS] += time.perf_counter_ns() - t0

    def burst_step(self, now_ns: int) -> int:
        """pacing: burst: every due frame of every stream now, stream after stream, in
        batches of max_batch (the peak rate)."""
        t0 = time.perf_counter_ns()
        rel = (now_ns - self.t0_ns) / 1e9
        nxt = now_ns + MAX_SLEEP_NS
        all_done = True
        for st in self.streams:
            if st.done:
                continue
            all_done = False
            if st.paused:
                continue
            if st.next_due_s > rel:
                nxt = min(nxt, self.t0_ns + int(st.next_due_s * 1e9))
                continue
            due = st.due_count(rel)
            if st.total is not None:
                due = min(due, st.total)
            st.row[C.T_DUE] = st.due_prev + (due - st.run_first)
            k = 0
            while st.sent < due and k < MAX_TURN_BATCHES:
                n = min(due - st.sent, st.max_batch if st.xdp_slot < 0 else st.xdp_call)
                first_due_ns = self.t0_ns + int(
                    (st.t_base + st.dt.due_one(st.sent - st.idx_base)) * 1e9
                )
                # the builder stamps the signature after the fields are built, just before
                # the checksums (a few µs before sendmmsg): latency can be over-estimated by
                # those µs, never under-estimated (a predicted send time made some negative)
                if self.tx.kind == "xdp":
                    if self._send_xdp(st, n, first_due_ns) <= 0:
                        break
                    k += 1
                    continue
                buf, lens = st.builder.build(st.sent, n)
                if self._send(st, buf, lens, first_due_ns) <= 0:
                    break  # the kernel is full: try again next turn
                k += 1
            if st.total is not None and st.sent >= st.total:
                st.done = True
                continue
            if st.sent < due:
                nxt = now_ns  # backlog: come straight back
            else:
                st.next_due_s = st.t_base + st.dt.due_one(st.sent - st.idx_base)
                nxt = min(nxt, self.t0_ns + int(st.next_due_s * 1e9))
        self._tx_tail(all_done, t0)
        return nxt

    # -------------------------------------------------------------- rx
    def rx_step(self, now_ns: int, force_stats: bool = False) -> None:
        if self.rx is None:
            return
        t0 = time.perf_counter_ns()
        b = self.rx.poll()
        if self.rx.ctl and self.responder is not None:
            self.responder.serve(self.rx.ctl)
        if len(b):
            ctr = self.ctr
            # the port's count first: a reader copying the block between the two writes
            # never sees a stream with more frames than its port
            ctr[C.P_RX_FRAMES] += len(b)
            ctr[C.P_RX_BYTES] += int(b.length.sum()) + VLAN_TAG_LEN * int(
                np.count_nonzero(b.vlan >= 0)
            )
            good, other = self.rxstats.add(b)
            if self.replay_rx is not None:
                other -= self._count_replayed(b)
            if self.learn is not None:
                self.learn.add(b, now_ns)
            if other:
                ctr[C.P_RX_OTHER] += other
        if self.flows is not None:
            self.flows.on_rx(b, now_ns, (now_ns - self.t0_ns) / 1e9)
        if force_stats or now_ns - self.last_stats_ns > STATS_EVERY_NS:
            pk, dr = self.rx.kernel_stats()
            self.ctr[C.P_RX_KERNEL_PACKETS] = pk
            self.ctr[C.P_RING_DROPS] = dr
            self.last_stats_ns = now_ns
        self.ctr[C.P_BUSY_NS] += time.perf_counter_ns() - t0

    def _count_replayed(self, b) -> int:
        """Unsigned frames of replayed streams, by flow, into their rx rows; how many."""
        assert self.replay_rx is not None and self.rxstats is not None
        if b.rkey is None:
            return 0
        signed = (b.magic == SIG_MAGIC) & (b.stream < self.rxstats.n_streams)
        sig_stream = np.where(signed, b.stream.astype(np.int64), -1)
        hit, streams, plain = self.replay_rx.match(b.rkey, sig_stream)
        rows = hit[plain]
        self.rxstats.count_plain(streams[plain], b.rx_ns[rows], b.vlan[rows], b.length[rows])
        return len(rows)

    # -------------------------------------------------------------- control
    def start(self, t0_ns: int, end_ns: int | None = None) -> None:
        """Send from ``t0_ns``; with ``end_ns`` (a run's planned end) each stream's total
        becomes at most the frames due before it (1 s at 40 kfps: 40,000, the one due at
        the end itself not included)."""
        if self.state in (C.STATE_RUNNING, C.STATE_DRAINING):
            raise WorkerError(f"port {self.name} is already running")
        self.t0_ns = int(t0_ns)
        for st in self.streams:
            st.begin()
            if end_ns is not None and not st.paused:
                last = st.due_count((int(end_ns) - self.t0_ns - 1) / 1e9)
                st.total = last if st.total is None else min(st.total, last)
                st.done = st.sent >= st.total
        self.tx_done_sent = False
        self.publish_gaps()
        if self.responder is not None:
            self.responder.announce()
        self.ctr[C.P_STARTED_NS] = self.t0_ns
        self.state = C.STATE_RUNNING
        self.ctr[C.P_STATE] = self.state

    def stop(self, drain_ms: float, now_ns: int) -> None:
        if self.state != C.STATE_RUNNING:
            self.stop_ns = self.stop_ns or now_ns
        else:
            self.stop_ns = now_ns
            if self.pacer is not None:
                self._stop_pacer(drain_ms)
        self.state = C.STATE_DRAINING
        self.ctr[C.P_STATE] = self.state
        self.drain_until = now_ns + int(drain_ms * 1e6)

    def _stop_pacer(self, drain_ms: float) -> None:
        """At a stop: a TBF queue that it could not release within the drain (a worker
        that stalled handed its frames late) would reach the receivers after they stop
        counting, and be charged to the DUT as lost. It is dropped instead, and counted as
        this port's frames not put on the wire; a shorter queue leaves at its pace."""
        assert self.pacer is not None
        pps = self.pacer.pps
        if pps <= 0:
            return
        with netns(self.netns):
            held = self.pacer.backlog()
            if held > max(QDISC_KEEP_MIN, pps * QDISC_KEEP_DRAIN * drain_ms / 1000):
                self.pacer.drop_queue()
                self.w.error(
                    f"port {self.name}: the pacing qdisc held {held:,} frames "
                    f"({1000 * held / pps:.0f} ms behind) at the stop: dropped, "
                    "counted as frames not put on the wire",
                    port=self.name,
                )

    def finish(self, now_ns: int, rid: str | int | None = None) -> P.Stopped:
        self.stamp_step(now_ns)
        self.rx_step(now_ns, force_stats=True)
        if self.rxstats is not None:
            self.rxstats.resolve_pending(now_ns, final=True)
        self.state = C.STATE_STOPPED
        self.ctr[C.P_STATE] = self.state
        streams = []
        for st in self.streams:
            due = int(st.row[C.T_DUE]) - st.due_prev
            streams.append(
                {
                    "stream": st.index,
                    "tx_frames": st.sent - st.run_first,
                    "due": due,
                    "requested_pps": int(st.row[C.T_REQ_MPPS]) / 1000.0,
                    "late_events": st.late,
                }
            )
        return P.Stopped(
            learned=self.learn.write() if self.learn is not None else None,
            flows=self._flow_report(),
            port=self.name,
            counters=dict(zip(C.PORT_FIELDS, map(int, self.ctr), strict=True)),
            streams=streams,
            id=rid,
        )

    def _flow_report(self) -> dict | None:
        """The live-flow report, and the replayed captures' frames received per flow."""
        rep = self.flows.report() if self.flows is not None else None
        if self.replay_rx is not None:
            rep = dict(rep or {}, replay=self.replay_rx.report())
        return rep

    def close(self) -> None:
        if self.pacer is not None:
            with netns(self.netns):
                self.pacer.remove()
        if self.responder is not None:
            self.responder.close()
        if self.tx is not None:
            with netns(self.netns):  # tx_path xdp removes its idle veth there
                self.tx.close()
        if self.rx is not None:
            self.rx.close()


# ---------------------------------------------------------------------- the worker
class Worker:
    def __init__(self, core: int | None = None, stdin_fd: int = 0, stdout_fd: int = 1):
        self.core = core
        self.in_fd = stdin_fd
        self.out_fd = stdout_fd
        self.cv: C.CounterView | None = None
        self.stamps: StampTable | None = None
        self.ports: list[Port] = []
        self.by_name: dict[str, Port] = {}
        self.by_stream: dict[int, TxStream] = {}
        self.lane_block = 0  # lanes: the stride of a stream's rx rows (0: one row each)
        self.quit = False
        self._inbuf = b""
        self._poll = select.poll()
        self._poll.register(self.in_fd, select.POLLIN)
        self.pending_stop_ids: dict[str, str | int] = {}

    def emit(self, msg: P.Event) -> None:
        data = P.encode(msg)
        while data:
            n = os.write(self.out_fd, data)
            data = data[n:]

    def error(self, message: str, fatal: bool = False, **kw) -> None:
        self.emit(P.Error(message=message, fatal=fatal, **kw))

    # -------------------------------------------------------------- commands
    def _ports(self, names: list[str] | None) -> list[Port]:
        if names is None:
            return list(self.ports)
        out = []
        for n in names:
            if n not in self.by_name:
                raise WorkerError(f"unknown port {n!r}")
            out.append(self.by_name[n])
        return out

    def _stream(self, s: int) -> tuple[TxStream, float]:
        """The tx stream with global index ``s`` and the seconds since its port's t0."""
        st = self.by_stream.get(int(s))
        if st is None:
            raise WorkerError(f"stream {s} is not sent by this worker")
        port = self.ports[int(st.row[C.T_PORT])]
        now = time.monotonic_ns()
        rel = (now - port.t0_ns) / 1e9 if port.state == C.STATE_RUNNING else 0.0
        return st, rel

    def handle(self, msg: P.Command) -> None:
        rid = msg.id
        now = time.monotonic_ns()
        if not isinstance(msg, P.Configure | P.Ping | P.Quit):
            self._need_config()
        if isinstance(msg, P.Configure):
            self.configure(msg)
            self.emit(
                P.Ready(
                    shm=self.cv.path,
                    ports=[p.name for p in self.ports],
                    tx=[
                        {"port": p.name, "stream": st.index, "row": self._row_of[id(st)]}
                        for p in self.ports
                        for st in p.streams
                    ],
                    rx_tables={p.name: int(p.ctr[C.P_RX_TABLE]) for p in self.ports if p.rx},
                    window={p.name: p.rxstats.window for p in self.ports if p.rxstats},
                    tx_path={p.name: p.tx.kind for p in self.ports if p.tx is not None},
                    pacing={p.name: p.pacing for p in self.ports if p.tx is not None},
                    id=rid,
                )
            )
        elif isinstance(msg, P.Start):
            ps = self._ports(msg.ports)
            t0 = int(msg.t0_ns or now)
            for p in ps:
                p.start(t0, msg.end_ns)
            self.emit(P.Started(ports=[p.name for p in ps], t0_ns=t0, id=rid))
        elif isinstance(msg, P.Stop):
            for p in self._ports(msg.ports):
                p.stop(float(msg.drain_ms), now)
                if rid is not None:
                    self.pending_stop_ids[p.name] = rid
        elif isinstance(msg, P.SetRate):
            st, rel = self._stream(msg.stream)
            if st.share > 0:  # a lane without a flow of the stream has nothing to pace
                st.set_rate(float(msg.pps) * st.share, rel)
            self._resample(st)
            self.ports[int(st.row[C.T_PORT])].publish_gaps()
            self.emit(P.RateSet(stream=st.index, pps=float(msg.pps), id=rid))
        elif isinstance(msg, P.Pause | P.Resume):
            st, rel = self._stream(msg.stream)
            st.set_paused(isinstance(msg, P.Pause), rel)
            self.ports[int(st.row[C.T_PORT])].publish_gaps()
            self.emit(P.PausedEvent(stream=st.index, paused=st.paused, id=rid))
        elif isinstance(msg, P.Clear):
            self.emit(self.clear(msg, now))
        elif isinstance(msg, P.Ping):
            self.emit(P.Pong(t_ns=time.monotonic_ns(), id=rid))
        elif isinstance(msg, P.Quit):
            self.quit = True
            self.emit(P.Bye(id=rid))
        else:
            raise WorkerError(f"unsupported command {msg.KIND!r}")

    def _resample(self, st: TxStream) -> None:
        """A new rate gets its own sampling interval K (unless the port forced one), so a
        stream raised from 1 kfps to line rate is not stamped on every frame. Frames in
        flight under the old K may find no stamp: they count as unstamped, nothing worse."""
        port = self.ports[int(st.row[C.T_PORT])]
        forced = port.spec.get("tx_stamps", True)
        if self.stamps is None or not isinstance(forced, bool) or st.sig >= self.stamps.n_streams:
            return
        k = sample_every(st.schedule.pps)
        if st.stamp_every and k != st.stamp_every:
            st.stamp_every = k
            self.stamps.every[st.sig] = k
        elif st.ref_every and k != st.ref_every:
            st.ref_every = k
            self.stamps.every[st.sig] = -k

    def clear(self, msg: P.Clear, now: int) -> P.Cleared:
        """Reset receivers (and idle senders) of the selected streams together."""
        ps = self._ports(msg.ports)
        sel = None if msg.streams is None else [int(x) for x in msg.streams]
        for p in self.ports:
            if p.rxstats is not None and (sel is not None or p in ps):
                p.rx_step(now)  # account what arrived before the clear
                p.rxstats.clear(lanes.lane_rows(sel, self.lane_block, p.rxstats.n_streams))
                if p.flows is not None:
                    p.flows.gaps.reset()
        reset = []
        seq = {}
        for p in ps if sel is None else self.ports:
            for st in p.streams:
                if sel is not None and st.index not in sel:
                    continue
                # a sending stream keeps its sequence (frames in flight stay valid);
                # an idle or stopped one starts again from 0 with the receiver
                if p.state not in (C.STATE_RUNNING, C.STATE_DRAINING):
                    st.clear_sequence()
                    if self.stamps is not None and st.sig < self.stamps.n_streams:
                        self.stamps.seq1[st.sig] = 0  # old sequence numbers come again
                    reset.append(st.index)
                seq[str(st.index)] = [st.sent, int(st.row[C.T_TX_FRAMES])]
        return P.Cleared(
            ports=[p.name for p in ps], streams=sel, seq_reset=reset, seq=seq, id=msg.id
        )

    def _need_config(self) -> None:
        if self.cv is None:
            raise WorkerError("not configured")

    def configure(self, msg: P.Configure) -> None:
        if self.cv is not None:
            raise WorkerError("already configured")
        specs = msg.ports
        n_streams = int(msg.n_streams)
        lane = next((lanes.lane_from_spec(s) for s in msg.ports if s.get("lane")), None)
        self.lane_block = lane.block if lane is not None else 0  # rx rows per lane
        names = [str(s["name"]) for s in specs]
        if len(set(names)) != len(names):
            raise WorkerError("duplicate port names")
        n_tx = sum(len(s.get("tx_streams", [])) for s in specs)
        rx_specs = [s for s in specs if s.get("rx")]
        self.cv = C.CounterView.create(str(msg.shm), len(specs), n_tx, n_streams, len(rx_specs))
        # kernel tx times of sampled frames: shared with the other local workers (the
        # engine's file), else this worker's own (it sends and receives its streams)
        self.stamps = None
        if msg.stamps:
            try:
                self.stamps = StampTable.open(str(msg.stamps))
            except (OSError, ValueError) as e:  # not an error event: configure goes on
                print(f"tx timestamp table {msg.stamps}: {e}: a private one", file=sys.stderr)
        if self.stamps is None or self.stamps.n_streams < n_streams:
            self.stamps = StampTable.private(n_streams)
        ring_opts = dict(msg.rx_ring or {})
        row = 0
        k = 0
        self._row_of: dict[int, int] = {}
        try:
            for i, spec in enumerate(specs):
                p = Port(self, i, spec)
                nt = len(spec.get("tx_streams", []))
                rows = [self.cv.tx[row + j] for j in range(nt)]
                rx_table = None
                if spec.get("rx"):
                    rx_table = k
                    k += 1
                self.ports.append(p)  # closed below if its open (or a later one) fails
                p.open(rows, rx_table, ring_opts)
                for j, st in enumerate(p.streams):
                    if st.index >= n_streams:
                        raise WorkerError(f"stream index {st.index} >= n_streams {n_streams}")
                    if st.index in self.by_stream:
                        raise WorkerError(f"stream {st.index} configured twice")
                    self.by_stream[st.index] = st
                    self._row_of[id(st)] = row + j
                row += nt
                self.by_name[p.name] = p
        except BaseException:
            for p in self.ports:
                p.close()
            self.ports.clear()
            self.by_name.clear()
            self.by_stream.clear()
            raise
        for p in self.ports:
            if p.rx is not None:
                self._poll.register(p.rx.fd, select.POLLIN)

    # -------------------------------------------------------------- input
    def read_commands(self) -> None:
        try:
            data = os.read(self.in_fd, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            self.quit = True  # parent closed the pipe
            return
        self._inbuf += data
        while b"\n" in self._inbuf:
            line, self._inbuf = self._inbuf.split(b"\n", 1)
            if not line.strip():
                continue
            raw: dict = {}
            try:
                raw = P.decode(line)
                self.handle(P.decode_command(raw))
            except (WorkerError, ValueError, KeyError, TypeError, OSError) as e:
                cmd = raw.get("cmd") if isinstance(raw, dict) else None
                rid = raw.get("id") if isinstance(raw, dict) else None
                self.error(
                    f"{type(e).__name__}: {e}",
                    cmd=cmd if isinstance(cmd, str) else None,
                    id=rid if isinstance(rid, str | int) else None,
                )

    # -------------------------------------------------------------- the loop
    def run(self) -> int:
        os.set_blocking(self.in_fd, False)
        while not self.quit:
            now = time.monotonic_ns()
            wake = now + MAX_SLEEP_NS
            floor = MIN_WAKE_NS
            for p in self.ports:
                if p.state == C.STATE_RUNNING and p.streams and now >= p.t0_ns:
                    floor = min(floor, p.min_wake_ns)
                    try:
                        wake = min(wake, p.tx_step(now))
                    except OSError as e:
                        self.error(f"tx on {p.name} failed: {e}", port=p.name)
                        p.stop(0, now)
                elif p.state == C.STATE_RUNNING and p.streams:
                    wake = min(wake, p.t0_ns)
                p.stamp_step(now)
                p.rx_step(now)
                if p.state == C.STATE_DRAINING:
                    if now >= p.drain_until:
                        ev = p.finish(time.monotonic_ns(), self.pending_stop_ids.pop(p.name, None))
                        self.emit(ev)
                    else:
                        wake = min(wake, p.drain_until)
                p.ctr[C.P_HEARTBEAT_NS] = now
            if self.cv is not None:
                self.cv.header[C.H_HEARTBEAT_NS] = now
            # wait for the next deadline, a command, or a retired rx block
            now2 = time.monotonic_ns()
            if wake > now:
                # Not backlogged: sleep until the next due frame, but never start the next
                # turn sooner than MIN_WAKE_NS after this one started. A turn costs tens of
                # µs, so without this floor a stream faster than 1/turn would spin the core
                # sending 2-3 frames per syscall; with it, frames collect into batches.
                wake = max(wake, now + floor)
            if wake > now2:
                wait = wake - now2
                ms = wait // 1_000_000
                if ms >= 1:
                    ready = self._poll.poll(ms)
                else:
                    ready = self._poll.poll(0)
                    if not ready:
                        time.sleep(wait / 1e9)
            else:
                ready = self._poll.poll(0)
            for fd, _ev in ready:
                if fd == self.in_fd:
                    self.read_commands()
        for p in self.ports:
            p.close()
        return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_worker(
        "python -m tgen_tui.worker", __doc__, lambda core: Worker(core=core), "worker", argv
    )
