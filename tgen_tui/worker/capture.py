"""The capture process: taps on one or more ports, filtered, into one pcapng file.

``python -m tgen_tui.worker.capture --parent-pid P`` reads one JSON line of
configuration on stdin (:func:`run`), opens a :class:`~tgen_tui.worker.capring.CaptureRing`
per tap inside its port's namespace (the filter compiled there by libpcap on a live
handle), writes a Section Header Block and one Interface Description Block per port and
direction, and then, batch by batch, Enhanced Packet Blocks with the kernel's
nanosecond stamp, the direction flag and a comment naming the stream, sequence number
and lane (from the signature at the frame's end; "other" for frames without one).

Bounds, each counted and reported, never silent: the kernel ring (``ring_mb``; what it
could not hold is "ring full"), a frame budget per second (``budget_pps``, the rest is
"over budget"), a frame count and a duration (then it stops by itself), a snap length.

Lost mode (``lost: true``): the tx copies of signed frames go to a spool file with an
index of (stream, seq) → block; the rx side keeps only its (stream, seq) keys; at the
stop, the spool's blocks whose key never came back are copied (vectorised) into the
output: exactly the frames that went missing, byte for byte as sent.

On stdout, one JSON line each: ``ready`` (the interfaces), ``status`` every 250 ms
(counts and the last few frames, for the console), ``done`` (why it stopped, the
counts). ``{"cmd": "stop"}`` on stdin, or its end, stops it. Runs niced (the workers
come first; what it then misses, the ring counts). Imports: stdlib and numpy.
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from tgen_tui.packets.bpf import FilterError, compile_filter
from tgen_tui.packets.pcapng import (
    FLAG_INBOUND,
    FLAG_OUTBOUND,
    epb_lengths,
    interface_block,
    packet_blocks,
    ragged_copy,
    section_header,
)
from tgen_tui.worker.capring import CapBatch, CaptureRing, concat
from tgen_tui.worker.kernel import arm_parent_death
from tgen_tui.worker.netns import netns

STATUS_S = 0.25
RECENT_BYTES = 512  # of each recent frame sent to the console


def emit(ev: dict) -> None:
    sys.stdout.write(json.dumps(ev, separators=(",", ":")) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------ comments
def _table(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    flat = np.frombuffer(b"".join(texts) or b"\0", dtype=np.uint8)
    lens = np.array([len(t) for t in texts], dtype=np.int64)
    return flat, np.cumsum(lens) - lens, lens


class Commenter:
    """Comments for a batch, vectorised: ``stream NAME seq N lane L`` or ``other``."""

    def __init__(self, names: list[str], block: int):
        self.block = max(1, int(block))
        self.names = list(names)
        self.prefix = _table([f"stream {n} seq ".encode() for n in names] + [b"stream ? seq "])
        self.other = b"other (no signature)"

    def __call__(self, b: CapBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        name_i = np.where(b.signed, b.stream % self.block, len(self.names))
        name_i = np.minimum(name_i, len(self.names))
        lane = np.where(b.signed, b.stream // self.block, 0)
        seq = np.where(b.signed, b.seq, 0)
        pflat, pat, plen = self.prefix
        p_len = plen[name_i]
        # decimal digits of seq (1..10) and of the lane (1..5)
        p10 = 10 ** np.arange(10, dtype=np.int64)
        s_digits = np.maximum(1, np.searchsorted(p10, seq, side="right"))
        l_digits = np.maximum(1, np.searchsorted(p10[:6], lane, side="right"))
        sd = (seq[:, None] // p10[::-1]) % 10 + 48
        ld = (lane[:, None] // p10[:5][::-1]) % 10 + 48
        lane_txt = np.frombuffer(b" lane ", dtype=np.uint8)
        c_len = np.where(b.signed, p_len + s_digits + 6 + l_digits, len(self.other))
        c_at = np.cumsum(c_len) - c_len
        out = np.zeros(int(c_len.sum()), dtype=np.uint8)
        s = np.flatnonzero(b.signed)
        if len(s):
            ragged_copy(out, c_at[s], pflat, pat[name_i[s]], p_len[s])
            pos = c_at[s] + p_len[s]
            flat_sd = sd.astype(np.uint8).ravel()
            ragged_copy(out, pos, flat_sd, s * 10 + 10 - s_digits[s], s_digits[s])
            pos = pos + s_digits[s]
            ragged_copy(out, pos, lane_txt, np.zeros(len(s), np.int64), np.full(len(s), 6))
            flat_ld = ld.astype(np.uint8).ravel()
            ragged_copy(out, pos + 6, flat_ld, s * 5 + 5 - l_digits[s], l_digits[s])
        o = np.flatnonzero(~b.signed)
        if len(o):
            oflat = np.frombuffer(self.other, dtype=np.uint8)
            ragged_copy(
                out, c_at[o], oflat, np.zeros(len(o), np.int64), np.full(len(o), len(self.other))
            )
        return out, c_at, c_len


# ------------------------------------------------------------------ taps
@dataclass
class Tap:
    port: str
    ring: CaptureRing
    if_rx: int | None  # interface block index of the port's rx / tx side (None: not shown)
    if_tx: int | None
    seen: int = 0  # frames the filter and the selectors passed
    kept: int = 0


@dataclass
class Counts:
    seen: int = 0
    kept: int = 0
    selected_out: int = 0  # passed the BPF filter, not the stream/other selector
    over_budget: int = 0
    over_count: int = 0
    ring_drops: int = 0
    bytes: int = 0
    window_s: int = -1
    window_kept: int = 0
    per_port: dict = field(default_factory=dict)


class Capture:
    """One capture run (see the module docstring for the configuration)."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.path = cfg["file"]
        self.snaplen = int(cfg.get("snaplen") or 262144)
        self.count = int(cfg.get("count") or 0)
        self.duration_s = float(cfg.get("duration_s") or 0)
        self.budget = int(cfg.get("budget_pps") or 0)
        self.stop_on_full = bool(cfg.get("stop_on_full"))
        self.recent_n = int(cfg.get("recent", 16))
        self.lost = bool(cfg.get("lost"))
        sel = cfg.get("streams")
        self.streams = None if sel is None else np.array(sorted(sel), dtype=np.int64)
        self.only_other = bool(cfg.get("other"))
        self.comment = Commenter(cfg.get("names") or [], int(cfg.get("block") or 1))
        self.c = Counts()
        self.taps: list[Tap] = []
        self.recent: list[dict] = []
        self.reason = ""
        # lost mode
        self.spool_keys: list[np.ndarray] = []
        self.spool_at: list[np.ndarray] = []
        self.spool_len: list[np.ndarray] = []
        self.spool_ts: list[np.ndarray] = []
        self.guard_ns = int(float(cfg.get("lost_guard_s") or 0) * 1e9)
        self.stop_wall_ns: int | None = None
        self.rx_keys: list[np.ndarray] = []
        self.spool_off = 0

    # -- set-up
    def open(self) -> list[str]:
        names: list[str] = []
        for t in self.cfg["taps"]:
            want_rx, want_tx = bool(t.get("rx", True)), bool(t.get("tx", True))
            with netns(t.get("netns")):
                try:
                    insns = compile_filter(t.get("filter") or "", interface=t["interface"])
                except FilterError as e:
                    raise ValueError(f"{t['port']}: bad filter {t.get('filter')!r}: {e}") from None
                rx_ring = want_rx or self.lost
                ring = CaptureRing(
                    t["interface"],
                    insns,
                    ring_mb=int(self.cfg.get("ring_mb") or 32),
                    rx=rx_ring,
                    tx=want_tx,
                )
            if_rx = if_tx = None
            if want_rx and not self.lost:
                if_rx = len(names)
                names.append(f"{t['port']} rx")
            if want_tx:
                if_tx = len(names)
                names.append(f"{t['port']} tx")
            self.taps.append(Tap(t["port"], ring, if_rx, if_tx))
            self.c.per_port[t["port"]] = {"seen": 0, "kept": 0, "ring_drops": 0}
        head = section_header(self.cfg.get("comment") or None)
        descr = {t["port"]: t for t in self.cfg["taps"]}
        for nm in names:
            port, d = nm.split(" ")
            t = descr[port]
            where = f"interface {t['interface']}" + (
                f" in netns {t['netns']}" if t.get("netns") else ""
            )
            fil = t.get("filter") or "all frames"
            head += interface_block(
                nm, f"tgen port {port} {d}, {where}, filter: {fil}", self.snaplen
            )
        self.head = head
        self.out = open(self.spool_path if self.lost else self.path, "wb")  # noqa: SIM115
        self.out.write(head)
        self.out.flush()
        self.spool_off = len(head)
        return names

    @property
    def spool_path(self) -> str:
        return self.path + ".tx-spool"

    # -- one batch
    def _select(self, b: CapBatch) -> CapBatch:
        keep = np.ones(len(b), dtype=bool)
        if self.streams is not None:
            keep &= b.signed & np.isin(b.stream, self.streams)
        if self.only_other:
            keep &= ~b.signed
        if keep.all():
            return b
        self.c.selected_out += int((~keep).sum())
        return b.take(np.flatnonzero(keep))

    def _limit(self, b: CapBatch) -> CapBatch:
        """The count and the per-second budget."""
        n = len(b)
        allow = n
        if self.count:
            allow = min(allow, max(0, self.count - self.c.kept))
            self.c.over_count += n - allow
        if self.budget:
            sec = int(time.monotonic())
            if sec != self.c.window_s:
                self.c.window_s, self.c.window_kept = sec, 0
            room = max(0, self.budget - self.c.window_kept)
            if allow > room:
                self.c.over_budget += allow - room
                allow = room
            self.c.window_kept += allow
        return b if allow == n else b.take(np.arange(allow))

    def _write(self, tap: Tap, b: CapBatch) -> None:
        if_id = np.where(b.tx, tap.if_tx if tap.if_tx is not None else 0, tap.if_rx or 0)
        flags = np.where(b.tx, FLAG_OUTBOUND, FLAG_INBOUND)
        cflat, cat, clen = self.comment(b)
        cap = np.minimum(b.caplen, self.snaplen)
        blob = packet_blocks(b.data, b.at, cap, b.origlen, b.ts_ns, if_id, flags, cflat, cat, clen)
        if self.lost:
            total = epb_lengths(cap, clen)
            self.spool_keys.append((b.stream << 32) | b.seq)
            self.spool_at.append(self.spool_off + np.cumsum(total) - total)
            self.spool_len.append(total)
            self.spool_ts.append(b.ts_ns.copy())
            self.spool_off += len(blob)
        self.out.write(blob)
        self.c.bytes += len(blob)
        self._remember(tap, b, cflat, cat, clen)

    def _remember(self, tap: Tap, b: CapBatch, cflat, cat, clen) -> None:
        k = min(len(b), self.recent_n)
        for i in range(len(b) - k, len(b)):  # the last few frames only (for the console)
            a, n = int(b.at[i]), int(min(b.caplen[i], RECENT_BYTES))
            self.recent.append(
                {
                    "port": tap.port,
                    "dir": "tx" if b.tx[i] else "rx",
                    "ts_ns": int(b.ts_ns[i]),
                    "len": int(b.origlen[i]),
                    "comment": bytes(cflat[cat[i] : cat[i] + clen[i]]).decode(),
                    "data": base64.b64encode(b.data[a : a + n].tobytes()).decode(),
                }
            )
        del self.recent[: -self.recent_n]

    def step(self) -> int:
        got = 0
        for tap in self.taps:
            parts = tap.ring.take()
            if not parts:
                continue
            for b in [concat(parts)]:
                if self.lost:
                    rx = b.take(np.flatnonzero(~b.tx & b.signed))
                    if len(rx):
                        self.rx_keys.append((rx.stream << 32) | rx.seq)
                    b = b.take(np.flatnonzero(b.tx & b.signed))
                    if tap.if_tx is None or not len(b):
                        continue
                n0 = len(b)
                b = self._select(b)
                self.c.seen += len(b)
                pp = self.c.per_port[tap.port]
                pp["seen"] += len(b)
                if not self.lost:
                    b = self._limit(b)
                if len(b):
                    self._write(tap, b)
                    self.c.kept += len(b)
                    pp["kept"] += len(b)
                got += n0
        if got:
            self.out.flush()
        return got

    def ring_stats(self) -> None:
        total = 0
        for tap in self.taps:
            _, dr = tap.ring.kernel_stats()
            self.c.per_port[tap.port]["ring_drops"] = dr
            total += dr
        self.c.ring_drops = total

    def status(self, ev: str = "status") -> dict:
        c = self.c
        return {
            "ev": ev,
            "seen": c.seen,
            "kept": c.kept,
            "selected_out": c.selected_out,
            "over_budget": c.over_budget,
            "over_count": c.over_count,
            "ring_drops": c.ring_drops,
            "ring_full": c.ring_drops > 0,
            "bytes": c.bytes,
            "ports": c.per_port,
            "file": self.path,
            "recent": self.recent,
        }

    def finish_lost(self, comment: str | None) -> dict:
        """Write the tx copies whose (stream, seq) never arrived; drop the spool."""
        self.out.close()
        keys = np.concatenate(self.spool_keys) if self.spool_keys else np.zeros(0, np.int64)
        at = np.concatenate(self.spool_at) if self.spool_at else np.zeros(0, np.int64)
        ln = np.concatenate(self.spool_len) if self.spool_len else np.zeros(0, np.int64)
        rx = np.concatenate(self.rx_keys) if self.rx_keys else np.zeros(0, np.int64)
        judged = np.ones(len(keys), dtype=bool)
        if self.guard_ns and self.stop_wall_ns is not None and self.spool_ts:
            ts = np.concatenate(self.spool_ts)  # sent too recently: maybe still on the way
            judged = ts <= self.stop_wall_ns - self.guard_ns
        self.not_judged = int((~judged).sum())
        missing = np.flatnonzero(~np.isin(keys, rx) & judged)
        spool = np.fromfile(self.spool_path, dtype=np.uint8)
        body = np.zeros(int(ln[missing].sum()), dtype=np.uint8)
        ragged_copy(body, np.cumsum(ln[missing]) - ln[missing], spool, at[missing], ln[missing])
        head = self.head
        if comment:
            head = section_header(comment) + head[len(section_header(self.cfg.get("comment"))) :]
        with open(self.path, "wb") as f:
            f.write(head)
            f.write(body.tobytes())
        os.unlink(self.spool_path)
        per: dict[str, int] = {}
        names = self.comment.names
        for s, n in zip(*np.unique(keys[missing] >> 32, return_counts=True), strict=True):
            nm = names[int(s) % self.comment.block] if names else str(int(s))
            per[nm] = per.get(nm, 0) + int(n)
        return {
            "lost_frames": int(len(missing)),
            "sent": int(len(keys)),
            "lost_by_stream": per,
            "not_judged": self.not_judged,
        }

    def close(self) -> None:
        for tap in self.taps:
            tap.ring.close()
        if not self.out.closed:
            self.out.close()


def run(cfg: dict, stdin_fd: int = 0, pending: bytes = b"") -> int:
    """Capture until a stop condition; ``pending``: stdin bytes already read."""
    cap = Capture(cfg)
    try:
        names = cap.open()
    except (OSError, ValueError) as e:
        emit({"ev": "error", "message": str(e)})
        return 2
    emit({"ev": "ready", "interfaces": names, "file": cap.path})
    t0 = time.monotonic()
    poller = select.poll()
    for tap in cap.taps:
        poller.register(tap.ring.fd, select.POLLIN)
    poller.register(stdin_fd, select.POLLIN | select.POLLHUP)
    next_status = t0 + STATUS_S
    stop_comment = None
    buf = pending

    def on_signal(signum: int, frame: object) -> None:  # a SIGTERM to the whole group
        cap.reason = cap.reason or f"stopped by {signal.Signals(signum).name}"

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    while not cap.reason:
        events = poller.poll(20)
        for fd, ev in events:
            if fd != stdin_fd:
                continue
            chunk = os.read(stdin_fd, 65536) if ev & (select.POLLIN | select.POLLHUP) else b""
            if not chunk:
                cap.reason = "stopped"
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line or b"{}")
                if msg.get("cmd") == "stop":
                    cap.stop_wall_ns = time.time_ns()
                    stop_comment = msg.get("comment")
                    cap.reason = msg.get("reason") or "stopped"
        cap.step()
        now = time.monotonic()
        if cap.count and cap.c.kept >= cap.count:
            cap.reason = cap.reason or "count"
        if cap.duration_s and now - t0 >= cap.duration_s:
            cap.reason = cap.reason or "duration"
        if now >= next_status:
            cap.ring_stats()
            if cap.stop_on_full and cap.c.ring_drops:
                cap.reason = cap.reason or "ring full"
            emit(cap.status())
            next_status = now + STATUS_S
    if cap.stop_wall_ns is None:
        cap.stop_wall_ns = time.time_ns()
    time.sleep(0.02)  # the last retired blocks (retire timeout 10 ms)
    while cap.step():
        pass
    cap.ring_stats()
    extra = cap.finish_lost(stop_comment) if cap.lost else {}
    cap.close()
    done = cap.status("done")
    done.update(extra, reason=cap.reason, duration_s=round(time.monotonic() - t0, 3))
    emit(done)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tgen_tui.worker.capture", description=__doc__)
    ap.add_argument("--parent-pid", type=int, default=None)
    args = ap.parse_args(argv)
    parent = args.parent_pid if args.parent_pid is not None else os.getppid()
    arm_parent_death(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the owner stops us with a command
    try:
        os.nice(5)
    except OSError:
        pass
    buf = b""
    while b"\n" not in buf:  # os.read, not sys.stdin: the loop polls fd 0 unbuffered
        chunk = os.read(0, 65536)
        if not chunk:
            return 2
        buf += chunk
    line, rest = buf.split(b"\n", 1)
    try:
        cfg = json.loads(line)
    except ValueError:
        emit({"ev": "error", "message": "the first line must be the JSON configuration"})
        return 2
    return run(cfg, 0, rest)


if __name__ == "__main__":
    sys.exit(main())
