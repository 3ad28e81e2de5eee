"""The transmit path: whole batches of frames to the kernel, one syscall per batch.

Three implementations with the same interface (``send(buf, lengths) -> sent``):

- :class:`MmsgTx` (default): ``sendmmsg(2)`` via ctypes. The ``mmsghdr``/``iovec`` arrays
  are numpy structured arrays allocated once; per batch only the ``iov_base``/``iov_len``
  columns are rewritten, vectorised, to point at the rows of the batch buffer. No
  per-frame Python. Measured faster on veth (BASELINES.md; benchmarks/results/).
- :class:`RingTx`: ``PACKET_TX_RING`` (TPACKET_V2): frames are copied into ring slots
  with one fancy-indexed numpy assignment, their status set to SEND_REQUEST, and the
  ring flushed with one ``send()``.
- :class:`XdpTx`: an AF_XDP socket (copy mode): frames copied into UMEM chunks, their
  descriptors posted, one ``sendto`` kick; it bypasses the qdisc and the packet taps.

The AF_PACKET sockets are ``SOCK_RAW``, bound to the interface with protocol 0, so
they receive nothing. Sends use ``MSG_DONTWAIT``: on ``EAGAIN``/``ENOBUFS`` (or a partial
send) the remaining frames are retried after a short ``poll(POLLOUT)``, for at most
``retry_s`` in all; what is still unsent then is *returned* to the caller (never
dropped silently, never blocking forever). ``errors`` counts the failed attempts.
Persistent errors (interface gone, ``ENETDOWN``, ``EMSGSIZE``) raise ``OSError``.

Imports: the standard library and numpy only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import mmap
import os
import select
import socket
import struct
import time

import numpy as np

from tgen_tui.worker.kernel import (
    MSG_DONTWAIT,
    PACKET_LOSS,
    PACKET_TX_RING,
    PACKET_VERSION,
    SOL_PACKET,
    TPACKET_V2,
    libc,
)

TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 1
TP_STATUS_SENDING = 2
TP_STATUS_WRONG_FORMAT = 4
TPACKET2_HDR_LEN = 32  # sizeof(struct tpacket2_hdr)
TX_DATA_OFF = 32  # TPACKET2_HDRLEN - sizeof(sockaddr_ll) = TPACKET_ALIGN(32) + 20 - 20

_TRANSIENT = (errno.EAGAIN, errno.ENOBUFS, errno.EINTR)

_libc = libc
_libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_libc.sendmmsg.restype = ctypes.c_int
_libc.sendmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.sendmsg.restype = ctypes.c_ssize_t


class _Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    """struct msghdr, for one frame's sendmsg(2) (the timer pacer's lone frames)."""

    _fields_ = [
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(_Iov)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


# struct iovec { void *iov_base; size_t iov_len; }                      (x86_64 / aarch64)
IOVEC = np.dtype([("base", "<u8"), ("len", "<u8")])
# struct mmsghdr { struct msghdr msg_hdr (56 bytes); unsigned int msg_len; } -> 64 bytes
MMSGHDR = np.dtype(
    {
        "names": ["name", "namelen", "iov", "iovlen", "control", "controllen", "flags", "msg_len"],
        "formats": ["<u8", "<u4", "<u8", "<u8", "<u8", "<u8", "<i4", "<u4"],
        "offsets": [0, 8, 16, 24, 32, 40, 48, 56],
        "itemsize": 64,
    }
)


def open_packet_socket(interface: str, protocol: int = 0) -> socket.socket:
    """An AF_PACKET/SOCK_RAW socket bound to ``interface`` (in the current netns)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(protocol))
    try:
        s.bind((interface, protocol))
    except OSError:
        s.close()
        raise
    return s


def _retry_deadline(deadline: float | None, retry_s: float) -> float | None:
    """After a failed send attempt: when to give up on the stall (``retry_s`` after the
    first failure), or None once that time has passed."""
    now = time.monotonic()
    if deadline is None:
        return now + retry_s
    return None if now >= deadline else deadline


SIOCOUTQ = 0x5411  # TIOCOUTQ: bytes the socket's frames still hold in the kernel


class _TxBase:
    kind = "base"

    def __init__(self, interface: str, max_batch: int = 1024, retry_s: float = 0.05):
        self.interface = interface
        self.max_batch = int(max_batch)
        self.retry_s = float(retry_s)
        self.errors = 0  # failed send attempts (EAGAIN/ENOBUFS/partial), frames retried
        self.sock = open_packet_socket(interface)
        self.fd = self.sock.fileno()
        self._poll = select.poll()
        self._poll.register(self.fd, select.POLLOUT)

    def grow_sndbuf(self, size: int = 8 << 20) -> None:
        """A send buffer for frames a pacing qdisc holds (they count against it until sent)."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, size)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)

    def outq(self) -> int:
        """Bytes of this socket's frames the kernel still holds (SIOCOUTQ: the truesize
        of the skbs not yet freed): 0 once a pacing qdisc has released every frame."""
        try:
            return struct.unpack("i", fcntl.ioctl(self.fd, SIOCOUTQ, b"\0\0\0\0"))[0]
        except OSError:
            return 0

    def _wait_writable(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left > 0:
            self._poll.poll(min(1.0, max(0.0, left * 1000.0)))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------- TX timestamps
SO_TIMESTAMPING = 37  # SO_TIMESTAMPING_OLD = SCM_TIMESTAMPING (64-bit time_t on x86_64)
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_ID = 1 << 7
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
PACKET_TX_TIMESTAMP = 16
MSG_ERRQUEUE = 0x2000
CMSG_SPACE_U32 = 24  # CMSG_SPACE(sizeof(u32))
ERRQ_CTRL = 96  # CMSG_SPACE(3 * timespec) + CMSG_SPACE(sock_extended_err)
TS_RING = 1 << 16  # sampled frames remembered until their timestamp is read
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
ERRQ_RCVBUF = 16 << 20

_libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                           ctypes.c_void_p]  # fmt: skip
_libc.recvmmsg.restype = ctypes.c_int


class MmsgTx(_TxBase):
    """``sendmmsg(2)`` of a whole batch whose iovecs point at the rows of the batch buffer.

    With :meth:`enable_tx_timestamps` the kernel also reports a software transmit time
    for every k-th frame (``SO_TIMESTAMPING``: the per-message control message asks for
    it, ``OPT_ID`` numbers the reports, ``OPT_TSONLY`` keeps the payload out of them);
    :meth:`read_tx_timestamps` drains the reports in batches with ``recvmmsg``.
    """

    kind = "sendmmsg"

    def __init__(self, interface: str, max_batch: int = 1024, retry_s: float = 0.05):
        super().__init__(interface, max_batch, retry_s)
        n = self.max_batch
        self._iov = np.zeros(n, dtype=IOVEC)
        self._msg = np.zeros(n, dtype=MMSGHDR)
        self._msg["iov"] = self._iov.ctypes.data + np.arange(n, dtype=np.uint64) * IOVEC.itemsize
        self._msg["iovlen"] = 1
        self._msg_addr = self._msg.ctypes.data
        self._rows = np.arange(n, dtype=np.uint64)
        self.ts_every = 0
        self._one_iov = _Iov()
        self._one = _Msghdr(None, 0, ctypes.pointer(self._one_iov), 1, None, 0, 0)
        self._one_addr = ctypes.addressof(self._one)
        self._cmsg_addr = 0

    # ------------------------------------------------------------------ TX timestamps
    def enable_tx_timestamps(self, every: int = 1, max_read: int = 1024) -> None:
        """Have the kernel stamp every ``every``-th frame when the driver takes it.

        The reports are CLOCK_REALTIME nanoseconds (``read_tx_timestamps``). Frames are
        counted from this call on; ``send(..., tags=...)`` names each frame (e.g. stream
        and sequence number) so that a report can be joined to its frame.
        """
        if every < 1:
            raise ValueError("every must be >= 1")
        flags = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
        # reports wait in the error queue, which counts against the receive buffer
        # (~1 KiB each): room for a few batches' worth between two reads
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, ERRQ_RCVBUF)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, ERRQ_RCVBUF)
        self.ts_every = int(every)
        self._ts_frames = 0  # frames sent since enabling (the sampling phase)
        self._ts_ids = 0  # timestamped frames sent = the kernel's next OPT_ID
        self._ts_tags = np.zeros(TS_RING, dtype=np.uint64)
        c = np.zeros(CMSG_SPACE_U32, dtype=np.uint8)
        hdr = struct.pack(
            "QiiI", 20, socket.SOL_SOCKET, SO_TIMESTAMPING, SOF_TIMESTAMPING_TX_SOFTWARE
        )
        c[: len(hdr)] = np.frombuffer(hdr, dtype=np.uint8)
        self._cmsg = c
        self._cmsg_addr = c.ctypes.data
        m = int(max_read)
        self._eq_ctrl = np.zeros((m, ERRQ_CTRL), dtype=np.uint8)
        self._eq_msg = np.zeros(m, dtype=MMSGHDR)
        self._eq_msg["control"] = (
            self._eq_ctrl.ctypes.data + np.arange(m, dtype=np.uint64) * ERRQ_CTRL
        )
        self.ts_lost = 0  # reports whose frame fell out of the tag ring before being read

    def read_tx_timestamps(self) -> tuple[np.ndarray, np.ndarray]:
        """Drain the error queue: (tags uint64, kernel transmit time ns int64 CLOCK_REALTIME)."""
        tags, times = [], []
        m = len(self._eq_msg)
        while True:
            self._eq_msg["controllen"] = ERRQ_CTRL
            self._eq_msg["msg_len"] = 0
            r = _libc.recvmmsg(
                self.fd, self._eq_msg.ctypes.data, m, MSG_ERRQUEUE | MSG_DONTWAIT, None
            )
            if r <= 0:
                break
            c = self._eq_ctrl[:r]
            u32 = c.view(np.uint32)
            ok = (u32[:, 3] == SO_TIMESTAMPING) & (u32[:, 19] == PACKET_TX_TIMESTAMP)
            ok &= self._eq_msg["controllen"][:r] >= ERRQ_CTRL
            i64 = c.view(np.int64)
            ns = i64[:, 2] * 1_000_000_000 + i64[:, 3]
            ids = u32[:, 23].astype(np.int64)  # sock_extended_err.ee_data (the OPT_ID)
            ok &= ns > 0
            ids, ns = ids[ok], ns[ok]
            # the kernel's id is 32 bits: rebuild it near the count of stamped frames sent
            full = self._ts_ids - ((self._ts_ids - ids) & 0xFFFFFFFF)
            keep = (full >= 0) & (self._ts_ids - full <= TS_RING)
            self.ts_lost += int(len(full) - keep.sum())
            tags.append(self._ts_tags[full[keep] % TS_RING])
            times.append(ns[keep])
            if r < m:
                break
        if not tags:
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        return np.concatenate(tags), np.concatenate(times)

    def _mark(self, n: int, rows: np.ndarray | None = None) -> np.ndarray | None:
        """Point the sampled messages of this batch (``rows``, else every ts_every-th frame)
        at the timestamp request; their rows."""
        if not self.ts_every:
            return None
        if rows is None:
            first = (-self._ts_frames) % self.ts_every
            rows = np.arange(first, n, self.ts_every)
        msg = self._msg
        msg["control"][:n] = 0
        msg["controllen"][:n] = 0
        msg["control"][rows] = self._cmsg.ctypes.data
        msg["controllen"][rows] = CMSG_SPACE_U32
        return rows

    def _record(
        self, rows: np.ndarray | None, done: int, tags: np.ndarray | None, per_row: bool
    ) -> None:
        if rows is None:
            return
        sent = rows < done
        if per_row:  # one tag per stamped row
            t = tags[sent]
            rows = rows[sent]
        else:
            rows = rows[sent]
            t = (
                (np.uint64(self._ts_frames) + rows.astype(np.uint64))
                if tags is None
                else tags[rows]
            )
        self._ts_tags[(self._ts_ids + np.arange(len(rows))) % TS_RING] = t
        self._ts_ids += len(rows)
        self._ts_frames += done

    def send(
        self,
        buf: np.ndarray,
        lengths: np.ndarray,
        tags: np.ndarray | None = None,
        stamp_rows: np.ndarray | None = None,
    ) -> int:
        """Send ``len(lengths)`` frames (row i of ``buf``, ``lengths[i]`` bytes). Returns frames sent.

        ``tags`` (uint64 per frame) name the frames in timestamp reports; without them a
        report carries the frame's count since timestamps were enabled. ``stamp_rows``
        (sorted row numbers) chooses which frames the kernel stamps instead of every
        ts_every-th one; ``tags`` then has one entry per stamped row.
        """
        n = len(lengths)
        if n == 0:
            return 0
        if n > self.max_batch:
            raise ValueError(f"batch of {n} exceeds max_batch {self.max_batch}")
        if not buf.flags.c_contiguous or buf.dtype != np.uint8:
            raise ValueError("buf must be a C-contiguous uint8 (n, stride) array")
        stride = buf.strides[0] if buf.ndim == 2 else buf.shape[-1]
        iov = self._iov
        iov["base"][:n] = buf.ctypes.data + self._rows[:n] * np.uint64(stride)
        iov["len"][:n] = lengths
        rows = self._mark(n, stamp_rows)
        self._done = 0
        try:
            self._send_all(n)
        finally:  # even when sendmmsg fails for good, what it sent keeps its timestamp id
            self._record(rows, self._done, tags, stamp_rows is not None)
        return self._done

    def send_one(self, addr: int, length: int, tag: int | None = None) -> int:
        """One frame at ``addr`` by sendmsg(2), stamped by the kernel when ``tag`` is given
        (timestamps on): the timer pacer's frame-by-frame path (1 frame through
        :meth:`send` cost 8.4 µs on a veth pair here, 15.6 µs stamped; a plain send 2.1
        µs). 1 if sent; 0 if not (the caller retries through send)."""
        self._one_iov.base = addr
        self._one_iov.len = length
        stamped = tag is not None and self._cmsg_addr != 0
        self._one.control = self._cmsg_addr if stamped else None
        self._one.controllen = CMSG_SPACE_U32 if stamped else 0
        if _libc.sendmsg(self.fd, self._one_addr, MSG_DONTWAIT) != length:
            return 0
        if self.ts_every:
            if stamped:
                self._ts_tags[self._ts_ids % TS_RING] = tag
                self._ts_ids += 1
            self._ts_frames += 1  # the sampling phase counts every frame
        return 1

    def send_paced(
        self, lib, buf: np.ndarray, lens: np.ndarray, due_ns: np.ndarray,
        stamped: np.ndarray | None, tags: np.ndarray | None, margin_ns: int,
        ends: tuple[int, int, int], out,
    ) -> int:  # fmt: skip
        """The rows of ``buf`` each at its due time, one sendmsg(2) each, by the compiled
        pacer (``lib``: tgen_tui.worker.cpace); ``stamped`` rows carry the timestamp
        request and ``tags`` (one per stamped row); ``ends``: (end, least gap, hard end)
        of the call in ns (see csrc/pace.c). The frames sent (the first k);
        OSError for an error that is not transient (a transient one ends the call early,
        the caller retries)."""
        n = len(lens)
        ln = np.ascontiguousarray(lens, dtype=np.uint32)
        due = np.ascontiguousarray(due_ns, dtype=np.int64)
        flags = None
        if stamped is not None and self._cmsg_addr:
            flags = np.ascontiguousarray(stamped, dtype=np.uint8)
        k = int(lib.tgen_pace_send(
            self.fd, buf.ctypes.data, buf.strides[0], ln.ctypes.data, due.ctypes.data,
            None if flags is None else flags.ctypes.data, n, int(margin_ns), *ends,
            self._cmsg_addr or None, CMSG_SPACE_U32, out.sent_ns.ctypes.data,
            out.wake_late.ctypes.data, out.err.ctypes.data,
        ))  # fmt: skip
        err = int(out.err[0])
        if k < n and err and err not in _TRANSIENT:
            raise OSError(err, f"sendmsg on {self.interface}: {os.strerror(err)}")
        if k < n and err:
            self.errors += 1
        if self.ts_every:
            if flags is not None and tags is not None:
                ks = int(np.count_nonzero(flags[:k]))
                if ks:
                    at = (self._ts_ids + np.arange(ks)) % TS_RING
                    self._ts_tags[at] = tags[:ks]
                    self._ts_ids += ks
            self._ts_frames += k
        return k

    def _send_all(self, n: int) -> None:
        done = 0
        deadline = None
        while done < n:
            r = _libc.sendmmsg(
                self.fd, self._msg_addr + done * MMSGHDR.itemsize, n - done, MSG_DONTWAIT
            )
            if r > 0:
                done += r
                self._done = done
                if done < n:
                    self.errors += 1  # partial send: retry the rest
                continue
            err = ctypes.get_errno() if r < 0 else errno.EAGAIN
            if err not in _TRANSIENT:
                raise OSError(err, f"sendmmsg on {self.interface}: {os.strerror(err)}")
            self.errors += 1
            deadline = _retry_deadline(deadline, self.retry_s)
            if deadline is None:
                break
            self._wait_writable(deadline)


class RingTx(_TxBase):
    """``PACKET_TX_RING`` (TPACKET_V2): numpy copies into ring slots, one flush per batch."""

    kind = "tx_ring"

    def __init__(
        self,
        interface: str,
        max_batch: int = 1024,
        retry_s: float = 0.05,
        max_len: int = 1518,
        ring_frames: int = 32768,
    ):
        super().__init__(interface, max_batch, retry_s)
        fs = 1 << max(7, (TX_DATA_OFF + max_len - 1).bit_length())  # power of two >= 128
        block = max(fs, mmap.PAGESIZE * 16)
        per_block = block // fs
        nblocks = max(1, (ring_frames + per_block - 1) // per_block)
        self.frame_size = fs
        self.n_frames = nblocks * per_block
        self.max_len = fs - TX_DATA_OFF
        self.sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        # do not stop the ring at a malformed frame: count it and go on
        self.sock.setsockopt(SOL_PACKET, PACKET_LOSS, 1)
        req = np.array([block, nblocks, fs, self.n_frames], dtype=np.uint32).tobytes()
        self.sock.setsockopt(SOL_PACKET, PACKET_TX_RING, req)
        self._mm = mmap.mmap(
            self.fd, block * nblocks, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        self._ring = np.frombuffer(self._mm, dtype=np.uint8).reshape(self.n_frames, fs)
        self._u32 = np.frombuffer(self._mm, dtype=np.uint32).reshape(self.n_frames, fs // 4)
        self._status = self._u32[:, 0]  # tp_status
        self._len = self._u32[:, 1]  # tp_len
        self._cur = 0

    def send(self, buf: np.ndarray, lengths: np.ndarray) -> int:
        n = len(lengths)
        if n == 0:
            return 0
        if n > min(self.max_batch, self.n_frames):
            raise ValueError(f"batch of {n} exceeds max_batch {self.max_batch}")
        width = buf.shape[1]
        if width > self.max_len:
            width = int(lengths.max())
            if width > self.max_len:
                raise ValueError(f"frame of {width} bytes exceeds ring slot ({self.max_len})")
        slots = (self._cur + np.arange(n)) % self.n_frames
        deadline = None
        # wait for the slots to be free again (the kernel sets AVAILABLE once sent)
        while True:
            st = self._status[slots]
            if not st.any():
                break
            if (st & TP_STATUS_WRONG_FORMAT).any():
                self._status[slots[(st & TP_STATUS_WRONG_FORMAT) != 0]] = TP_STATUS_AVAILABLE
                self.errors += 1
                continue
            self.errors += 1
            deadline = _retry_deadline(deadline, self.retry_s)
            if deadline is None:
                return 0
            self._flush()
            self._wait_writable(deadline)
        self._ring[slots, TX_DATA_OFF : TX_DATA_OFF + width] = buf[:, :width]
        self._len[slots] = lengths
        self._status[slots] = TP_STATUS_SEND_REQUEST
        self._cur = int((self._cur + n) % self.n_frames)
        self._flush()
        return n

    def _flush(self) -> None:
        while True:
            try:
                self.sock.send(b"", MSG_DONTWAIT)
                return
            except BlockingIOError:
                self.errors += 1
                return  # frames stay queued in the ring; the next flush sends them
            except InterruptedError:
                continue
            except OSError as e:
                if e.errno in _TRANSIENT:
                    self.errors += 1
                    return
                raise

    def close(self) -> None:
        self._ring = self._u32 = self._status = self._len = None  # type: ignore[assignment]
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass
        super().close()


# ---------------------------------------------------------------------- AF_XDP
AF_XDP = 44
SOL_XDP = 283
XDP_MMAP_OFFSETS = 1
XDP_TX_RING = 3
XDP_UMEM_REG = 4
XDP_UMEM_FILL_RING = 5
XDP_UMEM_COMPLETION_RING = 6
XDP_MAX_TX_SKB_BUDGET = 9  # Linux 6.17+: descriptors sent per kick in copy mode (default 32)
XDP_COPY = 1 << 1
XDP_ZEROCOPY = 1 << 2
XDP_PGOFF_TX_RING = 0x80000000
XDP_UMEM_PGOFF_FILL_RING = 0x100000000
XDP_UMEM_PGOFF_COMPLETION_RING = 0x180000000
XDP_CHUNK = 2048
MAP_POPULATE = 0x8000
XDP_DESC = np.dtype([("addr", "<u8"), ("len", "<u4"), ("options", "<u4")])

_libc.sendto.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                         ctypes.c_void_p, ctypes.c_uint]  # fmt: skip
_libc.bind.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
_libc.getsockopt.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_uint)]  # fmt: skip


class _XdpRing:
    """One mmapped XDP ring: producer and consumer indexes and the entries, as numpy views."""

    def __init__(self, fd: int, pgoff: int, off: tuple, n: int, entry: np.dtype):
        prod, cons, desc, _flags = off
        self.mm = mmap.mmap(fd, desc + n * entry.itemsize, mmap.MAP_SHARED | MAP_POPULATE,
                            mmap.PROT_READ | mmap.PROT_WRITE, offset=pgoff)  # fmt: skip
        self.prod = np.frombuffer(self.mm, dtype=np.uint32, count=1, offset=prod)
        self.cons = np.frombuffer(self.mm, dtype=np.uint32, count=1, offset=cons)
        self.entries = np.frombuffer(self.mm, dtype=entry, count=n, offset=desc)

    def close(self) -> None:
        self.prod = self.cons = self.entries = None  # type: ignore[assignment]
        try:
            self.mm.close()
        except (BufferError, ValueError):
            pass


class XdpTx:
    """AF_XDP (``XDP_COPY`` unless ``zerocopy``): frames copied into UMEM chunks, one kick.

    A UMEM of ``frames`` 2 KiB chunks (a power of two, at least 4 batches), its fill and
    completion rings (both needed to bind) and a TX ring of the same size, bound to queue
    0. ``send`` copies the batch into free chunks with one numpy assignment, writes the
    descriptors, releases the producer index and kicks with ``sendto`` until the kernel
    has consumed them (for at most ``retry_s`` without progress; the rest goes with the
    next kick). The per-kick budget is raised to ``max_batch`` where the kernel allows.
    In copy mode the kernel builds an skb per frame and calls the driver directly: the
    qdisc and the packet taps are bypassed, so ``tcpdump`` on this interface does not see
    these frames (the interface counters do). Ring indexes use plain loads and stores,
    which is enough on x86 (TSO) and arm64 is not supported.
    """

    kind = "af_xdp"

    def __init__(self, interface: str, max_batch: int = 1024, retry_s: float = 0.05,
                 frames: int = 0, zerocopy: bool = False, queue: int = 0):  # fmt: skip
        self.interface = interface
        self.max_batch = int(max_batch)
        self.retry_s = float(retry_s)
        self.errors = 0
        self.n = frames or 1 << max(12, (4 * self.max_batch - 1).bit_length())
        if self.n & (self.n - 1):
            raise ValueError(f"frames must be a power of two, got {self.n}")
        self.max_len = XDP_CHUNK
        self._rings: list[_XdpRing] = []
        self.sock = socket.socket(AF_XDP, socket.SOCK_RAW, 0)
        try:
            self._setup(interface, zerocopy, queue)
        except BaseException:
            self.close()
            raise

    def _setup(self, interface: str, zerocopy: bool, queue: int) -> None:
        n, fd = self.n, self.sock.fileno()
        self.fd = fd
        self.umem = mmap.mmap(-1, n * XDP_CHUNK, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._umem = np.frombuffer(self.umem, dtype=np.uint8).reshape(n, XDP_CHUNK)
        reg = struct.pack("QQIIII", self._umem.ctypes.data, n * XDP_CHUNK, XDP_CHUNK, 0, 0, 0)
        self.sock.setsockopt(SOL_XDP, XDP_UMEM_REG, reg)
        for opt in (XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_TX_RING):
            self.sock.setsockopt(SOL_XDP, opt, n)
        self.budget = 32
        try:
            self.sock.setsockopt(SOL_XDP, XDP_MAX_TX_SKB_BUDGET, min(self.max_batch, n))
            self.budget = min(self.max_batch, n)
        except OSError:
            pass  # older kernel: 32 per kick
        buf = ctypes.create_string_buffer(128)
        ln = ctypes.c_uint(128)
        if _libc.getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, buf, ctypes.byref(ln)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"getsockopt(XDP_MMAP_OFFSETS): {os.strerror(err)}")
        o = struct.unpack("16Q", buf.raw)  # rx, tx, fill, completion: prod, cons, desc, flags
        self._tx = _XdpRing(fd, XDP_PGOFF_TX_RING, o[4:8], n, XDP_DESC)
        self._cq = _XdpRing(fd, XDP_UMEM_PGOFF_COMPLETION_RING, o[12:16], n, np.dtype("<u8"))
        self._fq = _XdpRing(fd, XDP_UMEM_PGOFF_FILL_RING, o[8:12], n, np.dtype("<u8"))
        self._rings = [self._tx, self._cq, self._fq]
        flags = XDP_ZEROCOPY if zerocopy else XDP_COPY
        sa = struct.pack("HHIII", AF_XDP, flags, socket.if_nametoindex(interface), queue, 0)
        if _libc.bind(fd, sa, len(sa)) != 0:
            err = ctypes.get_errno()
            mode = "zero-copy" if zerocopy else "copy"
            raise OSError(err, f"AF_XDP bind to {interface} ({mode}): {os.strerror(err)}")
        self.mode = "zerocopy" if zerocopy else "copy"
        self._addr = np.arange(n, dtype=np.uint64) * np.uint64(XDP_CHUNK)
        self._prod = 0  # descriptors posted
        self._done = 0  # completions reaped

    def _reap(self) -> None:
        k = (int(self._cq.prod[0]) - self._done) & 0xFFFFFFFF
        if k:
            self._done += k
            self._cq.cons[0] = self._done & 0xFFFFFFFF

    def _kick(self) -> None:
        """Kick until the kernel consumed every posted descriptor (or no progress for retry_s)."""
        deadline = None
        last = int(self._tx.cons[0])
        while last != self._prod & 0xFFFFFFFF:
            if _libc.sendto(self.fd, None, 0, MSG_DONTWAIT, None, 0) < 0:
                err = ctypes.get_errno()
                if err not in _TRANSIENT and err != errno.EBUSY:
                    raise OSError(err, f"AF_XDP send on {self.interface}: {os.strerror(err)}")
            cur = int(self._tx.cons[0])
            if cur != last:
                last, deadline = cur, None
                continue
            self.errors += 1
            deadline = _retry_deadline(deadline, self.retry_s)
            if deadline is None:
                return

    def send(self, buf: np.ndarray, lengths: np.ndarray) -> int:
        """Post as many of the frames as there are free chunks; returns frames posted."""
        n = len(lengths)
        if n == 0:
            return 0
        if n > self.max_batch:
            raise ValueError(f"batch of {n} exceeds max_batch {self.max_batch}")
        width = buf.shape[1]
        if width > XDP_CHUNK:
            width = int(lengths.max())
            if width > XDP_CHUNK:
                raise ValueError(f"frame of {width} bytes exceeds the AF_XDP chunk ({XDP_CHUNK})")
        self._reap()
        n = min(n, self.n - (self._prod - self._done))
        if n <= 0:
            self._kick()
            self._reap()
            return 0
        slots = (self._prod + np.arange(n)) & (self.n - 1)
        self._umem[slots, :width] = buf[:n, :width]
        d = self._tx.entries
        d["addr"][slots] = self._addr[slots]
        d["len"][slots] = lengths[:n]
        self._prod += n
        self._tx.prod[0] = self._prod & 0xFFFFFFFF
        self._kick()
        self._reap()
        return n

    def close(self) -> None:
        for r in self._rings:
            r.close()
        self._rings = []
        self._umem = None  # type: ignore[assignment]
        try:
            self.sock.close()
        except OSError:
            pass
        um = getattr(self, "umem", None)
        if um is not None:
            try:
                um.close()
            except (BufferError, ValueError):
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


TX_KINDS = {"sendmmsg": MmsgTx, "tx_ring": RingTx, "af_xdp": XdpTx}
DEFAULT_TX = "sendmmsg"


def open_tx(interface: str, kind: str = DEFAULT_TX, **kw) -> MmsgTx | RingTx | XdpTx:
    """Open the transmit path of ``kind`` (sendmmsg default, tx_ring, af_xdp, xdp: the
    kernel's live-frames sender, tgen_tui.worker.xdplive) on ``interface``."""
    if kind == "xdp":
        from tgen_tui.worker.xdplive import XdpLiveTx

        kw.pop("max_len", None)
        return XdpLiveTx(interface, **kw)  # type: ignore[return-value]
    try:
        cls = TX_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown tx path {kind!r}; expected one of {', '.join(TX_KINDS)}, xdp"
        ) from None
    return cls(interface, **kw)
