"""Request/response connections inside the flow worker: many short kernel TCP (or UDP)
connections from a range of client addresses to one server, through the DUT.

An :class:`AppFlow` is one ``transport:`` entry with ``app:`` (its
:class:`~tgen_tui.packets.appprogram.AppProgram`), alone in its flow worker
(:mod:`tgen_tui.worker.flows`), which holds it like a bulk flow: it opens the server side
in the receiver's namespace at configure, then moves into the client's namespace for good
(the client sockets are made there without a ``setns`` each), :meth:`AppFlow.begin` at the port's start,
:meth:`AppFlow.end` at its stop. The AppFlow has its own epoll selector, whose fd the
worker watches; :meth:`AppFlow.turn` opens the connections that are due (a rate against
absolute due times from the start, or enough to keep the concurrent target open),
:meth:`AppFlow.poll` serves the sockets that are ready, and the timeouts run from
deadline queues (each phase of a connection appends its deadline; all have one timeout,
so the queue is in order), never from a scan of every connection.

A client connection: ``connect`` from the next client address (round robin;
``IP_BIND_ADDRESS_NO_PORT``, so the port is picked for the 4-tuple), writable = established
(its setup time: connect called to writable, the client's clock), write the request, read
the response (by its length), ``per_connection`` times (``think`` between), then close
with FIN or RST. Failures are counted by reason: refused (RST or ICMP unreachable to the
SYN), reset (after establishment, or the server's FIN before the response), timed out (no
connect or no response within the app's timeout), and the tester's own limits (no local
port or address, no fd). The server answers each request's bytes with the response; it
counts accepted connections and responses written. Setup times and transaction times go
per loop turn, as one numpy batch, into the fixed-bucket histograms of the counter row
(the frame workers' log-linear geometry), never into per-sample lists.

Imports: the standard library, numpy and this package (``packets.appprogram``).
"""

from __future__ import annotations

import errno
import heapq
import os
import resource
import selectors
import socket
import struct
from collections import deque

import numpy as np

from tgen_tui.packets.appprogram import (
    SIZE_FIELD,
    messages,
    response_length,
    size_asked,
    sized_request,
    sized_response,
)
from tgen_tui.packets.flowprogram import FlowProgram
from tgen_tui.worker import flowcounters as FC
from tgen_tui.worker.netns import enter, netns
from tgen_tui.worker.rxstats import lat_bucket

IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h
LINGER_RST = struct.pack("ii", 1, 0)
BURST = 256  # connections opened per turn at most (then the sockets get a look)
CATCH_UP_S = 0.005  # a rate load's turn opens at most this long's worth (a late sender
# catches up over the next turns, not in one burst of SYNs)
ACCEPTS = 128  # accept calls per readable listener
MAX_WAIT_S = 0.05
BACKLOG = 65535
LOCAL_BACKOFF_S = 0.01  # after a failure of the tester's own (EMFILE, EADDRNOTAVAIL)
CONNECTING, REQUESTING, READING, THINKING = range(4)
_REFUSED = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH}
_RESET = {errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED}
_LOCAL = {errno.EADDRNOTAVAIL, errno.EADDRINUSE, errno.EMFILE, errno.ENFILE, errno.ENOBUFS}
_LISTEN = object()  # selector data of the server's listening (or UDP) socket
SYSCTL_ROOT = "/proc/sys/net"
TCPI_TOTAL_RETRANS = 100  # struct tcp_info: 8 u8, then u32 tcpi_total_retrans is the 24th
TCPI_U32 = struct.Struct("<I")


def fail_slot(code: int | None) -> int:
    """The counter slot of a failed connection's errno (None: timed out)."""
    if code is None or code == errno.ETIMEDOUT:
        return FC.FC_FAIL_TIMEOUT
    if code in _REFUSED:
        return FC.FC_FAIL_REFUSED
    if code in _LOCAL:
        return FC.FC_FAIL_LOCAL
    return FC.FC_FAIL_RESET


class Conn:
    """A client connection: its socket, phase and progress."""

    __slots__ = ("sock", "state", "t0", "t_req", "got", "off", "done", "gen", "req", "want")

    def __init__(self, sock: socket.socket, t0: int, gen: int) -> None:
        self.sock = sock
        self.req, self.want = b"", 0  # this transaction's request, its response's length
        self.state = CONNECTING
        self.t0 = self.t_req = t0
        self.got = self.off = self.done = 0
        self.gen = gen  # new at each phase, unique in the flow: older deadlines are stale


class Served:
    """A server connection: request bytes read, responses owed and the one being written."""

    __slots__ = ("sock", "got", "owed", "off", "mask", "head", "sizes", "cur")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.got = self.owed = self.off = 0
        self.mask = selectors.EVENT_READ
        self.head = bytearray()  # drawn sizes: the request's first bytes so far
        self.sizes: deque[int] = deque()  # the sizes the owed responses asked for
        self.cur: bytes | None = None  # the response being written (drawn sizes)


class AppFlow:
    """One request/response entry: its server, its client connections, its counters."""

    def __init__(self, prog: FlowProgram, row: np.ndarray) -> None:
        assert prog.app is not None
        self.prog, self.app, self.row = prog, prog.app, row
        self.req, self.resp = messages(prog.app, prog.dst_ip)
        self.udp = prog.protocol == "udp"
        self.clients = prog.app.client_addresses()
        self.dst = (prog.dst_ip, prog.dst_port)
        self.sel = selectors.EpollSelector()
        self.conns: dict[int, Conn] = {}
        self.deadlines: deque[tuple[int, int, int]] = deque()  # (ns, fd, gen)
        self.thinking: list[tuple[int, int, int]] = []  # a heap: drawn pauses end out of order
        self.lst: socket.socket | None = None
        self.running = False
        self.t0_ns = self.opened = self.next_client = self.phases = self.due_base = 0
        self.timeout_ns = int(prog.app.timeout_s * 1e9)
        self.think_ns = int(prog.app.think_s * 1e9)
        self.think_law = [int(x * 1e9) for x in prog.app.think_cycle]  # drawn, used in turn
        self.think_i = 0
        self.resp_law = list(prog.app.response_cycle)  # drawn response sizes, used in turn
        self.resp_i = 0
        self.size_end = SIZE_FIELD.get(prog.app.kind, (0, 0))[1]
        self.buf = bytearray(max(65536, len(self.resp), len(self.req)))
        self.setup_ns: list[int] = []
        self.txn_ns: list[int] = []
        self.notes: list[str] = []

    # ------------------------------------------------------------------ setup
    def fileno(self) -> int:
        return self.sel.fileno()

    def open_server(self) -> None:
        """The server's socket in the receiver's namespace, and the tester's limits."""
        p = self.prog
        with netns(p.dst_netns):
            if not self.udp:
                self.notes += raise_sysctls(
                    {"core/somaxconn": BACKLOG, "ipv4/tcp_max_syn_backlog": BACKLOG},
                    p.dst_netns,
                )
            kind = socket.SOCK_DGRAM if self.udp else socket.SOCK_STREAM
            self.lst = socket.socket(socket.AF_INET, kind | socket.SOCK_NONBLOCK)
        self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # the entry's other workers listen on the same port: the kernel spreads over them
        self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if self.udp:
            self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.lst.bind(self.dst)
        if not self.udp:
            self.lst.listen(BACKLOG)
        self.sel.register(self.lst, selectors.EVENT_READ, _LISTEN)
        if p.src_netns:  # for good: the client sockets are made here, without a setns each
            enter(p.src_netns)
        self.notes += raise_sysctls({"ipv4/ip_local_port_range": "1024\t65535"}, p.src_netns)
        self.notes += raise_nofile(self.fd_need())
        for ip in (self.clients[0], self.clients[-1]):  # the range is local on the client host
            self._probe_bind(ip)

    def fd_need(self) -> int:
        """File descriptors the load needs: both ends of each open connection, and room."""
        a = self.app
        open_ = a.target if a.mode == "concurrent" else a.conn_rate() * (a.timeout_s + 1.0)
        return int(2 * open_ + 1024)

    def _probe_bind(self, ip: str) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((ip, 0))
        except OSError as e:
            raise OSError(
                e.errno,
                f"flow {self.prog.name}: client address {ip} is not local in netns "
                f"{self.prog.src_netns} ({e.strerror}): the clients range must be an "
                "address (or a local route) of the client host",
            ) from None
        finally:
            s.close()

    def close(self) -> None:
        self.abort_all()
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
        self.sel.close()
        self.lst = None

    # ------------------------------------------------------------------ schedule
    def begin(self, t0_ns: int) -> None:
        self.t0_ns, self.opened, self.running = t0_ns, 0, True
        self.due_base = int(self.row[FC.FC_DUE])  # a restart's due count goes on

    def end(self) -> None:
        """No new connections; those open finish (or the drain's end aborts them)."""
        self.running = False

    def idle(self) -> bool:
        return not self.conns

    def target_now(self, now_ns: int) -> float:
        return self.app.target_at((now_ns - self.t0_ns) / 1e9)

    # ------------------------------------------------------------------ the loop
    def turn(self, now_ns: int, on: bool) -> float:
        """Open what is due, time out what is late, flush the histograms; seconds to wait."""
        wait = MAX_WAIT_S
        if self.running and on:
            wait = self._open_due(now_ns)
        self._expire(now_ns)
        self._wake_thinkers(now_ns)
        if self.thinking:
            wait = min(wait, max(0.0, (self.thinking[0][0] - now_ns) / 1e9))
        if self.deadlines:
            wait = min(wait, max(0.0, (self.deadlines[0][0] - now_ns) / 1e9))
        self.flush()
        self.row[FC.FC_TARGET] = round(self.target_now(now_ns) * 1000) if self.running else 0
        return wait

    def _open_due(self, now_ns: int) -> float:
        a = self.app
        rel = (now_ns - self.t0_ns) / 1e9
        if a.mode == "concurrent":
            want = int(a.target_at(rel)) - len(self.conns)
            cap = BURST
            n = min(max(0, want), cap)
            wait = 0.0 if want > BURST else MAX_WAIT_S
        else:  # a late turn catches up by at most CATCH_UP_S worth of connections
            rate = a.conn_rate() * (1.0 if rel >= a.ramp_s else max(rel / a.ramp_s, 0.01))
            cap = min(BURST, max(4, int(rate * CATCH_UP_S)))
            due = a.due_connections(rel)
            self.row[FC.FC_DUE] = self.due_base + due  # the asked rate, for "achieved"
            n = min(max(0, due - self.opened), cap)
            wait = min(MAX_WAIT_S, 1.0 / rate) if rate > 0 else MAX_WAIT_S
        for _ in range(n):
            if not self.connect(now_ns):  # the tester's own limit: try again a little later
                return LOCAL_BACKOFF_S
        return 0.0 if n == cap else wait

    def connect(self, now_ns: int) -> bool:
        """One new client connection from the next client address; False when the
        tester's own limit (no fd, port or address) stopped it."""
        ip = self.clients[self.next_client]
        self.next_client = (self.next_client + 1) % len(self.clients)
        self.opened += 1
        r = self.row
        r[FC.FC_ATTEMPTED] += 1
        kind = socket.SOCK_DGRAM if self.udp else socket.SOCK_STREAM
        try:
            s = socket.socket(socket.AF_INET, kind | socket.SOCK_NONBLOCK)
        except OSError as e:
            r[fail_slot(e.errno)] += 1
            return fail_slot(e.errno) != FC.FC_FAIL_LOCAL
        try:
            if not self.udp:
                s.setsockopt(socket.SOL_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            s.bind((ip, 0))
            code = s.connect_ex(self.dst)
        except OSError as e:
            code = e.errno or errno.EINVAL
        if code not in (0, errno.EINPROGRESS):
            s.close()
            r[fail_slot(code)] += 1
            return fail_slot(code) != FC.FC_FAIL_LOCAL
        c = Conn(s, now_ns, self._gen())
        self.conns[s.fileno()] = c
        r[FC.FC_CONCURRENT] = len(self.conns)
        if self.udp:  # no handshake: established at once, its request goes now
            r[FC.FC_ESTABLISHED] += 1
            self.sel.register(s, selectors.EVENT_READ, c)
            self._request(c, now_ns)
        else:
            self.sel.register(s, selectors.EVENT_WRITE, c)
            self.deadlines.append((now_ns + self.timeout_ns, s.fileno(), c.gen))
        return True

    def _gen(self) -> int:
        """A phase number unique in this flow (an fd is reused by the next connection)."""
        self.phases += 1
        return self.phases

    def poll(self, now_ns: int) -> None:
        """Serve every socket that is ready (the worker saw this selector's fd readable)."""
        for key, ev in self.sel.select(0):
            d = key.data
            if d is _LISTEN:
                self._serve_udp() if self.udp else self._accept()
            elif isinstance(d, Served):
                self._server_io(d, ev)
            else:
                self._client_io(d, ev, now_ns)

    # ------------------------------------------------------------------ client side
    def _client_io(self, c: Conn, ev: int, now_ns: int) -> None:
        if c.state == CONNECTING:
            code = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                self._fail(c, code)
                return
            self.row[FC.FC_ESTABLISHED] += 1
            self.setup_ns.append(now_ns - c.t0)
            self._request(c, now_ns)
        elif c.state == REQUESTING:
            self._send(c, now_ns)
        elif c.state == READING:
            self._read(c, now_ns)

    def _request(self, c: Conn, now_ns: int) -> None:
        c.state, c.off, c.got, c.t_req = REQUESTING, 0, 0, now_ns
        if self.resp_law:  # the next drawn size, named in the request
            size = self.resp_law[self.resp_i]
            self.resp_i = (self.resp_i + 1) % len(self.resp_law)
            c.req, c.want = (
                sized_request(self.app, self.prog.dst_ip, size),
                response_length(self.app, size),
            )
        else:
            c.req, c.want = self.req, len(self.resp)
        c.gen = self._gen()
        self.deadlines.append((now_ns + self.timeout_ns, c.sock.fileno(), c.gen))
        self._send(c, now_ns)

    def _send(self, c: Conn, now_ns: int) -> None:
        try:
            n = c.sock.send(memoryview(c.req)[c.off :])
        except BlockingIOError:
            n = 0
        except OSError as e:
            self._fail(c, e.errno)
            return
        c.off += n
        self.row[FC.FC_TX_BYTES] += n
        want = selectors.EVENT_WRITE
        if c.off >= len(c.req):
            c.state, want = READING, selectors.EVENT_READ
        if not self.udp:
            self.sel.modify(c.sock, want, c)

    def _read(self, c: Conn, now_ns: int) -> None:
        try:
            n = c.sock.recv_into(self.buf)
        except BlockingIOError:
            return
        except OSError as e:
            self._fail(c, e.errno)
            return
        if n == 0:  # the server closed before the response was complete
            self._fail(c, errno.ECONNRESET)
            return
        self.row[FC.FC_RX_BYTES] += n
        if self.running:
            self.row[FC.FC_RX_BYTES_DUE] += n
        c.got += n
        if c.got < c.want and not self.udp:
            return
        self.row[FC.FC_TRANSACTIONS] += 1
        self.txn_ns.append(now_ns - c.t_req)
        c.done += 1
        c.gen = self._gen()
        if c.done >= self.app.per_connection:
            self._close(c, self.app.close_rst)
        elif (think := self._think()) > 0:
            c.state = THINKING
            if not self.udp:
                self.sel.modify(c.sock, selectors.EVENT_READ, c)
            self._sleep(now_ns + think, c.sock.fileno(), c.gen)
        else:
            self._request(c, now_ns)

    def _think(self) -> int:
        """The next pause (ns): the constant, or the law's cycle's next draw."""
        if not self.think_law:
            return self.think_ns
        self.think_i = (self.think_i + 1) % len(self.think_law)
        return self.think_law[self.think_i]

    def _sleep(self, until_ns: int, fd: int, gen: int) -> None:
        heapq.heappush(self.thinking, (until_ns, fd, gen))

    def _wake_thinkers(self, now_ns: int) -> None:
        q = self.thinking
        while q and q[0][0] <= now_ns:
            _, fd, gen = heapq.heappop(q)
            c = self.conns.get(fd)
            if c is not None and c.gen == gen and c.state == THINKING:
                self._request(c, now_ns)

    def _expire(self, now_ns: int) -> None:
        """Connections whose connect or response is past the timeout fail as timed out."""
        q = self.deadlines
        while q and q[0][0] <= now_ns:
            _, fd, gen = q.popleft()
            c = self.conns.get(fd)
            if c is not None and c.gen == gen and c.state != THINKING:
                self._fail(c, None)

    def _fail(self, c: Conn, code: int | None) -> None:
        self.row[fail_slot(code)] += 1
        self._drop(c, rst=True)

    def _close(self, c: Conn, rst: bool) -> None:
        self.row[FC.FC_CLOSED] += 1
        self._drop(c, rst)

    def _drop(self, c: Conn, rst: bool) -> None:
        fd = c.sock.fileno()
        self.conns.pop(fd, None)
        self.sel.unregister(c.sock)
        if not self.udp:
            self.row[FC.FC_RETRANS] += retransmits(c.sock)
            if rst:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
        c.sock.close()
        self.row[FC.FC_CONCURRENT] = len(self.conns)

    def abort_all(self) -> None:
        """The drain ended: the connections still open close with RST (counted closed
        and aborted); a connect still unanswered then has timed out (a CPS search counts
        a SYN the DUT dropped near the end as the failure it is)."""
        for c in list(self.conns.values()):
            if c.state == CONNECTING and not self.udp:
                self._fail(c, None)
                continue
            self.row[FC.FC_ABORTED] += 1
            self._close(c, rst=True)
        self.deadlines.clear()
        self.thinking.clear()

    # ------------------------------------------------------------------ server side
    def _accept(self) -> None:
        assert self.lst is not None
        for _ in range(ACCEPTS):
            try:
                s, _addr = self.lst.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # ECONNABORTED, EMFILE: the client side counts what it saw
            s.setblocking(False)
            self.row[FC.FC_ACCEPTED] += 1
            self.sel.register(s, selectors.EVENT_READ, Served(s))

    def _server_io(self, d: Served, ev: int) -> None:
        if ev & selectors.EVENT_READ:
            try:
                n = d.sock.recv_into(self.buf)
            except BlockingIOError:
                n = -1
            except OSError:
                n = 0
            if n == 0:
                self.sel.unregister(d.sock)
                d.sock.close()
                return
            if n > 0 and self.resp_law:
                self._take(d, n)
            elif n > 0:
                d.got += n
                q, d.got = divmod(d.got, len(self.req))
                d.owed += q
        self._respond(d)

    def _take(self, d: Served, n: int) -> None:
        """Drawn sizes: ``n`` request bytes in ``buf``; each request's first bytes name its
        response's size (requests have one length: their boundaries are known)."""
        size, end, i = len(self.req), self.size_end, 0
        while i < n:
            take = min(n - i, size - d.got)
            if d.got < end:
                d.head += self.buf[i : i + min(take, end - d.got)]
            d.got, i = d.got + take, i + take
            if d.got == size:
                d.sizes.append(size_asked(self.app, bytes(d.head)))
                d.head, d.got, d.owed = bytearray(), 0, d.owed + 1

    def _respond(self, d: Served) -> None:
        while d.owed:
            resp = self.resp
            if self.resp_law:
                resp = d.cur = d.cur or sized_response(self.app, d.sizes[0])
            try:
                n = d.sock.send(memoryview(resp)[d.off :])
            except BlockingIOError:
                break
            except OSError:
                d.owed = 0
                d.sizes.clear()
                break
            d.off += n
            if d.off < len(resp):
                break
            d.off, d.owed = 0, d.owed - 1
            if self.resp_law:
                d.cur = None
                d.sizes.popleft()
            self.row[FC.FC_SERVED] += 1
        want = selectors.EVENT_READ | (selectors.EVENT_WRITE if d.owed else 0)
        if want != d.mask:
            d.mask = want
            self.sel.modify(d.sock, want, d)

    def _serve_udp(self) -> None:
        assert self.lst is not None
        for _ in range(ACCEPTS):
            try:
                n, addr = self.lst.recvfrom_into(self.buf)
            except BlockingIOError:
                return
            except OSError:
                continue
            self.row[FC.FC_ACCEPTED] += 1
            try:
                self.lst.sendto(self.resp, addr)
            except OSError:
                continue
            self.row[FC.FC_SERVED] += 1

    # ------------------------------------------------------------------ figures
    def flush(self) -> None:
        """This turn's setup and transaction times into the row's histograms (one batch)."""
        r = self.row
        for buf, base, total, low, top in (
            (self.setup_ns, FC.FC_SETUP_HIST, FC.FC_SETUP_SUM_NS, FC.FC_SETUP_MIN_NS,
             FC.FC_SETUP_MAX_NS),
            (self.txn_ns, FC.FC_TXN_HIST, FC.FC_TXN_SUM_NS, FC.FC_TXN_MIN_NS, FC.FC_TXN_MAX_NS),
        ):  # fmt: skip
            if not buf:
                continue
            v = np.fromiter(buf, dtype=np.int64, count=len(buf))
            buf.clear()
            np.add.at(r[base : base + FC.HIST_BUCKETS], lat_bucket(v), 1)
            r[total] += int(v.sum())
            lo = int(v.min())
            r[low] = lo if r[low] == 0 else min(int(r[low]), lo)
            r[top] = max(int(r[top]), int(v.max()))


def retransmits(sock: socket.socket) -> int:
    """tcpi_total_retrans of a TCP socket (SYN retransmits included), 0 if unreadable."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCPI_TOTAL_RETRANS + 4)
    except OSError:
        return 0
    return TCPI_U32.unpack_from(raw, TCPI_TOTAL_RETRANS)[0] if len(raw) >= 104 else 0


def raise_sysctls(want: dict[str, int | str], where: str | None) -> list[str]:
    """Raise per-namespace sysctls (the calling thread's namespace) that are below
    ``want`` (an int, or a port range "lo\\thi" that should be at least as wide); what was
    changed, as notes for the log. Only in a namespace of the tester's (``where``): the
    host's own settings are left alone."""
    if not where:
        return [f"left net.{k.replace('/', '.')} as it is (the host's own namespace)" for k in want]
    notes = []
    for key, value in want.items():
        path = os.path.join(SYSCTL_ROOT, key)
        try:
            with open(path, encoding="ascii") as f:
                cur = f.read().split()
            if isinstance(value, int):
                if int(cur[0]) >= value:
                    continue
            else:
                lo, hi = (int(x) for x in str(value).split())
                if int(cur[0]) <= lo and int(cur[1]) >= hi:
                    continue
            with open(path, "w", encoding="ascii") as f:
                f.write(str(value))
        except (OSError, ValueError, IndexError) as e:
            notes.append(f"could not raise net.{key.replace('/', '.')} in {where}: {e}")
            continue
        was = " ".join(cur)
        now = str(value).replace("\t", " ")
        notes.append(f"raised net.{key.replace('/', '.')} {was} -> {now} in netns {where}")
    return notes


def raise_nofile(need: int) -> list[str]:
    """RLIMIT_NOFILE of this process up to ``need`` (root may raise the hard limit too)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(hard, need)))
    except (OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return [
            f"RLIMIT_NOFILE {soft} -> {hard}, the hard limit ({need} wanted, not allowed "
            f"here): at most about {(hard - 1024) // 2:,} connections open, both ends in "
            "this worker; beyond, connects fail as the tester's own limit (local)"
        ]
    return [f"raised RLIMIT_NOFILE {soft} -> {need} for this flow worker"]


__all__ = ["AppFlow", "fail_slot", "raise_nofile", "raise_sysctls"]
