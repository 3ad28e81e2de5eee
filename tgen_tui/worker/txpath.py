"""The transmit path: whole batches of frames to an AF_PACKET socket, one syscall per batch.

Two implementations with the same interface (``send(buf, lengths) -> sent``):

- :class:`MmsgTx` (default): ``sendmmsg(2)`` via ctypes. The ``mmsghdr``/``iovec`` arrays
  are numpy structured arrays allocated once; per batch only the ``iov_base``/``iov_len``
  columns are rewritten, vectorised, to point at the rows of the batch buffer. No
  per-frame Python. Measured faster on veth (BASELINES.md; benchmarks/results/).
- :class:`RingTx`: ``PACKET_TX_RING`` (TPACKET_V2): frames are copied into ring slots
  with one fancy-indexed numpy assignment, their status set to SEND_REQUEST, and the
  ring flushed with one ``send()``.

Both sockets are ``AF_PACKET``/``SOCK_RAW`` bound to the interface with protocol 0, so
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
import mmap
import os
import select
import socket
import time

import numpy as np

SOL_PACKET = 263
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_LOSS = 14
PACKET_QDISC_BYPASS = 20
TPACKET_V2 = 1
TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 1
TP_STATUS_SENDING = 2
TP_STATUS_WRONG_FORMAT = 4
TPACKET2_HDR_LEN = 32  # sizeof(struct tpacket2_hdr)
TX_DATA_OFF = 32  # TPACKET2_HDRLEN - sizeof(sockaddr_ll) = TPACKET_ALIGN(32) + 20 - 20
MSG_DONTWAIT = 0x40

_TRANSIENT = (errno.EAGAIN, errno.ENOBUFS, errno.EINTR)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_libc.sendmmsg.restype = ctypes.c_int

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


class MmsgTx(_TxBase):
    """``sendmmsg(2)`` of a whole batch whose iovecs point at the rows of the batch buffer."""

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

    def send(self, buf: np.ndarray, lengths: np.ndarray) -> int:
        """Send ``len(lengths)`` frames (row i of ``buf``, ``lengths[i]`` bytes). Returns frames sent."""
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
        done = 0
        deadline = None
        while done < n:
            r = _libc.sendmmsg(
                self.fd, self._msg_addr + done * MMSGHDR.itemsize, n - done, MSG_DONTWAIT
            )
            if r > 0:
                done += r
                if done < n:
                    self.errors += 1  # partial send: retry the rest
                continue
            err = ctypes.get_errno() if r < 0 else errno.EAGAIN
            if err not in _TRANSIENT:
                raise OSError(err, f"sendmmsg on {self.interface}: {os.strerror(err)}")
            self.errors += 1
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.retry_s
            elif now >= deadline:
                break
            self._wait_writable(deadline)
        return done


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
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.retry_s
            elif now >= deadline:
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


TX_KINDS = {"sendmmsg": MmsgTx, "tx_ring": RingTx}
DEFAULT_TX = "sendmmsg"


def open_tx(interface: str, kind: str = DEFAULT_TX, **kw) -> MmsgTx | RingTx:
    """Open the transmit path of ``kind`` ('sendmmsg' default, or 'tx_ring') on ``interface``."""
    try:
        cls = TX_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown tx path {kind!r}; expected one of {', '.join(TX_KINDS)}"
        ) from None
    return cls(interface, **kw)
