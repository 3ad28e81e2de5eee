"""Transport flows: kernel TCP and UDP sockets between two network namespaces.

``python -m tgen_tui.worker.transport_flow`` reads one JSON plan on stdin, creates each
flow's receiving socket in the receiver's namespace and its sending socket in the
sender's (a socket keeps the namespace it was made in, so one pinned process can hold
both ends), says ``{"ready": ...}`` on stdout, waits for ``go T0`` (CLOCK_MONOTONIC
seconds), then moves bytes until the run ends (``stop`` on stdin, or the plan's
duration) and reports cumulative counters once per interval as one JSON line.

Stdlib only (plus nothing): the data is moved by the kernel; Python only calls
send/recv on large buffers (TCP) or one datagram per call (UDP at the modest rates this
is for). TCP counters come from ``TCP_INFO`` (struct tcp_info, linux/tcp.h).
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

from tgen_tui.worker.kernel import PR_SET_PDEATHSIG, PR_SET_TIMERSLACK, prctl
from tgen_tui.worker.netns import netns

TCP_CONGESTION = 13

#: struct tcp_info up to tcpi_snd_wnd (232 bytes): u8 x8, u32 x24, u64 x4, u32 x6,
#: u64 x4, u32 x2, u64 x2, u32 x4.
TCP_INFO_FMT = "<8B24I4Q6I4Q2I2Q4I"
TCP_INFO_LEN = struct.calcsize(TCP_INFO_FMT)
_TI_NAMES = (
    ["state", "ca_state", "retransmits", "probes", "backoff", "options", "wscale", "flags"]
    + ["rto", "ato", "snd_mss", "rcv_mss", "unacked", "sacked", "lost", "retrans", "fackets"]
    + ["last_data_sent", "last_ack_sent", "last_data_recv", "last_ack_recv", "pmtu"]
    + ["rcv_ssthresh", "rtt", "rttvar", "snd_ssthresh", "snd_cwnd", "advmss", "reordering"]
    + ["rcv_rtt", "rcv_space", "total_retrans"]
    + ["pacing_rate", "max_pacing_rate", "bytes_acked", "bytes_received"]
    + ["segs_out", "segs_in", "notsent_bytes", "min_rtt", "data_segs_in", "data_segs_out"]
    + ["delivery_rate", "busy_time", "rwnd_limited", "sndbuf_limited"]
    + ["delivered", "delivered_ce", "bytes_sent", "bytes_retrans"]
    + ["dsack_dups", "reord_seen", "rcv_ooopack", "snd_wnd"]
)
#: the TCP_INFO fields a report carries (rtt and min_rtt in microseconds, rates in bytes/s)
TI_REPORTED = (
    "rtt", "rttvar", "min_rtt", "snd_cwnd", "snd_mss", "total_retrans", "lost",
    "delivery_rate", "pacing_rate", "segs_out", "data_segs_out", "bytes_sent",
    "bytes_retrans", "bytes_acked", "ca_state",
)  # fmt: skip
RCVLOWAT = 16384
UDP_HDR = struct.Struct("<Qq")  # sequence number, send time (CLOCK_MONOTONIC ns)


def tcp_info(sock: socket.socket) -> dict:
    """The reported TCP_INFO fields of ``sock`` (zeros the kernel did not fill)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    raw = raw.ljust(TCP_INFO_LEN, b"\0")
    vals = dict(zip(_TI_NAMES, struct.unpack(TCP_INFO_FMT, raw), strict=True))
    return {k: vals[k] for k in TI_REPORTED}


def active_time(t: float, start: float, stop: float | None, on: float, off: float) -> float:
    """Seconds of sending in ``[0, t]`` for a schedule (start, stop, on/off periods)."""
    end = t if stop is None else min(t, stop)
    span = end - start
    if span <= 0:
        return 0.0
    if on <= 0:
        return span
    cycle = on + off
    full, rest = divmod(span, cycle)
    return full * on + min(rest, on)


def is_on(t: float, start: float, stop: float | None, on: float, off: float) -> bool:
    if t < start or (stop is not None and t >= stop):
        return False
    return on <= 0 or (t - start) % (on + off) < on


# ---------------------------------------------------------------- flows


class Flow:
    """One flow: its two sockets and cumulative counters."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.id = int(spec["id"])
        self.proto = spec["proto"]
        self.msg = int(spec["msg"])
        self.buf = bytearray(self.msg)
        self.payload = memoryview(self.buf)
        self.sched = (
            float(spec.get("start", 0.0)),
            spec.get("stop"),
            float(spec.get("on", 0.0)),
            float(spec.get("off", 0.0)),
        )
        self.tx = self.rx = self.tx_msgs = 0
        self.rx_pkts = self.max_seq = 0
        self.jitter_ns = 0.0
        self._last_transit: int | None = None
        self.snd: socket.socket | None = None
        self.rcv: socket.socket | None = None
        self.lst: socket.socket | None = None
        self.done = False  # sender finished (shut down its side)
        self.eof = False  # receiver saw the end
        self.off = 0  # TCP: offset into the current message
        self.error: str | None = None
        self.rx_span: int | None = None  # rx_bytes when the flow's sending time ended

    # -- set-up
    def open(self) -> None:
        s = self.spec
        with netns(s.get("dst_ns")):
            if self.proto == "tcp":
                self.lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self.lst.bind((s["dst_ip"], int(s["port"])))
                self.lst.listen(1)
            else:
                self.rcv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self.rcv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                self.rcv.bind((s["dst_ip"], int(s["port"])))
                self.rcv.setblocking(False)
        with netns(s.get("src_ns")):
            kind = socket.SOCK_STREAM if self.proto == "tcp" else socket.SOCK_DGRAM
            self.snd = socket.socket(socket.AF_INET, kind)
        self.snd.bind((s["src_ip"], 0))
        if self.proto == "tcp":
            cc = str(s.get("cc") or "cubic").encode()
            self.snd.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc)
            self.snd.settimeout(10.0)
            self.snd.connect((s["dst_ip"], int(s["port"])))
            assert self.lst is not None
            self.lst.settimeout(10.0)
            self.rcv, _ = self.lst.accept()
            self.lst.close()
            self.lst = None
            # wake the receiver per 16 KB, not per segment (the reports read what is left)
            self.rcv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, RCVLOWAT)
            self.rcv.setblocking(False)
        else:
            self.snd.connect((s["dst_ip"], int(s["port"])))
        self.snd.setblocking(False)

    def close(self) -> None:
        for sk in (self.snd, self.rcv, self.lst):
            if sk is not None:
                sk.close()

    # -- data
    def send_tcp(self, limit: int = 16) -> None:
        assert self.snd is not None
        for _ in range(limit):
            try:
                n = self.snd.send(self.payload[self.off :])
            except BlockingIOError:
                return
            except OSError as e:
                self.error = f"send: {e}"
                self.done = True
                return
            self.tx += n
            self.off += n
            if self.off >= self.msg:
                self.off = 0
                self.tx_msgs += 1

    def send_udp(self, due: int, limit: int = 256) -> None:
        assert self.snd is not None
        n = min(due - self.tx_msgs, limit)
        for _ in range(max(0, n)):
            UDP_HDR.pack_into(self.buf, 0, self.tx_msgs, time.monotonic_ns())
            try:
                self.snd.send(self.payload)
            except (BlockingIOError, ConnectionRefusedError):
                return
            except OSError as e:
                if e.errno in (errno.ENOBUFS, errno.EAGAIN):
                    return
                self.error = f"send: {e}"
                self.done = True
                return
            self.tx_msgs += 1
            self.tx += self.msg

    def receive(self, buf: bytearray) -> None:
        assert self.rcv is not None
        view = memoryview(buf)
        for _ in range(64):
            try:
                n = self.rcv.recv_into(view)
            except BlockingIOError:
                return
            except OSError as e:
                self.error = f"recv: {e}"
                self.eof = True
                return
            if n == 0:
                self.eof = True
                return
            self.rx += n
            if self.proto == "udp" and n >= UDP_HDR.size:
                self._udp_packet(view, time.monotonic_ns())

    def _udp_packet(self, view: memoryview, now_ns: int) -> None:
        seq, sent_ns = UDP_HDR.unpack_from(view, 0)
        self.rx_pkts += 1
        self.max_seq = max(self.max_seq, seq + 1)
        transit = now_ns - sent_ns
        if self._last_transit is not None:  # RFC 3550 interarrival jitter
            d = abs(transit - self._last_transit)
            self.jitter_ns += (d - self.jitter_ns) / 16.0
        self._last_transit = transit

    def finish(self) -> None:
        """Stop sending: TCP shuts its side down so the receiver reads to the end."""
        if self.done:
            return
        self.done = True
        if self.proto == "tcp" and self.snd is not None:
            try:
                self.snd.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def report(self) -> dict:
        d: dict = {"id": self.id, "tx_bytes": self.tx, "rx_bytes": self.rx}
        if self.rx_span is not None:
            d["rx_bytes_span"] = self.rx_span
        if self.proto == "tcp":
            if self.snd is not None:
                try:
                    d["tcp_info"] = tcp_info(self.snd)
                except OSError:
                    pass
        else:
            d |= {
                "tx_packets": self.tx_msgs,
                "rx_packets": self.rx_pkts,
                "expected": self.max_seq,
                "jitter_ns": round(self.jitter_ns),
            }
        if self.error:
            d["error"] = self.error
        return d


# ---------------------------------------------------------------- the loop


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _wait_go() -> float:
    line = sys.stdin.readline().split()
    if not line or line[0] != "go":
        raise SystemExit(0)
    return float(line[1]) if len(line) > 1 else time.monotonic()


def run(plan: dict) -> None:
    flows = [Flow(f) for f in plan["flows"]]
    for f in flows:
        f.open()
    _emit({"ready": [f.id for f in flows], "pid": os.getpid(), "core": plan.get("core")})
    t0 = _wait_go()
    while time.monotonic() < t0:
        time.sleep(min(0.01, t0 - time.monotonic()))
    _loop(flows, plan, t0)
    _emit({"final": True, "t": time.monotonic() - t0, "flows": [f.report() for f in flows]})
    for f in flows:
        f.close()


def _loop(flows: list[Flow], plan: dict, t0: float) -> None:
    interval = float(plan.get("interval", 0.5))
    duration = float(plan["duration"])
    drain = float(plan.get("drain", 2.0))
    sel = selectors.DefaultSelector()
    os.set_blocking(sys.stdin.fileno(), False)
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ, None)
    for f in flows:
        assert f.rcv is not None and f.snd is not None
        sel.register(f.rcv, selectors.EVENT_READ, f)
    writing: set[int] = set()
    buf = bytearray(1 << 18)
    next_report = interval
    stop_at = duration
    while True:
        t = time.monotonic() - t0
        if t >= next_report:
            for f in flows:
                if not f.eof:
                    f.receive(buf)
            _emit({"t": t, "flows": [f.report() for f in flows]})
            next_report += interval
        for f in flows:  # what arrived while the flow was due to send: its goodput
            end = stop_at if f.sched[1] is None else min(stop_at, float(f.sched[1]))
            if f.rx_span is None and t >= end:
                f.rx_span = f.rx
        if t >= stop_at:
            for f in flows:
                f.finish()
            if t >= stop_at + drain or all(_drained(f, t - stop_at) for f in flows):
                return
        wait = _senders(flows, t, sel, writing)
        timeout = max(0.0, min(wait, next_report - t, max(0.0, stop_at - t) or 0.05))
        for key, _ in sel.select(timeout):
            f = key.data
            if f is None:
                if _stdin_says_stop():
                    stop_at = min(stop_at, time.monotonic() - t0)
                continue
            if key.fileobj is f.rcv:
                f.receive(buf)
                if f.eof:
                    sel.unregister(f.rcv)
            elif is_on(t, *f.sched) and not f.done:
                f.send_tcp()


def _drained(f: Flow, since_stop: float) -> bool:
    """TCP: the receiver read to the end; UDP: datagrams in flight had 0.3 s to arrive."""
    if f.proto == "udp":
        return since_stop >= 0.3
    return f.eof or f.error is not None


def _senders(flows: list[Flow], t: float, sel, writing: set[int]) -> float:
    """Send what is due; keep TCP senders registered for writability only while on.
    Returns the longest the loop may sleep."""
    wait = 0.05
    for f in flows:
        on = is_on(t, *f.sched) and not f.done
        if f.proto == "tcp":
            if on and f.id not in writing:
                sel.register(f.snd, selectors.EVENT_WRITE, f)
                writing.add(f.id)
            elif not on and f.id in writing:
                sel.unregister(f.snd)
                writing.discard(f.id)
            if f.done and f.id in writing:
                sel.unregister(f.snd)
                writing.discard(f.id)
        elif on:
            rate = float(f.spec["rate_bps"]) / (8.0 * f.msg)
            due = int(active_time(t, *f.sched) * rate) + 1
            f.send_udp(due)
            wait = min(wait, max(0.0005, 1.0 / rate if rate > 0 else 0.05))
    return wait


def _stdin_says_stop() -> bool:
    try:
        data = os.read(sys.stdin.fileno(), 4096)
    except BlockingIOError:
        return False
    return not data or b"stop" in data


def _arm_parent_death() -> None:
    """Die with tgen (as worker.main does): Ctrl-C goes to tgen, which sends ``stop``."""
    parent = os.getppid()

    def on_parent_exit(signum: int, frame: object) -> None:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    signal.signal(signal.SIGUSR2, on_parent_exit)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGUSR2)
        prctl(PR_SET_TIMERSLACK, 1)  # precise sleeps for UDP pacing
    except OSError:
        pass


def main() -> None:
    _arm_parent_death()
    plan = json.loads(sys.stdin.readline())
    core = plan.get("core")
    if core is not None:
        try:
            os.sched_setaffinity(0, {int(core)})
        except OSError:
            pass
    try:
        run(plan)
    except (OSError, AssertionError) as e:
        _emit({"error": f"{type(e).__name__}: {e}"})
        raise SystemExit(3) from None


if __name__ == "__main__":
    main()
