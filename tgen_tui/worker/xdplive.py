"""tx_path: xdp: frames built and sent by the kernel, from one template per stream.

``BPF_PROG_RUN`` with ``BPF_F_TEST_XDP_LIVE_FRAMES`` (Linux 5.18+) runs an XDP program
``repeat`` times on a page-pool copy of one frame and transmits each result. The program
(``bpf/xdp_live.c``, compiled by clang: :func:`build_object`, which bootstrap.sh runs)
executes the stream's field program from its global data: the batch builder's field
ops, the signature's sequence number and CLOCK_MONOTONIC stamp, the IPv4 and L4
checksums fixed incrementally; Python only paces the calls (DESIGN rule 3: no frame is
touched in Python). Frames decode exactly like :class:`tgen_tui.packets.batch.BatchBuilder`'s
(fixed sizes only).

Counting: the syscall reports no per-frame count. The program counts the frames it
produced (``ctl.count``), and two tracing programs count what the kernel did with them
on this CPU during the call: ``xdp_devmap_xmit`` (sent, dropped, and the error) and
``xdp_redirect_err``. produced = sent + dropped. A call whose every frame failed with
ENXIO/EOPNOTSUPP is a receiving end without NAPI (a veth peer with neither GRO nor an
XDP program): :class:`XdpRefused`, one line with what to do, never a silent loss.

The traps this module works around (measured on the 6.18 test host, issue 37):

- each call with a repeat over 1 costs 24-26 ms while the kernel swaps the program into
  the XDP dispatcher, unless the program is also attached somewhere: it is kept attached
  (a bpf_link) to a veth pair of its own, down and idle (0.225 ms per 1,024 frames);
- Debian 12's clang needs ``-I/usr/include/x86_64-linux-gnu`` for BPF targets.

Imports: the standard library and numpy only (workers use this; libbpf through ctypes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import shutil
import socket
import subprocess
import sys

import numpy as np

from tgen_tui.packets.program import (
    DEC,
    FIXED,
    INC,
    LIVE_TABLE,
    RANDOM,
    TABLE,
    TABLE_ORDERS,
    UNIQUE,
    StreamProgram,
)
from tgen_tui.worker import cbuild

SRC = os.path.join(os.path.dirname(__file__), "bpf", "xdp_live.c")
OBJ = os.path.join(os.path.dirname(__file__), "bpf", "xdp_live.o")
CACHE_OBJ = os.path.join(os.path.expanduser("~"), ".cache", "tgen", "xdp_live.o")
MIN_KERNEL = (5, 18)
NS_SELF = "/proc/thread-self/ns/net"

MAX_STREAMS = 64
MAX_FIELDS = 8
MAX_WORDS = 48
MAX_UNIQUE = 8
TABLE_ROWS = 1 << 18
TMPL_MAX = 3584  # bytes of a stream's template (tgen_tmpl)
MAX_LIVE_FRAME = 3520  # a page less XDP's headroom and the skb_shared_info tailroom
NO_OFF = 0xFFFF
BPF_F_TEST_XDP_LIVE_FRAMES = 1 << 1
XDP_FLAGS_DRV_MODE = 1 << 2
MODES = {FIXED: 0, INC: 1, DEC: 2, RANDOM: 3, UNIQUE: 4, TABLE: 5}
NAPI_ERRS = (errno.ENXIO, errno.EOPNOTSUPP, errno.ENETDOWN)

FIELD = np.dtype(
    [("min", "<u8"), ("max", "<u8"), ("span", "<u8"), ("step", "<u8"), ("key", "<u8"),
     ("offset", "<u2"), ("width", "u1"), ("mode", "u1"), ("column", "u1"), ("csum", "u1"), ("pad", "u1", 2)]
)  # fmt: skip
STREAM = np.dtype(
    [("len", "<u4"), ("sig_off", "<u4"), ("nfields", "<u4"), ("ip_csum_off", "<u4"),
     ("l4_csum_off", "<u4"), ("udp", "<u4"), ("n_ip_words", "<u4"), ("n_l4_words", "<u4"),
     ("ip_const", "<u8"), ("l4_const", "<u8"), ("n_unique", "<u4"), ("perm_half", "<u4"),
     ("perm_n", "<u8"), ("perm_mask", "<u8"), ("perm_keys", "<u8", 4),
     ("unique_idx", "u1", MAX_UNIQUE), ("table_base", "<u4"), ("table_rows", "<u4"),
     ("table_order", "<u4"), ("by_value", "<u4"), ("table_key", "<u8"),
     ("f", FIELD, MAX_FIELDS), ("ip_words", "<u2", MAX_WORDS), ("l4_words", "<u2", MAX_WORDS)]
)  # fmt: skip
CTL_NAMES = ("slot", "start", "count", "ifindex", "active", "cpu", "xmit_sent", "xmit_drops",
             "xmit_err", "xmit_calls", "redirect_err", "redirect_err_last", "walk_overflow",
             "bad_len")  # fmt: skip
CTL = {n: i for i, n in enumerate(CTL_NAMES)}
PROGRAMS = ("tgen_live", "tgen_pass", "tgen_drop", "tgen_check", "tgen_xmit", "tgen_redirect_err")
CTL_BYTES = 8 * len(CTL_NAMES)
assert FIELD.itemsize == 48 and STREAM.itemsize == 712


class XdpRefused(OSError):
    """The path cannot send here; the message is one line with what to do."""


# ---------------------------------------------------------------------- build
def clang_command(src: str, out: str) -> list[str]:
    multiarch = f"/usr/include/{os.uname().machine}-linux-gnu"
    return ["clang", "-O2", "-g", "-Wall", "-target", "bpf", f"-I{multiarch}",
            "-c", src, "-o", out]  # fmt: skip


def object_path() -> str:
    """The compiled program: next to its source, or in the user's cache when the
    package directory is read-only; '' when neither is there or it is older than the
    source."""
    return cbuild.fresh(SRC, (OBJ, CACHE_OBJ))


def build_object(force: bool = False) -> str:
    """Compile ``bpf/xdp_live.c`` with clang (if missing or stale): the object's path."""
    have = object_path()
    if have and not force:
        return have
    if shutil.which("clang") is None:
        raise XdpRefused(
            "tx_path xdp: clang is not installed: apt-get install clang llvm libbpf-dev "
            "(or run bash bootstrap.sh)"
        )
    try:
        return cbuild.compile_to(SRC, (OBJ, CACHE_OBJ), lambda tmp: clang_command(SRC, tmp))
    except cbuild.BuildError as e:
        raise XdpRefused(f"tx_path xdp: {e}") from None


def kernel_version() -> tuple[int, int]:
    rel = os.uname().release.split("-")[0].split(".")
    try:
        return int(rel[0]), int(rel[1])
    except (IndexError, ValueError):
        return (0, 0)


# ---------------------------------------------------------------------- libbpf
class _TestRunOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p),
                ("data_out", ctypes.c_void_p), ("data_size_in", ctypes.c_uint32),
                ("data_size_out", ctypes.c_uint32), ("ctx_in", ctypes.c_void_p),
                ("ctx_out", ctypes.c_void_p), ("ctx_size_in", ctypes.c_uint32),
                ("ctx_size_out", ctypes.c_uint32), ("retval", ctypes.c_uint32),
                ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32),
                ("batch_size", ctypes.c_uint32)]  # fmt: skip


class _XdpMd(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("data", "data_end", "data_meta",
                "ingress_ifindex", "rx_queue_index", "egress_ifindex")]  # fmt: skip


_lib = None


def libbpf():
    """libbpf.so.1 through ctypes (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    name = ctypes.util.find_library("bpf") or "libbpf.so.1"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        raise XdpRefused(
            "tx_path xdp: libbpf is not installed: apt-get install libbpf-dev (or run "
            "bash bootstrap.sh)"
        ) from None
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    sig = {
        "bpf_object__open_file": (vp, [cp, vp]),
        "bpf_object__load": (i, [vp]),
        "bpf_object__close": (None, [vp]),
        "bpf_object__find_program_by_name": (vp, [vp, cp]),
        "bpf_object__next_map": (vp, [vp, vp]),
        "bpf_object__find_map_by_name": (vp, [vp, cp]),
        "bpf_map__name": (cp, [vp]),
        "bpf_map__fd": (i, [vp]),
        "bpf_map__initial_value": (vp, [vp, ctypes.POINTER(ctypes.c_size_t)]),
        "bpf_program__fd": (i, [vp]),
        "bpf_program__attach": (vp, [vp]),
        "bpf_program__attach_xdp": (vp, [vp, i]),
        "bpf_program__set_autoload": (i, [vp, ctypes.c_bool]),
        "bpf_link__destroy": (i, [vp]),
        "bpf_prog_test_run_opts": (i, [i, vp]),
        "bpf_xdp_attach": (i, [i, i, ctypes.c_uint32, vp]),
        "bpf_xdp_detach": (i, [i, ctypes.c_uint32, vp]),
        "libbpf_set_print": (vp, [vp]),
    }
    for fn, (res, args) in sig.items():
        f = getattr(lib, fn)
        f.restype, f.argtypes = res, args
    if not os.environ.get("TGEN_LIBBPF_DEBUG"):
        lib.libbpf_set_print(None)  # its warnings would reach the worker's stderr
    _lib = lib
    return lib


def _err(what: str) -> OSError:
    e = ctypes.get_errno() or errno.EINVAL
    return OSError(e, f"{what}: {os.strerror(e)}")


class XdpObject:
    """The loaded object: its programs, the .bss control block and the table map."""

    def __init__(self, programs: tuple[str, ...] = ("tgen_live", "tgen_xmit", "tgen_redirect_err")):
        if kernel_version() < MIN_KERNEL:
            v = ".".join(map(str, kernel_version()))
            raise XdpRefused(
                f"tx_path xdp needs Linux 5.18 or later (BPF_F_TEST_XDP_LIVE_FRAMES); this "
                f"kernel is {v}: use tx_path sendmmsg"
            )
        lib = libbpf()
        path = build_object()
        self.lib = lib
        self.links: list[int] = []
        self.obj = lib.bpf_object__open_file(path.encode(), None)
        if not self.obj:
            raise _err(f"bpf_object__open_file({path})")
        try:
            self._load(programs)
        except BaseException:
            self.close()
            raise

    def _load(self, programs: tuple[str, ...]) -> None:
        lib = self.lib
        self.progs = {}
        for name in PROGRAMS:
            p = lib.bpf_object__find_program_by_name(self.obj, name.encode())
            if not p:
                raise _err(f"program {name} not in the object")
            lib.bpf_program__set_autoload(p, name in programs)
            self.progs[name] = p
        if lib.bpf_object__load(self.obj) != 0:
            e = ctypes.get_errno()
            if e == errno.EPERM:
                raise XdpRefused("tx_path xdp: loading a BPF program needs root (CAP_BPF)")
            raise _err(
                "loading the XDP program (bpf_object__load; TGEN_LIBBPF_DEBUG=1 for the log)"
            )
        m = None
        while True:
            m = lib.bpf_object__next_map(self.obj, m)
            if not m:
                raise OSError(errno.ENOENT, "the XDP object has no .bss map")
            if (lib.bpf_map__name(m) or b"").endswith(b".bss"):
                break
        size = ctypes.c_size_t(0)
        lib.bpf_map__initial_value(m, ctypes.byref(size))  # the section's size
        need = CTL_BYTES + MAX_STREAMS * STREAM.itemsize
        if size.value < need:
            raise OSError(errno.EINVAL, f"the XDP object's .bss is {size.value} B, not {need}")
        # the live map, shared with the programs (libbpf 1.1 remaps it for skeletons only)
        page = mmap.PAGESIZE
        self._bss_mm = mmap.mmap(lib.bpf_map__fd(m), (size.value + page - 1) // page * page,
                                 mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
        self.ctl = np.frombuffer(self._bss_mm, dtype="<u8", count=len(CTL_NAMES))
        self.streams = np.frombuffer(
            self._bss_mm, dtype=STREAM, count=MAX_STREAMS, offset=CTL_BYTES
        )
        # tgen_check's counters (ok, bad) and the 12 bytes it expects (tests)
        sink = CTL_BYTES + MAX_STREAMS * STREAM.itemsize
        self.sink = np.frombuffer(self._bss_mm, dtype="<u8", count=2, offset=sink)
        self.sink_want = np.frombuffer(self._bss_mm, dtype=np.uint8, count=16, offset=sink + 16)
        tm = lib.bpf_object__find_map_by_name(self.obj, b"tgen_table")
        self._table_mm = mmap.mmap(lib.bpf_map__fd(tm), TABLE_ROWS * 16, mmap.MAP_SHARED,
                                   mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
        self.table = np.frombuffer(self._table_mm, dtype="<u4").reshape(TABLE_ROWS, 4)
        tt = lib.bpf_object__find_map_by_name(self.obj, b"tgen_tmpl")
        size = (MAX_STREAMS * TMPL_MAX + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        self._tmpl_mm = mmap.mmap(lib.bpf_map__fd(tt), size, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
        self.templates = np.frombuffer(
            self._tmpl_mm, dtype=np.uint8, count=MAX_STREAMS * TMPL_MAX
        ).reshape(MAX_STREAMS, TMPL_MAX)

    def fd(self, name: str) -> int:
        return self.lib.bpf_program__fd(self.progs[name])

    def attach(self, name: str, ifindex: int | None = None) -> None:
        """A bpf_link: the tracing programs to their tracepoints, an XDP one to ``ifindex``."""
        p = self.progs[name]
        if ifindex is None:
            link = self.lib.bpf_program__attach(p)
        else:
            link = self.lib.bpf_program__attach_xdp(p, int(ifindex))
        if not link:
            raise _err(f"attaching {name}")
        self.links.append(link)

    def close(self) -> None:
        for link in self.links:
            self.lib.bpf_link__destroy(link)
        self.links = []
        self.ctl = self.streams = self.table = self.templates = None  # type: ignore[assignment]
        self.sink = self.sink_want = None  # type: ignore[assignment]
        mms = ("_table_mm", "_bss_mm", "_tmpl_mm")
        for mm in (getattr(self, m, None) for m in mms):
            if mm is not None:
                try:
                    mm.close()
                except (BufferError, ValueError):
                    pass
        if self.obj:
            self.lib.bpf_object__close(self.obj)
            self.obj = None


# ---------------------------------------------------------------------- streams
def _refusal(prog: StreamProgram, where: str) -> str | None:
    """Why this path cannot send ``prog`` (one line), or None."""
    if prog.replay is not None:
        return f"{where} cannot replay a capture (pcap: streams): use sendmmsg"
    if prog.blocks > 1:
        return f"{where} sends each frame's own flow (blocks: {prog.blocks}): use sendmmsg"
    if prog.sizes.mode != "fixed":
        return f"{where} sends one frame size per stream (size {prog.sizes.mode})"
    if prog.table == LIVE_TABLE and any(f.mode == TABLE for f in prog.fields):
        return f"{where} cannot reply to tuples learned live: use sendmmsg"
    if len(prog.fields) > MAX_FIELDS:
        return f"{where} takes up to {MAX_FIELDS} varying fields"
    return None


def stream_config(prog: StreamProgram, table_base: int = 0):
    """(STREAM record, data_in template bytes, table rows or None) for one stream, from
    the batch builder's own fixed-size precomputation (the same bytes as tgen pcap), or
    ValueError naming what this path cannot send."""
    from tgen_tui.packets.batch import BatchBuilder, read_learned_table

    where = f"stream {prog.name}: tx_path xdp"
    refused = _refusal(prog, where)
    if refused:
        raise ValueError(refused)
    b = BatchBuilder(prog, max_batch=1)
    rec = np.zeros(1, dtype=STREAM)[0]
    L = b.max_len
    if not 16 <= L <= MAX_LIVE_FRAME:
        raise ValueError(f"{where} sends frames of 16 to {MAX_LIVE_FRAME} B (this one: {L} B)")
    rec["len"], rec["sig_off"], rec["nfields"] = L, b._sig_off, len(prog.fields)
    for i, f in enumerate(prog.fields):
        if f.mode == UNIQUE and i not in prog.unique:
            raise ValueError(f"{where}: unique field {f.name} is outside the stream's unique group")
        if f.width not in (1, 2, 4, 8) or f.mode not in MODES:
            raise ValueError(f"{where}: field {f.name} ({f.width} B, {f.mode}) is not supported")
        span = f.span if f.span < 1 << 64 else 0
        rec["f"][i] = (f.min, f.max & (2**64 - 1), span, f.step & (2**64 - 1), f.key, f.offset,
                       f.width, MODES[f.mode], f.column, f.csum & 3, (0, 0))  # fmt: skip
    ip = b._ip_cols
    rec["ip_csum_off"] = NO_OFF
    if ip is not None:
        if len(ip) > MAX_WORDS:
            raise ValueError(f"{where}: too many varying IPv4 header words")
        rec["ip_csum_off"] = prog.l3_offset + 10
        rec["ip_const"], rec["n_ip_words"] = int(b._ip_const), len(ip)
        rec["ip_words"][: len(ip)] = np.asarray(ip) * 2
    rec["l4_csum_off"] = NO_OFF
    if prog.l4_csum_offset >= 0:
        cols = b._l4_cols
        if len(cols) > MAX_WORDS:
            raise ValueError(f"{where}: too many varying words under the L4 checksum")
        rec["l4_csum_off"], rec["udp"] = prog.l4_csum_offset, int(prog.l4 == "udp")
        rec["l4_const"], rec["n_l4_words"] = int(b._l4_const), len(cols)
        rec["l4_words"][: len(cols)] = np.asarray(cols) * 2
    if prog.unique:
        if len(prog.unique) > MAX_UNIQUE:
            raise ValueError(f"{where} takes up to {MAX_UNIQUE} unique fields")
        perm = b._perm
        rec["n_unique"] = len(prog.unique)
        rec["unique_idx"][: len(prog.unique)] = prog.unique
        rec["perm_n"] = perm.n if perm.n < 1 << 64 else 0
        rec["perm_half"], rec["perm_mask"] = perm.half, int(perm.mask)
        rec["perm_keys"] = [int(k) for k in perm.keys]
    rec["by_value"] = int(_by_value(prog, b))
    rows = None
    if any(f.mode == TABLE for f in prog.fields):
        rows = read_learned_table(prog.table)
        if prog.table_order not in TABLE_ORDERS:
            raise ValueError(f"{where}: unknown table order {prog.table_order!r}")
        rec["table_base"], rec["table_rows"] = table_base, len(rows)
        rec["table_order"] = TABLE_ORDERS.index(prog.table_order)
        rec["table_key"] = prog.table_key
    return rec, bytes(b._template[:L]), rows


def _by_value(prog: StreamProgram, b) -> bool:
    """Whether the program may sum the checksums from the values it writes: each varying
    word under a checksum is exactly one field's (even offset and width) with that
    checksum's flag, or the signature's seq/stamp; else it reads the words back."""
    from tgen_tui.packets.program import CSUM_IP, CSUM_L4

    if b._sig_off % 2:
        return False
    ip, l4 = set(), set(range((b._sig_off + 4) // 2, (b._sig_off + 12) // 2))
    for f in prog.fields:
        if f.offset % 2 or f.width % 2:
            return False
        words = set(range(f.offset // 2, (f.offset + f.width) // 2))
        if f.csum & CSUM_IP:
            ip |= words
        if f.csum & CSUM_L4:
            l4 |= words
    want_ip = set() if b._ip_cols is None else {int(w) for w in b._ip_cols}
    want_l4 = {int(w) for w in b._l4_cols} if prog.l4_csum_offset >= 0 else l4
    return ip == want_ip and l4 == want_l4


# ---------------------------------------------------------------------- the send path
class XdpLiveTx:
    """The live-frames sender of one interface; streams by :meth:`add_stream`, frames by
    :meth:`send_stream` (one BPF_PROG_RUN: ``n`` frames of one stream from ``start``)."""

    kind = "xdp"

    def __init__(self, interface: str, max_batch: int = 1024, retry_s: float = 0.05,
                 queue: int = 0, hold: bool = True, batch_size: int = 0):  # fmt: skip
        self.interface = interface
        self.max_batch = int(max_batch)
        self.retry_s = float(retry_s)
        self.errors = 0
        self.produced = self.sent = self.dropped = 0
        self.last_err = 0
        self.ifindex = socket.if_nametoindex(interface)
        self.mtu = interface_mtu(interface)
        # the syscall finds the device by ifindex in the calling thread's namespace: every
        # call runs in the one this was opened in (a worker's loop runs outside it)
        self._ns = os.open(NS_SELF, os.O_RDONLY | os.O_CLOEXEC)
        self._ns_ino = os.fstat(self._ns).st_ino
        self._home = -1
        self._home_ino = 0
        self._hold_dev = ""
        self._templates: list[ctypes.Array] = []
        self._table_used = 0
        self.o = XdpObject()
        try:
            self.o.attach("tgen_xmit")
            self.o.attach("tgen_redirect_err")
            if hold:
                self._hold()
        except BaseException:
            self.close()
            raise
        self.o.ctl[CTL["ifindex"]] = self.ifindex
        self._fd = self.o.fd("tgen_live")
        self._ctx = _XdpMd(0, 0, 0, self.ifindex, int(queue), 0)
        self._opts = _TestRunOpts()
        self._opts.sz = ctypes.sizeof(_TestRunOpts)
        self._opts.ctx_in = ctypes.addressof(self._ctx)
        self._opts.ctx_size_in = ctypes.sizeof(_XdpMd)
        self._opts.flags = BPF_F_TEST_XDP_LIVE_FRAMES
        self._batch = int(batch_size)
        self._opts_p = ctypes.addressof(self._opts)

    def _hold(self) -> None:
        """Keep the program attached to a down veth pair of its own (the dispatcher trap)."""
        name = f"tgxh{os.getpid() % 10**7}"
        for dev in (name + "a",):
            subprocess.run(["ip", "link", "del", dev], capture_output=True)
        r = subprocess.run(
            ["ip", "link", "add", name + "a", "type", "veth", "peer", "name", name + "b"],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            print(f"tx_path xdp: no idle veth to hold the program ({r.stderr.strip()}): "
                  "each call costs ~25 ms more", file=sys.stderr)  # fmt: skip
            return
        self._hold_dev = name + "a"
        self.o.attach("tgen_live", socket.if_nametoindex(self._hold_dev))

    def add_stream(self, prog: StreamProgram) -> int:
        """Load one stream's program into the next slot; the slot."""
        slot = len(self._templates)
        if slot >= MAX_STREAMS:
            raise ValueError(f"tx_path xdp sends up to {MAX_STREAMS} streams per port")
        rec, tmpl, rows = stream_config(prog, self._table_used)
        if rows is not None:
            if self._table_used + len(rows) > TABLE_ROWS:
                raise ValueError(
                    f"stream {prog.name}: tx_path xdp holds {TABLE_ROWS} learned rows per port"
                )
            self.o.table[self._table_used : self._table_used + len(rows)] = rows
            self._table_used += len(rows)
        self.o.templates[slot, : len(tmpl)] = np.frombuffer(tmpl, dtype=np.uint8)
        self.o.streams[slot] = rec
        self._templates.append((ctypes.c_uint8 * len(tmpl)).from_buffer_copy(tmpl))
        return slot

    def send_stream(self, slot: int, start: int, n: int, batch_size: int | None = None) -> int:
        """Frames ``start .. start+n-1`` of stream ``slot``: the frames produced (each
        either sent or dropped: :attr:`sent`, :attr:`dropped`). ``batch_size``: frames the
        kernel makes before it flushes them to the device (1..256; 0: its default, 64;
        None: this sender's). A frame's stamp is taken when it is made, so a batch of B
        frames adds up to B frames' transit of the receiver to the first one's latency:
        paced streams use 1 (lab NAT, 20 kpps: p50 from the stamp to the DUT's ingress
        tap 47.5 us at 64, 14.3 us at 1)."""
        if n <= 0:
            return 0
        c, o = self.o.ctl, self._opts
        o.batch_size = self._batch if batch_size is None else int(batch_size)
        t = self._templates[slot]
        c[0], c[1], c[2] = slot, start, 0
        s0, d0, r0 = int(c[6]), int(c[7]), int(c[10])
        o.data_in = ctypes.addressof(t)
        o.data_size_in = len(t)
        self._ctx.data_end = len(t)
        o.repeat = int(n)
        c[4] = 1
        r, err = self._run()
        c[4] = 0
        made = int(c[2])
        sent = int(c[6]) - s0
        dropped = int(c[7]) - d0 + int(c[10]) - r0
        self.produced += made
        self.sent += sent
        self.dropped += dropped
        if r < 0 and err not in (errno.EINTR, errno.EAGAIN):
            raise OSError(err, f"BPF_PROG_RUN (xdp live frames) on {self.interface}: "
                               f"{os.strerror(err)}")  # fmt: skip
        if dropped:
            self.errors += 1
            self.last_err = int(c[8]) or int(c[11])
            if sent == 0 and dropped >= made and self.last_err in NAPI_ERRS:
                raise XdpRefused(self.refusal(self.last_err))
        return made

    def _run(self) -> tuple[int, int]:
        """One BPF_PROG_RUN, in this sender's namespace (entered and left if need be)."""
        from tgen_tui.worker.kernel import setns

        lib = self.o.lib
        cur = os.stat(NS_SELF).st_ino
        if cur == self._ns_ino:
            r = lib.bpf_prog_test_run_opts(self._fd, self._opts_p)
            return r, (ctypes.get_errno() if r < 0 else 0)
        if cur != self._home_ino:
            if self._home >= 0:
                os.close(self._home)
            self._home = os.open(NS_SELF, os.O_RDONLY | os.O_CLOEXEC)
            self._home_ino = cur
        setns(self._ns)
        try:
            r = lib.bpf_prog_test_run_opts(self._fd, self._opts_p)
            err = ctypes.get_errno() if r < 0 else 0
        finally:
            setns(self._home)
        return r, err

    def refusal(self, e: int) -> str:
        """One line: why the kernel dropped every frame, and what to do."""
        what = f"tx_path xdp: {self.interface}: the kernel dropped every frame ({errno.errorcode.get(e, e)}"
        if e == errno.ENETDOWN:
            return f"{what}: the interface is down): bring it up"
        return (
            f"{what}: redirect failed: the peer has no NAPI): on a veth, give the other end "
            "an XDP program or GRO (tgen lab up --xdp; ethtool -K PEER gro on), or use "
            "tx_path sendmmsg"
        )

    PROBE_SLOT = MAX_STREAMS - 1

    def probe(self) -> None:
        """Check, without delivering a frame, that the kernel can transmit here: one
        frame a byte longer than the interface's MTU allows (no destination MAC, a local
        experimental EtherType). The kernel checks the device's XDP transmit support
        first (a veth whose peer has no NAPI: EOPNOTSUPP; down: ENETDOWN), then the size
        (EMSGSIZE, before the driver: no counter moves): the first two are
        :class:`XdpRefused`, one line. Jumbo MTUs get a 60-byte probe (then it is
        delivered: nobody takes it)."""
        mtu = self.mtu
        n = mtu + 14 + 4 + 1  # the veth's limit is mtu + hard_header_len + VLAN_HLEN
        if n > MAX_LIVE_FRAME or mtu <= 0:
            n = 60
        rec = np.zeros(1, dtype=STREAM)[0]
        rec["len"], rec["sig_off"] = n, n - 12
        rec["ip_csum_off"] = rec["l4_csum_off"] = NO_OFF
        frame = bytes(6) + bytes([0x02, 0, 0, 0, 0, 1]) + b"\x88\xb5" + bytes(n - 14)
        self.o.templates[self.PROBE_SLOT, :n] = np.frombuffer(frame, dtype=np.uint8)
        self.o.streams[self.PROBE_SLOT] = rec
        keep = self._templates
        self._templates = [*keep] + [None] * (self.PROBE_SLOT - len(keep))  # type: ignore[list-item]
        self._templates.append((ctypes.c_uint8 * n).from_buffer_copy(frame))
        try:
            made = self.send_stream(self.PROBE_SLOT, 0, 1)
        finally:
            self._templates = keep
            self.produced = self.sent = self.dropped = self.errors = 0
        if made != 1:
            raise XdpRefused(f"tx_path xdp: {self.interface}: the XDP program made no frame")

    def close(self) -> None:
        o = getattr(self, "o", None)
        if o is not None:
            o.close()
            self.o = None  # type: ignore[assignment]
        for fd in (getattr(self, "_ns", -1), getattr(self, "_home", -1)):
            if fd >= 0:
                os.close(fd)
        self._ns = self._home = -1
        if self._hold_dev:
            subprocess.run(["ip", "link", "del", self._hold_dev], capture_output=True)
            self._hold_dev = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def interface_mtu(interface: str) -> int:
    """The MTU of ``interface`` in this thread's namespace (SIOCGIFMTU); 0 if unknown."""
    import fcntl
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16si", interface.encode()[:15], 0)
            return struct.unpack("16si", fcntl.ioctl(s.fileno(), 0x8921, req))[1]
    except OSError:
        return 0


# ---------------------------------------------------------------------- the DUT side
def attach_pass(interface: str, program: str = "tgen_pass") -> None:
    """Native XDP_PASS on ``interface`` (a veth: NAPI on, every frame to the stack; the
    attachment outlives this process, like ip link set ... xdp); ``tgen_drop``: a sink."""
    o = XdpObject(programs=(program,))
    try:
        r = o.lib.bpf_xdp_attach(socket.if_nametoindex(interface), o.fd(program),
                                 XDP_FLAGS_DRV_MODE, None)  # fmt: skip
        if r != 0:
            raise OSError(-r, f"XDP program {program} on {interface}: {os.strerror(-r)}")
    finally:
        o.close()


def detach(interface: str) -> None:
    """Take a native XDP program off ``interface`` (none there: nothing happens)."""
    lib = libbpf()
    lib.bpf_xdp_detach(socket.if_nametoindex(interface), XDP_FLAGS_DRV_MODE, None)


def main(argv: list[str] | None = None) -> int:
    """``python -m tgen_tui.worker.xdplive build``: compile the program (bootstrap.sh)."""
    return cbuild.build_main("tgen_tui.worker.xdplive", lambda: build_object(force=True), argv)


if __name__ == "__main__":
    sys.exit(main())
