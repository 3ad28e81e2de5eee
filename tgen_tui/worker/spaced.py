"""The spaced send steps of a port (``pacing: qdisc`` and ``pacing: timer``, see
:mod:`tgen_tui.worker.pacing`); ``burst`` is :meth:`tgen_tui.worker.main.Port.tx_step`.

Both interleave a port's streams by due time, never stream after stream:

- qdisc: each turn builds every stream's frames due up to ``QDISC_LOOKAHEAD_NS`` ahead,
  merges them into one batch in due-time order (one numpy copy) and hands it to the
  kernel in one syscall; the port's TBF releases them at the port's frame rate, which
  follows the streams that are sending (a stream that has not started, has paused or
  has finished takes its rate out of the TBF);
- timer: frames are built ahead in small chunks and each one is released at its due
  time from the chunk (the stream with the earliest due frame goes first).

Imports: numpy and this package (DESIGN rule 2).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np

from tgen_tui.worker import counters as C
from tgen_tui.worker.pacing import (
    QDISC_LOOKAHEAD_NS,
    QDISC_STEADY_WAKE_NS,
    QDISC_TURN_FRAMES,
    QDISC_WAKE_NS,
    TIMER_COALESCE_NS,
    TIMER_TURN_MAX_NS,
    TIMER_TURN_NS,
    TIMER_YIELD_GAP_NS,
)
from tgen_tui.worker.protocol import LATE_NS
from tgen_tui.worker.txstamps import TAG_SEQ_BITS, TAG_SEQ_MASK, tags_at

if TYPE_CHECKING:
    from tgen_tui.worker.main import Port, TxStream

TIMER_CHUNK = 64  # frames built ahead per stream for timer pacing
_GRID = 1.01  # a shaped stream moves the TBF in steps of 1 % of its rate
TIMER_CHUNK_NS = 2_000_000  # ... at most the frames due in the next 2 ms
TIMER_CHUNK_COMPILED = 1024  # the same for the compiled loop: a chunk built is Python time in which
# frames fall late (then leave back to back), so fewer, longer chunks (256: 8 % of gamma gaps at
# 20 kpps under 5 us at the wire and a KS distance of 0.085; 1024 and 50 ms turns: 2.7 %, 0.028)
TIMER_CHUNK_COMPILED_NS = 50_000_000


def _due_now(st: TxStream, rel: float) -> int:
    due = st.due_count(rel)
    return due if st.total is None else min(due, st.total)


def sending_pps(port: Port, rel: float) -> float:
    """The port's frame rate now: the streams that have begun and are not done or paused."""
    pps = 0.0
    for st in port.streams:
        if st.done or st.paused or st.share <= 0 or st.t_base + st.dt.start_s > rel:
            continue  # not begun (a start offset), paused or finished: not in the TBF
        if st.dt.shape is None:
            pps += st.schedule.pps
            continue
        # a shape: its rate now, on a 1 % grid upwards, so a ramp changes the TBF at most
        # once per 1 % of rate (not at every step) and the TBF is never below the due rate
        r = st.dt.rate_at(rel - st.t_base)
        if r > 0:
            pps += _GRID ** math.ceil(math.log(r) / math.log(_GRID))
    return pps


def qdisc_horizon(port: Port) -> tuple[int, int]:
    """(lookahead, wake period) in ns: for a port of constant-rate streams a turn per
    about QDISC_TURN_FRAMES frames at the TBF's rate, looking two turns ahead; the short
    fixed horizon where a stream has a rate shape (see QDISC_TURN_FRAMES)."""
    if port.qdisc_steady is None or port.qdisc_steady[0] != len(port.streams):
        steady = all(st.dt.shape is None for st in port.streams)
        port.qdisc_steady = (len(port.streams), steady)
    if not port.qdisc_steady[1]:
        return QDISC_LOOKAHEAD_NS, QDISC_WAKE_NS
    pps = port.pacer.pps if port.pacer is not None else 0.0
    wake = QDISC_STEADY_WAKE_NS
    if pps > 0:
        wake = int(min(wake, max(QDISC_WAKE_NS, QDISC_TURN_FRAMES / pps * 1e9)))
    return 2 * wake, wake


def qdisc_step(port: Port, now_ns: int) -> tuple[int, bool]:
    """Send what is due up to the lookahead, merged by due time; (next wake, all done)."""
    look_ns, wake_ns = qdisc_horizon(port)
    rel = (now_ns - port.t0_ns) / 1e9
    rel_h = rel + look_ns / 1e9
    nxt = now_ns + QDISC_WAKE_NS * 100
    parts = []
    all_done = True
    live = [st for st in port.streams if not st.done]
    cap = max(1, port.tx.max_batch // max(1, len(live)))
    for st in live:
        all_done = False
        if st.paused:
            continue
        st.row[C.T_DUE] = st.due_prev + (_due_now(st, rel) - st.run_first)
        if st.next_due_s > rel_h:
            nxt = min(nxt, _wake(st, now_ns, port.t0_ns, look_ns, wake_ns))
            continue
        n = min(_due_now(st, rel_h) - st.sent, cap)
        if n > 0:
            buf, lens = st.builder.build(st.sent, n)
            due_s = st.t_base + st.dt.due(st.sent - st.idx_base, n)
            parts.append((st, buf, lens, due_s))
    for st in port.streams:  # handed to the TBF ahead of time: due keeps counting to the end
        if st.done and not st.paused and st.total is not None:
            st.row[C.T_DUE] = st.due_prev + (_due_now(st, rel) - st.run_first)
    if port.pacer is not None:  # installed at open; a change is a line to its tc child
        port.pacer.set_rate(_held_rate(port, sending_pps(port, rel_h), now_ns))
    if parts:
        last_s = max(float(p[3][-1]) for p in parts)
        port.qdisc_ahead_ns = max(port.qdisc_ahead_ns, port.t0_ns + int(last_s * 1e9))
        _send_merged(port, parts)
    for st in live:
        if st.total is not None and st.sent >= st.total:
            st.done = True  # its last frames are in the TBF: come back while it drains
            nxt = min(nxt, now_ns + wake_ns)
        elif not st.paused:
            st.next_due_s = st.t_base + st.dt.due_one(st.sent - st.idx_base)
            nxt = min(nxt, _wake(st, now_ns, port.t0_ns, look_ns, wake_ns))
    return nxt, all_done


def _held_rate(port: Port, want: float, now_ns: int) -> float:
    """The TBF's rate: a lower one waits until the frames already handed to the TBF are
    due. They were built for the old schedule (a lookahead of up to 100 ms): at the new,
    lower rate they would leave late, and a pause, set_rate and resume (the engine's
    contract test, 2,976 -> 1,000 pps) left 336 frames queued at the stop."""
    assert port.pacer is not None
    if want < port.pacer.pps and now_ns < port.qdisc_ahead_ns:
        return port.pacer.pps
    return want


def _wake(st: TxStream, now_ns: int, t0_ns: int, look_ns: int, wake_ns: int) -> int:
    """When the stream's next frame must go to the TBF: a lookahead before it is due,
    but not sooner than a wake period from now (frames collect into batches)."""
    due_ns = t0_ns + int(st.next_due_s * 1e9)
    return max(due_ns - look_ns, now_ns + wake_ns)


def _send_merged(port: Port, parts: list) -> None:
    """One syscall for the frames of several streams, in due-time order."""
    if len(parts) == 1:
        st, buf, lens, due_s = parts[0]
        port._send(st, buf, lens, port.t0_ns + int(due_s[0] * 1e9))
        return
    due = np.concatenate([p[3] for p in parts])
    owner = np.concatenate([np.full(len(p[2]), i, dtype=np.int64) for i, p in enumerate(parts)])
    order = np.argsort(due, kind="stable")
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))  # merged position of each part's rows, in part order
    width = max(p[1].shape[1] for p in parts)
    comb = np.zeros((len(order), width), dtype=np.uint8)
    lens = np.empty(len(order), dtype=np.uint32)
    tag_rows, tags, start = [], [], 0
    for st, b, ln, _d in parts:
        k = len(ln)
        at = pos[start : start + k]
        comb[at, : b.shape[1]] = b[:k]
        lens[at] = ln[:k]
        if st.stamp_every:
            rows = np.arange((-st.sent) % st.stamp_every, k, st.stamp_every)
            tag_rows.append(at[rows])
            tags.append(tags_at(st.sig, rows + st.sent))
        start += k
    send_ns = time.monotonic_ns()
    try:
        if tag_rows:
            r = np.concatenate(tag_rows)
            o = np.argsort(r)
            m = port.tx.send(comb, lens, np.concatenate(tags)[o], r[o])
        else:
            m = port.tx.send(comb, lens)
    finally:
        port.ctr[C.P_TX_ERRORS] = port.tx.errors
    taken = owner[order[:m]] if m > 0 else owner[:0]
    for i, (st, b, ln, d) in enumerate(parts):
        mi = int(np.count_nonzero(taken == i))
        if mi:
            if st.ref_every:
                port._record_refs(st, mi, send_ns)
            port._account(st, b, ln, mi, send_ns, port.t0_ns + int(d[0] * 1e9))


def _chunk(st: TxStream, first: int) -> tuple:
    """Build frames ``first ..`` of ``st`` ahead (timer pacing): about TIMER_CHUNK_NS of
    them at the stream's rate, 1 to TIMER_CHUNK (the stream's chunk_ns and chunk_max),
    with their due times. Due times come
    from one sequential walk of the schedule (a random law's cursor is never sent back):
    chunks are built in order, each starting where the last one ended."""
    n = int(max(1, min(st.chunk_max, st.max_batch, st.schedule.pps * st.chunk_ns / 1e9)))
    if st.total is not None:
        n = max(1, min(n, st.total - first))
    buf, lens = st.builder.build(first, n)
    # the builder hands back its own buffer, which its next build overwrites: a chunk kept
    # beside the one built ahead must own its frames (else frames went out twice, others never)
    return (first, buf.copy(), lens.copy(), st.t_base + st.dt.due(first - st.idx_base, n))


def _next_due(st: TxStream) -> float:
    """The due time (s) of frame ``st.sent``, from the chunk (the one built ahead while
    the pacer had time to spare, else built now)."""
    c = st.chunk
    if c is None or not (c[0] <= st.sent < c[0] + len(c[2])):
        a, st.ahead = st.ahead, None
        ok = a is not None and c is not None and a[0] <= st.sent < a[0] + len(a[2])
        st.chunk = c = a if ok else _chunk(st, st.sent)
    return float(c[3][st.sent - c[0]])


def _build_ahead(ready: list, slack_ns: int, margin_ns: int) -> None:
    """Before a sleep with time to spare (over two wake-up margins): build each stream's
    next chunk now, so that building it later does not delay a frame due soon after."""
    if slack_ns < 2 * margin_ns:
        return
    for st in ready:
        c = st.chunk
        if st.ahead is not None or c is None:
            continue
        first = c[0] + len(c[2])
        if st.total is None or first < st.total:
            st.ahead = _chunk(st, first)


def timer_step(port: Port, now_ns: int) -> tuple[int, bool]:
    """Release each frame at its due time (sleep to the port's measured wake-up margin
    before it, then spin); (next wake, done)."""
    end = now_ns + TIMER_TURN_NS
    # the compiled loop gives the turn back at a gap after ``end`` (in C), so here a turn
    # ends only at the hard limit: a batch it sent to the end (a chunk's end) goes on
    last = now_ns + TIMER_TURN_MAX_NS if port.cpace is not None else end
    t0 = port.t0_ns
    margin = port.wake_margin
    margin.woke(now_ns)
    while True:
        ready = [st for st in port.streams if not st.done and not st.paused]
        if not ready:
            return now_ns + QDISC_WAKE_NS * 100, all(st.done for st in port.streams)
        for st in ready:
            st.next_due_s = _next_due(st)
        st = min(ready, key=lambda s: s.next_due_s)
        due_ns = t0 + int(st.next_due_s * 1e9)
        now = time.monotonic_ns()
        if due_ns - now > margin.ns or now > last:
            _build_ahead(ready, due_ns - now, margin.ns)
            now = time.monotonic_ns()
            return margin.sleep_until(max(now, due_ns - margin.ns)), False
        if _release_compiled(port, ready, end, last):
            continue
        while now < due_ns:
            now = time.monotonic_ns()
        _release(port, st, now)


def _compiled_batch(port: Port, ready: list) -> tuple:
    """The frames the compiled loop may send now, merged by due time: each ready stream's
    rest of its chunk, up to the earliest chunk end (a stream whose chunk ends must be
    built again before frames due after it go). (buf, lens, due ns, owner, stamped, tags)."""
    parts = []
    for st in ready:
        first, buf, lens, due_s = st.chunk
        parts.append((st, st.sent - first, buf, lens, due_s))
    horizon = min(float(p[4][-1]) for p in parts)
    segs = []
    for j, (st, i, buf, lens, due_s) in enumerate(parts):
        n = int(np.searchsorted(due_s[i:], horizon, side="right"))
        segs.append((j, st, buf[i : i + n], lens[i : i + n], due_s[i : i + n]))
    if len(segs) == 1:
        j, st, buf, lens, due_s = segs[0]
        owner = np.zeros(len(lens), dtype=np.int64)
    else:
        due_s = np.concatenate([x[4] for x in segs])
        order = np.argsort(due_s, kind="stable")
        owner = np.concatenate([np.full(len(x[3]), x[0], dtype=np.int64) for x in segs])[order]
        due_s = due_s[order]
        width = max(x[2].shape[1] for x in segs)
        buf = np.zeros((len(order), width), dtype=np.uint8)
        lens = np.empty(len(order), dtype=np.uint32)
        for j, _st, b, ln, _d in segs:
            at = np.flatnonzero(owner == j)  # the stream's rows keep their order
            buf[at, : b.shape[1]] = b
            lens[at] = ln
    due = port.t0_ns + (due_s * 1e9).astype(np.int64)
    stamped = np.zeros(len(due), dtype=bool)
    tags = np.zeros(len(due), dtype=np.uint64)
    for j, st, *_ in segs:
        if st.stamp_every:
            at = np.flatnonzero(owner == j)
            seq = st.sent + np.arange(len(at), dtype=np.int64)
            on = seq % st.stamp_every == 0
            stamped[at[on]] = True
            tags[at[on]] = (st.sig << TAG_SEQ_BITS) | (seq[on] & TAG_SEQ_MASK)
    return buf, lens, due, owner, stamped, tags[stamped]


def _release_compiled(port: Port, ready: list, end_ns: int, last_ns: int) -> bool:
    """The ready streams' built frames, merged by due time, each released at its due time
    by the compiled loop (tgen_tui.worker.cpace) until the turn ends: a frame costs one
    syscall, so gaps of a few µs come out as drawn. False where it is not there (Python
    releases the next frame)."""
    lib, out = port.cpace, port.pace_out
    if lib is None or out is None or any(st.ref_every for st in ready):
        return False
    buf, lens, due, owner, stamped, tags = _compiled_batch(port, ready)
    n = len(due)
    out.grow(n)
    ends = (end_ns, TIMER_YIELD_GAP_NS, last_ns)
    k = port.tx.send_paced(lib, buf, lens, due, stamped if stamped.any() else None, tags,
                           port.wake_margin.ns, ends, out)  # fmt: skip
    woke = out.wake_late[: min(n, k + 1)]
    port.wake_margin.add(woke[woke >= 0])
    if k == 0:
        return False
    late_all = out.sent_ns[:k] - due[:k]
    ctr = port.ctr
    ctr[C.P_LATE_MAX_NS] = max(int(ctr[C.P_LATE_MAX_NS]), int(late_all.max()))
    now = time.monotonic_ns()
    for j, st in enumerate(ready):
        mine = np.flatnonzero(owner[:k] == j)
        if not len(mine):
            continue
        sent, c = out.sent_ns[mine], len(mine)
        n_late = int(np.count_nonzero(late_all[mine] > LATE_NS))
        if n_late:
            ctr[C.P_LATE_EVENTS] += n_late
            st.late += n_late
        if st.row[C.T_FIRST_TX_NS] == 0:
            st.row[C.T_FIRST_TX_NS] = int(sent[0])
        first, cbuf, clens, due_s = st.chunk
        i = st.sent - first
        last = int(sent[-1])
        port._account(st, cbuf[i : i + c], clens[i : i + c], c, last, last)
        behind = int(np.searchsorted(due_s[i + c :], (now - port.t0_ns) / 1e9, side="right"))
        st.row[C.T_DUE] = st.due_prev + (st.sent + behind - st.run_first)
        if st.total is not None and st.sent >= st.total:
            st.done = True
    return True


def _send_one(
    port: Port, st: TxStream, buf: np.ndarray, lens: np.ndarray, i: int, due_ns: int
) -> bool:
    """Row ``i`` of the chunk alone by sendmsg(2) (a sendmmsg port, no send-time
    reference): a sampled frame carries its timestamp request and tag, as in Port._send;
    a turn of the timer pacer is then about 3 µs of syscall instead of 8-16 (plus the
    batch path's bookkeeping), so frames due close together leave closer to their due
    times. False: use Port._send."""
    one = getattr(port.tx, "send_one", None)
    if one is None or st.ref_every:
        return False
    tag = None
    if st.stamp_every and st.sent % st.stamp_every == 0:  # a sampled frame: its tag
        tag = (st.sig << TAG_SEQ_BITS) | (st.sent & TAG_SEQ_MASK)
    send_ns = time.monotonic_ns()
    length = int(lens[i])
    if not one(buf.ctypes.data + i * buf.strides[0], length, tag):
        return False
    port._account(st, buf[i : i + 1], lens[i : i + 1], 1, send_ns, due_ns)
    return True


def _release(port: Port, st: TxStream, now: int) -> None:
    """Send the frames of ``st`` that are due by ``now`` (+ TIMER_COALESCE_NS) from its chunk."""
    first, buf, lens, due_s = st.chunk
    i = st.sent - first
    lim = (now + TIMER_COALESCE_NS - port.t0_ns) / 1e9
    j = i + max(1, int(np.searchsorted(due_s[i:], lim, side="right")))
    due_ns = port.t0_ns + int(due_s[i] * 1e9)
    if j - i > 1 or not _send_one(port, st, buf, lens, i, due_ns):
        port._send(st, buf[i:j], lens[i:j], due_ns)
    # frames due so far: those released, and those of the chunk already past due
    late = int(np.searchsorted(due_s[j:], (now - port.t0_ns) / 1e9, side="right"))
    st.row[C.T_DUE] = st.due_prev + (st.sent + late - st.run_first)
    if st.total is not None and st.sent >= st.total:
        st.done = True


__all__ = ["TIMER_CHUNK_COMPILED", "TIMER_CHUNK_COMPILED_NS", "qdisc_step", "timer_step",
           "sending_pps"]  # fmt: skip
