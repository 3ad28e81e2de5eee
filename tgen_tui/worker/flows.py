"""The flow worker: kernel TCP and UDP socket flows between two namespaces, on one core.

``python -m tgen_tui.worker.flows --core N --parent-pid P`` speaks the worker protocol
(:mod:`tgen_tui.worker.protocol`): ``configure_flows`` creates each flow's receiving
socket in the receiver's namespace and its sending socket in the sender's (a socket
keeps the namespace it was made in, so one pinned process holds both ends), connects the
TCP flows, and answers ``flows_ready``. ``start`` runs the flows of the named ports from
the common ``t0_ns``, each by its schedule (:mod:`tgen_tui.packets.schedule`): a TCP flow
sends as fast as its congestion control allows while its schedule has it on, a UDP flow
paces its datagrams to their due times. ``stop`` ends sending: TCP shuts its side down
and the receiver reads to the end (at most ``drain_ms`` + :data:`TCP_DRAIN_S`), UDP
keeps receiving for ``drain_ms``; then ``stopped`` per port. A port started again opens
new TCP connections; the counters go on.

Every figure goes into the counter block (:mod:`tgen_tui.worker.flowcounters`), the
single writer being this process; TCP figures come from ``TCP_INFO`` (struct tcp_info,
linux/tcp.h), read at most every :data:`INFO_EVERY_NS`.

The kernel moves the bytes: Python calls send/recv on 128 KiB buffers (TCP) or one
datagram per call (UDP, at the modest rates socket flows are for). Imports: the standard
library, numpy, ``tgen_tui.packets.{flowprogram,program,schedule}`` and this package.
"""

from __future__ import annotations

import errno
import os
import selectors
import socket
import struct
import sys
import time

from tgen_tui.packets.flowprogram import FlowProgram, flow_from_dict
from tgen_tui.packets.schedule import DueTimes, is_on
from tgen_tui.worker import flowcounters as FC
from tgen_tui.worker import protocol as P
from tgen_tui.worker.appflows import AppFlow
from tgen_tui.worker.netns import netns
from tgen_tui.worker.process import run_worker
from tgen_tui.worker.protocol import EXIT_OK

TCP_CONGESTION = 13
#: struct tcp_info up to tcpi_snd_wnd (232 bytes): u8 x8, u32 x24, u64 x4, u32 x6,
#: u64 x4, u32 x2, u64 x2, u32 x4.
TCP_INFO_FMT = "<8B24I4Q6I4Q2I2Q4I"
TCP_INFO_LEN = struct.calcsize(TCP_INFO_FMT)
_TI = {
    name: i
    for i, name in enumerate(
        ["state", "ca_state", "retransmits", "probes", "backoff", "options", "wscale", "flags"]
        + ["rto", "ato", "snd_mss", "rcv_mss", "unacked", "sacked", "lost", "retrans"]
        + ["fackets", "last_data_sent", "last_ack_sent", "last_data_recv", "last_ack_recv"]
        + ["pmtu", "rcv_ssthresh", "rtt", "rttvar", "snd_ssthresh", "snd_cwnd", "advmss"]
        + ["reordering", "rcv_rtt", "rcv_space", "total_retrans", "pacing_rate"]
        + ["max_pacing_rate", "bytes_acked", "bytes_received", "segs_out", "segs_in"]
        + ["notsent_bytes", "min_rtt", "data_segs_in", "data_segs_out", "delivery_rate"]
        + ["busy_time", "rwnd_limited", "sndbuf_limited", "delivered", "delivered_ce"]
        + ["bytes_sent", "bytes_retrans", "dsack_dups", "reord_seen", "rcv_ooopack", "snd_wnd"]
    )
}
UDP_HDR = struct.Struct("<Qq")  # sequence number, send time (CLOCK_MONOTONIC ns)
RCVLOWAT = 16384  # wake the TCP receiver per 16 KB, not per segment
CONNECT_TIMEOUT_S = 3.0  # below the engine's acknowledgement wait for a flow worker's start
TCP_DRAIN_S = 3.0  # past drain_ms, how long a stopping TCP flow may take to read to the end
INFO_EVERY_NS = 20_000_000  # TCP_INFO, heartbeat and the "on" gauge at most this often
MAX_SLEEP_S = 0.05
SEND_CALLS = 16  # TCP send calls per flow per loop turn (then rx and commands get a look)
UDP_BURST = 256  # UDP datagrams per flow per loop turn at most


def tcp_info(sock: socket.socket) -> tuple[int, ...]:
    """The kernel's struct tcp_info of ``sock`` (zeros where the kernel did not fill it)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    return struct.unpack(TCP_INFO_FMT, raw.ljust(TCP_INFO_LEN, b"\0"))


class Flow:
    """One flow: its sockets, its pacer and its counter row."""

    def __init__(self, prog: FlowProgram, row) -> None:
        self.prog = prog
        self.row = row
        self.buf = bytearray(prog.message)
        self.view = memoryview(self.buf)
        self.snd: socket.socket | None = None
        self.rcv: socket.socket | None = None
        self.lst: socket.socket | None = None
        self.running = False  # its port is started (not stopped)
        self.stopping_until: float | None = None  # monotonic s: drain deadline
        self.t0_ns = 0
        self.off = 0  # TCP: offset into the current message
        self.eof = False
        self.closed_ti = [0, 0, 0, 0]  # retrans, data_segs_out, bytes_retrans, bytes_acked
        self.last_acked = 0
        self.next_info_ns = 0
        self.last_on_ns: int | None = None  # when the flow was last seen on (active time)
        self.jitter = 0.0
        self.last_transit: int | None = None
        self.max_seq = -1
        self.sent_base = 0  # UDP: datagrams sent when the pacer was last (re)based
        self.t_base = 0.0  # ... and when, s after t0
        self.dt: DueTimes | None = None
        self.row[FC.FC_RATE_BPS] = round(prog.rate_bps or 0)
        self.app: AppFlow | None = AppFlow(prog, row) if prog.app is not None else None

    # ------------------------------------------------------------------ sockets
    def open_receiver(self) -> None:
        p = self.prog
        with netns(p.dst_netns):
            if p.protocol == "tcp":
                self.lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self.lst.bind((p.dst_ip, p.dst_port))
                self.lst.listen(4)
            else:
                self.rcv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self.rcv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                self.rcv.bind((p.dst_ip, p.dst_port))
                self.rcv.setblocking(False)
        if p.protocol == "udp":
            self._new_sender()
            assert self.snd is not None
            self.snd.connect((p.dst_ip, p.dst_port))
            self.snd.setblocking(False)

    def _new_sender(self) -> None:
        p = self.prog
        kind = socket.SOCK_STREAM if p.protocol == "tcp" else socket.SOCK_DGRAM
        with netns(p.src_netns):
            self.snd = socket.socket(socket.AF_INET, kind)
        self.snd.bind((p.src_ip, 0))

    def connect(self) -> None:
        """A new TCP connection (configure, and each start after a stop)."""
        p = self.prog
        self._new_sender()
        assert self.snd is not None and self.lst is not None
        self.snd.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, str(p.cc or "cubic").encode())
        self.snd.settimeout(CONNECT_TIMEOUT_S)
        self.row[FC.FC_STATE] = FC.STATE_CONNECTING
        try:
            self.snd.connect((p.dst_ip, p.dst_port))
            self.lst.settimeout(CONNECT_TIMEOUT_S)
            self.rcv, _ = self.lst.accept()
        except OSError as e:
            self.close_tcp()
            raise OSError(
                e.errno,
                f"flow {p.name}: TCP connect {p.src_ip} -> {p.dst_ip}:{p.dst_port} "
                f"(netns {p.src_netns} -> {p.dst_netns}) failed: {e.strerror or e}",
            ) from None
        self.rcv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, RCVLOWAT)
        self.rcv.setblocking(False)
        self.snd.setblocking(False)
        self.eof, self.off, self.last_acked = False, 0, 0
        self.row[FC.FC_CONNECTIONS] += 1

    def close_tcp(self, abort: bool = False) -> None:
        """Close the connection's two ends (keeping the listener); ``abort``: with RST."""
        for sk in (self.snd, self.rcv):
            if sk is None:
                continue
            if abort:
                sk.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sk.close()
        self.snd = self.rcv = None

    def close(self) -> None:
        for sk in (self.snd, self.rcv, self.lst):
            if sk is not None:
                sk.close()
        self.snd = self.rcv = self.lst = None

    # ------------------------------------------------------------------ schedule
    def begin(self, t0_ns: int) -> None:
        """The port started: the schedule runs from ``t0_ns`` (sequence numbers go on)."""
        self.t0_ns = t0_ns
        self.running = True
        self.stopping_until = None
        self.last_on_ns = None
        self.row[FC.FC_STARTED_NS] = t0_ns
        self._rebase(0.0)
        self.row[FC.FC_STATE] = FC.STATE_OFF

    def _rebase(self, rel_s: float) -> None:
        sc = self.prog.schedule
        self.dt = DueTimes(sc) if sc.pps > 0 else None
        self.sent_base = int(self.row[FC.FC_TX_PACKETS])
        self.t_base = rel_s

    def set_rate(self, bps: float, now_ns: int) -> None:
        """A UDP flow's new payload rate from now on. The schedule's phases stay where the
        port's start put them (its on/off periods are the ones ``is_on`` follows): what the
        new rate makes due from now counts on from the datagrams already sent."""
        self.prog = self.prog.with_rate(bps)
        self.row[FC.FC_RATE_BPS] = round(bps)
        if self.running and self.prog.schedule.pps > 0:
            rel = self.rel(now_ns)
            self.dt = DueTimes(self.prog.schedule)
            self.t_base = 0.0
            self.sent_base = int(self.row[FC.FC_TX_PACKETS]) - self.dt.count_until(rel)

    def rel(self, now_ns: int) -> float:
        return (now_ns - self.t0_ns) / 1e9

    def is_on(self, now_ns: int) -> bool:
        return (
            self.running
            and self.stopping_until is None
            and is_on(self.prog.schedule, self.rel(now_ns))
        )

    def tick_active(self, now_ns: int, on: bool) -> None:
        """Add the time since the last look to the flow's active time when it was on then
        (looks are at most MAX_SLEEP_S apart)."""
        if self.last_on_ns is not None:
            self.row[FC.FC_ACTIVE_NS] += now_ns - self.last_on_ns
        self.last_on_ns = now_ns if on else None
        self.row[FC.FC_ON] = int(on)
        if self.running and self.stopping_until is None:
            self.row[FC.FC_STATE] = FC.STATE_SENDING if on else FC.STATE_OFF

    def done_sending(self, now_ns: int) -> bool:
        """The schedule's stop time has passed (it will not be on again this run)."""
        stop = self.prog.schedule.stop_s
        return stop is not None and self.rel(now_ns) >= stop

    # ------------------------------------------------------------------ data
    def send_tcp(self) -> str | None:
        """Up to SEND_CALLS send calls; an error's text (the flow stops sending)."""
        assert self.snd is not None
        for _ in range(SEND_CALLS):
            try:
                n = self.snd.send(self.view[self.off :])
            except BlockingIOError:
                return None
            except OSError as e:
                return f"send: {e}"
            self.row[FC.FC_TX_BYTES] += n
            self.off = (self.off + n) % self.prog.message
        return None

    def send_udp(self, now_ns: int) -> tuple[str | None, float]:
        """Send the datagrams due by now; (an error's text, seconds to the next one)."""
        assert self.snd is not None
        if self.dt is None:
            return None, MAX_SLEEP_S
        rel = self.rel(now_ns) - self.t_base
        due = self.sent_base + self.dt.count_until(rel)
        sent = int(self.row[FC.FC_TX_PACKETS])
        for _ in range(min(due - sent, UDP_BURST)):
            UDP_HDR.pack_into(self.buf, 0, sent, time.monotonic_ns())
            try:
                self.snd.send(self.view)
            except (BlockingIOError, ConnectionRefusedError):
                break
            except OSError as e:
                if e.errno in (errno.ENOBUFS, errno.EAGAIN):
                    break
                return f"send: {e}", MAX_SLEEP_S
            sent += 1
            self.row[FC.FC_TX_PACKETS] = sent
            self.row[FC.FC_TX_BYTES] += self.prog.message
        nxt = self.dt.due_one(sent - self.sent_base) - rel
        return None, max(0.0, nxt)

    def receive(self, buf: bytearray, on: bool) -> str | None:
        """Read what is there; an error's text. TCP EOF sets ``eof``."""
        if self.rcv is None:
            return None
        view = memoryview(buf)
        udp = self.prog.protocol == "udp"
        for _ in range(64):
            try:
                n = self.rcv.recv_into(view)
            except BlockingIOError:
                return None
            except OSError as e:
                self.eof = True
                return f"recv: {e}"
            if n == 0:
                self.eof = True
                return None
            self.row[FC.FC_RX_BYTES] += n
            if on:
                self.row[FC.FC_RX_BYTES_DUE] += n
            if udp and n >= UDP_HDR.size:
                self._datagram(view, time.monotonic_ns())
        return None

    def _datagram(self, view: memoryview, now_ns: int) -> None:
        seq, sent_ns = UDP_HDR.unpack_from(view, 0)
        self.row[FC.FC_RX_PACKETS] += 1
        if seq > self.max_seq:
            self.max_seq = seq
            self.row[FC.FC_EXPECTED] = max(int(self.row[FC.FC_EXPECTED]), seq + 1)
        transit = now_ns - sent_ns
        if self.last_transit is not None:  # RFC 3550 interarrival jitter
            self.jitter += (abs(transit - self.last_transit) - self.jitter) / 16.0
            self.row[FC.FC_JITTER_NS] = round(self.jitter)
        self.last_transit = transit

    def read_info(self, now_ns: int, force: bool = False) -> None:
        """TCP_INFO into the gauges (at most every INFO_EVERY_NS unless ``force``); an RTT
        sample counts toward the mean while the flow has data acknowledged."""
        if self.prog.protocol != "tcp" or self.snd is None:
            return
        if not force and now_ns < self.next_info_ns:
            return
        self.next_info_ns = now_ns + INFO_EVERY_NS
        try:
            ti = tcp_info(self.snd)
        except OSError:
            return
        r = self.row
        r[FC.FC_RTT_US], r[FC.FC_RTTVAR_US] = ti[_TI["rtt"]], ti[_TI["rttvar"]]
        r[FC.FC_MIN_RTT_US], r[FC.FC_CWND] = ti[_TI["min_rtt"]], ti[_TI["snd_cwnd"]]
        r[FC.FC_MSS], r[FC.FC_DELIVERY_RATE] = ti[_TI["snd_mss"]], ti[_TI["delivery_rate"]]
        c = self.closed_ti
        r[FC.FC_RETRANS] = c[0] + ti[_TI["total_retrans"]]
        r[FC.FC_DATA_SEGS_OUT] = c[1] + ti[_TI["data_segs_out"]]
        r[FC.FC_BYTES_RETRANS] = c[2] + ti[_TI["bytes_retrans"]]
        acked = ti[_TI["bytes_acked"]]
        r[FC.FC_BYTES_ACKED] = c[3] + acked
        r[FC.FC_TI_READS] += 1
        if acked > self.last_acked:  # the RTT of a flow that delivered data since
            r[FC.FC_RTT_SUM_US] += ti[_TI["rtt"]]
            r[FC.FC_RTT_SAMPLES] += 1
        self.last_acked = acked

    def end_connection(self) -> None:
        """The connection is done: its cumulative TCP figures carry over to the next."""
        self.read_info(time.monotonic_ns(), force=True)
        r = self.row
        self.closed_ti = [
            int(r[FC.FC_RETRANS]),
            int(r[FC.FC_DATA_SEGS_OUT]),
            int(r[FC.FC_BYTES_RETRANS]),
            int(r[FC.FC_BYTES_ACKED]),
        ]


class FlowWorker:
    """The process: its flows, the command channel, the loop."""

    def __init__(self, core: int | None) -> None:
        self.core = core
        self.flows: list[Flow] = []
        self.cv: FC.FlowCounterView | None = None
        self.sel = selectors.DefaultSelector()
        self.in_fd = sys.stdin.fileno()
        self._inbuf = b""
        self.quit = False
        self.writing: set[int] = set()  # TCP flows registered for writability
        self.reading: set[int] = set()
        self.tx_done_sent: set[str] = set()
        self.stopping_ports: set[str] = set()  # a stop asked; ``stopped`` once they drained
        self.buf = bytearray(1 << 18)

    def emit(self, ev: P.Event) -> None:
        sys.stdout.buffer.write(P.encode(ev))
        sys.stdout.buffer.flush()

    def error(self, message: str, **kw) -> None:
        self.emit(P.Error(message=message, **kw))

    # ------------------------------------------------------------------ commands
    def configure(self, cmd: P.ConfigureFlows) -> None:
        if self.cv is not None:
            raise ValueError("configure_flows: this worker is configured already")
        progs = [flow_from_dict(d) for d in cmd.flows]
        self.cv = FC.FlowCounterView.create(cmd.shm, [p.id for p in progs])
        self.flows = [Flow(p, self.cv.rows[i]) for i, p in enumerate(progs)]
        notes: list[str] = []
        for f in self.flows:
            if f.app is not None:  # request/response: its server now, its clients at start
                f.app.open_server()
                notes += [f"flow {f.prog.name}: {n}" for n in f.app.notes]
                self.sel.register(f.app, selectors.EVENT_READ, f.app)
            else:
                f.open_receiver()
                if f.prog.protocol == "tcp":
                    f.connect()
                self._watch_receiver(f)
            f.row[FC.FC_STATE] = FC.STATE_IDLE
        ports = sorted({f.prog.port for f in self.flows})
        ids = [f.prog.id for f in self.flows]
        self.emit(P.FlowsReady(shm=cmd.shm, flows=ids, ports=ports, notes=notes, id=cmd.id))

    def _watch_receiver(self, f: Flow) -> None:
        if f.rcv is not None and f.prog.id not in self.reading:
            self.sel.register(f.rcv, selectors.EVENT_READ, f)
            self.reading.add(f.prog.id)

    def _unwatch(self, f: Flow) -> None:
        for ids, sk in ((self.reading, f.rcv), (self.writing, f.snd)):
            if f.prog.id in ids:
                ids.discard(f.prog.id)
                if sk is not None:
                    self.sel.unregister(sk)

    def _mine(self, ports: list[str] | None) -> list[Flow]:
        return [f for f in self.flows if ports is None or f.prog.port in ports]

    def start(self, cmd: P.Start) -> None:
        t0 = cmd.t0_ns or time.monotonic_ns()
        flows = self._mine(cmd.ports)
        for f in flows:
            if f.app is not None:
                f.app.begin(t0)
            elif f.prog.protocol == "tcp" and f.snd is None:
                f.connect()  # an earlier stop closed its connection
                self._watch_receiver(f)
            f.begin(t0)
        for port in {f.prog.port for f in flows}:
            self.tx_done_sent.discard(port)
        self.emit(P.Started(ports=sorted({f.prog.port for f in flows}), t0_ns=t0, id=cmd.id))

    def stop(self, cmd: P.Stop) -> None:
        until = time.monotonic() + cmd.drain_ms / 1000.0
        for f in self._mine(cmd.ports):
            self.stopping_ports.add(f.prog.port)
            if not f.running:
                continue
            f.tick_active(time.monotonic_ns(), False)
            f.stopping_until = until + (TCP_DRAIN_S if f.prog.protocol == "tcp" else 0.0)
            f.row[FC.FC_STATE] = FC.STATE_DRAINING
            if f.app is not None:
                f.app.end()
                f.stopping_until = until  # open connections finish within the drain
            elif f.prog.protocol == "tcp" and f.snd is not None:
                self._stop_writing(f)
                try:
                    f.snd.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        self._finish_stops(time.monotonic())

    def _stop_writing(self, f: Flow) -> None:
        if f.prog.id in self.writing:
            self.writing.discard(f.prog.id)
            assert f.snd is not None
            self.sel.unregister(f.snd)

    def _finish_stops(self, now: float) -> None:
        """Flows whose drain ended are stopped; a port whose flows all are says so."""
        for f in self.flows:
            if f.stopping_until is None:
                continue
            tcp = f.prog.protocol == "tcp" and f.app is None
            if f.app is not None and (f.app.idle() or now >= f.stopping_until):
                f.app.abort_all()
            elif (tcp and (f.eof or f.rcv is None)) or now >= f.stopping_until:
                if tcp:
                    f.end_connection()
                    self._unwatch(f)
                    f.close_tcp(abort=not f.eof)
                else:  # nothing more in flight: the receiver should have every datagram sent
                    sent = int(f.row[FC.FC_TX_PACKETS])
                    f.row[FC.FC_EXPECTED] = max(int(f.row[FC.FC_EXPECTED]), sent)
            else:
                continue
            f.stopping_until = None
            f.running = False
            f.row[FC.FC_STATE] = FC.STATE_STOPPED
        for port in sorted(self.stopping_ports):
            if not any(g.running for g in self.flows if g.prog.port == port):
                self.stopping_ports.discard(port)
                self.emit(P.Stopped(port=port, counters={}, streams=[]))

    def handle(self, cmd: P.Command) -> None:
        if isinstance(cmd, P.ConfigureFlows):
            self.configure(cmd)
        elif self.cv is None and not isinstance(cmd, P.Ping | P.Quit):
            raise ValueError(f"{cmd.KIND}: configure_flows first")
        elif isinstance(cmd, P.Start):
            self.start(cmd)
        elif isinstance(cmd, P.Stop):
            self.stop(cmd)
        elif isinstance(cmd, P.SetFlowRate):
            f = next((x for x in self.flows if x.prog.id == cmd.flow), None)
            if f is None or f.prog.protocol != "udp" or f.app is not None:
                raise ValueError(f"set_flow_rate: no UDP flow {cmd.flow} here")
            f.set_rate(float(cmd.bps), time.monotonic_ns())
            self.emit(P.FlowRateSet(flow=cmd.flow, bps=float(cmd.bps), id=cmd.id))
        elif isinstance(cmd, P.Clear):
            for f in self._mine(cmd.ports):  # a new jitter chain; counters: the engine's baselines
                f.jitter, f.last_transit = 0.0, None
                f.row[FC.FC_JITTER_NS] = 0
            self.emit(P.Cleared(ports=list(cmd.ports or []), streams=cmd.streams, id=cmd.id))
        elif isinstance(cmd, P.Ping):
            self.emit(P.Pong(t_ns=time.monotonic_ns(), id=cmd.id))
        elif isinstance(cmd, P.Quit):
            self.quit = True
            self.emit(P.Bye(id=cmd.id))
        else:
            raise ValueError(f"{cmd.KIND}: not a flow worker command")

    def read_commands(self) -> None:
        try:
            data = os.read(self.in_fd, 65536)
        except BlockingIOError:
            return
        if not data:
            self.quit = True  # the engine closed the pipe
            return
        self._inbuf += data
        while b"\n" in self._inbuf:
            line, self._inbuf = self._inbuf.split(b"\n", 1)
            if not line.strip():
                continue
            cmd = None
            try:
                cmd = P.decode_command(line)
                self.handle(cmd)
            except (ValueError, TypeError, OSError) as e:
                kind = cmd.KIND if cmd is not None else None
                self.error(str(e), cmd=kind, id=cmd.id if cmd is not None else None)

    # ------------------------------------------------------------------ the loop
    def turn(self) -> float:
        """Send what is due, keep the gauges fresh; seconds the loop may sleep."""
        now_ns = time.monotonic_ns()
        wait = MAX_SLEEP_S
        for f in self.flows:
            on = f.is_on(now_ns)
            f.tick_active(now_ns, on)
            f.read_info(now_ns)
            if f.app is not None:
                wait = min(wait, f.app.turn(now_ns, on))
            elif f.prog.protocol == "tcp":
                self._tcp_writable(f, on)
            elif on:
                err, nxt = f.send_udp(now_ns)
                self._flow_error(f, err)
                wait = min(wait, nxt)
            if f.running and f.stopping_until is None and f.done_sending(now_ns):
                self._maybe_tx_done(f.prog.port, now_ns)
        if self.cv is not None:
            self.cv.arr[FC.H_HEARTBEAT_NS] = now_ns
        self._finish_stops(time.monotonic())
        if any(f.stopping_until is not None for f in self.flows):
            wait = min(wait, 0.01)
        return wait

    def _tcp_writable(self, f: Flow, on: bool) -> None:
        want = on and f.snd is not None
        if want and f.prog.id not in self.writing:
            assert f.snd is not None
            self.sel.register(f.snd, selectors.EVENT_WRITE, f)
            self.writing.add(f.prog.id)
        elif not want and f.prog.id in self.writing:
            self._stop_writing(f)

    def _maybe_tx_done(self, port: str, now_ns: int) -> None:
        mine = [g for g in self.flows if g.prog.port == port]
        if port not in self.tx_done_sent and all(g.done_sending(now_ns) for g in mine):
            self.tx_done_sent.add(port)
            self.emit(P.TxDone(port=port))

    def _flow_error(self, f: Flow, err: str | None) -> None:
        if err is None:
            return
        f.row[FC.FC_ERRORS] += 1
        f.row[FC.FC_STATE] = FC.STATE_FAILED
        f.running = False
        self._unwatch(f)
        self.error(f"flow {f.prog.name}: {err}", port=f.prog.port, flow=f.prog.id)

    def run(self) -> int:
        os.set_blocking(self.in_fd, False)
        self.sel.register(self.in_fd, selectors.EVENT_READ, None)
        while not self.quit:
            wait = self.turn()
            for key, events in self.sel.select(wait):
                f = key.data
                if f is None:
                    self.read_commands()
                    continue
                if isinstance(f, AppFlow):
                    f.poll(time.monotonic_ns())
                    continue
                if events & selectors.EVENT_READ and key.fileobj is f.rcv:
                    now_ns = time.monotonic_ns()
                    self._flow_error(f, f.receive(self.buf, f.is_on(now_ns)))
                    if f.eof and f.prog.id in self.reading:
                        self.reading.discard(f.prog.id)
                        self.sel.unregister(f.rcv)
                elif events & selectors.EVENT_WRITE and f.is_on(time.monotonic_ns()):
                    self._flow_error(f, f.send_tcp())
        for f in self.flows:
            f.close()
            if f.app is not None:
                f.app.close()
        return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    return run_worker(
        "python -m tgen_tui.worker.flows", __doc__, lambda core: FlowWorker(core=core),
        "flow worker", argv,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
