"""Capture filters: a tcpdump expression compiled to classic BPF by libpcap's compiler.

libpcap's ``pcap_compile`` (through ctypes) is the compiler tcpdump uses, so a filter
means here exactly what it means to tcpdump, and an expression tcpdump rejects is
rejected with libpcap's own message. Weighed against writing a compiler (the grammar is
large: ``vlan``, ``ip6 protochain``, ``portrange``, byte offsets...) or a pure-Python one
(none is maintained), the system library wins; it is already on every host that has
tcpdump (Debian's libpcap0.8).

Two ways to compile:

- :func:`check_filter` on a *dead* handle (link type Ethernet): a syntax and semantics
  check without any interface, for the command line's up-front validation (exit 2);
- :func:`compile_filter` with ``interface``: on a live handle of that interface (call it
  inside the port's namespace), so libpcap emits Linux's ancillary loads for ``vlan``
  (veth and most NICs move the outer tag into the packet's metadata, where an in-packet
  test never finds it), as tcpdump does; a dead handle is the fallback.

The program always returns the whole frame (``ret #262144``): the capture keeps the
signature at the frame's end for its comments and cuts to the snap length when writing.

tgen's own selectors are not BPF and are applied by the capture on the parsed
signature (``stream NAME``, ``other``); ``arpnd`` (the responder's ARP and Neighbour
Discovery) is an expression and expands here (:func:`expand_shortcut`).

Imports: the standard library only (workers use this).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
import threading

DLT_EN10MB = 1
FULL_SNAP = 262144
PCAP_NETMASK_UNKNOWN = 0xFFFFFFFF
PCAP_ERRBUF_SIZE = 256

# tgen's named filters that are plain expressions
SHORTCUTS = {
    "arpnd": "arp or (icmp6 and (ip6[40] == 133 or ip6[40] == 134 or ip6[40] == 135 "
    "or ip6[40] == 136 or ip6[40] == 137))",
    "arp-nd": "arp or (icmp6 and (ip6[40] == 133 or ip6[40] == 134 or ip6[40] == 135 "
    "or ip6[40] == 136 or ip6[40] == 137))",
}


class FilterError(ValueError):
    """libpcap refused the expression (its message)."""


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.POINTER(_Insn))]


_lib: ctypes.CDLL | None = None
_lock = threading.Lock()  # pcap_compile is thread-safe since 1.8; the dead handle is shared


def _libpcap() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("pcap") or "libpcap.so.0.8"
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            raise FilterError(
                f"libpcap is not installed ({e}); install libpcap0.8 (tcpdump brings it)"
            ) from None
        lib.pcap_open_dead.restype = ctypes.c_void_p
        lib.pcap_open_dead.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.pcap_create.restype = ctypes.c_void_p
        lib.pcap_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.pcap_activate.argtypes = [ctypes.c_void_p]
        lib.pcap_set_snaplen.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.pcap_set_buffer_size.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.pcap_compile.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(_Program),
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_uint32,
        ]
        lib.pcap_geterr.restype = ctypes.c_char_p
        lib.pcap_geterr.argtypes = [ctypes.c_void_p]
        lib.pcap_freecode.argtypes = [ctypes.POINTER(_Program)]
        lib.pcap_close.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib


def expand_shortcut(expr: str) -> str:
    """``arpnd`` → its expression; anything else unchanged."""
    return SHORTCUTS.get(expr.strip().lower(), expr)


def _compile_on(lib: ctypes.CDLL, handle: int, expr: str) -> list[tuple[int, int, int, int]]:
    prog = _Program()
    if lib.pcap_compile(handle, ctypes.byref(prog), expr.encode(), 1, PCAP_NETMASK_UNKNOWN) < 0:
        msg = (lib.pcap_geterr(handle) or b"cannot compile").decode(errors="replace")
        raise FilterError(msg.strip())
    try:
        return [
            (prog.bf_insns[i].code, prog.bf_insns[i].jt, prog.bf_insns[i].jf, prog.bf_insns[i].k)
            for i in range(prog.bf_len)
        ]
    finally:
        lib.pcap_freecode(ctypes.byref(prog))


def _live_handle(lib: ctypes.CDLL, interface: str) -> int | None:
    err = ctypes.create_string_buffer(PCAP_ERRBUF_SIZE)
    h = lib.pcap_create(interface.encode(), err)
    if not h:
        return None
    lib.pcap_set_snaplen(h, FULL_SNAP)
    lib.pcap_set_buffer_size(h, 1 << 16)  # the ring it opens is closed at once
    if lib.pcap_activate(h) < 0:  # warnings (> 0) are fine
        lib.pcap_close(h)
        return None
    return h


def compile_filter(expr: str, interface: str | None = None) -> list[tuple[int, int, int, int]]:
    """The classic BPF instructions (code, jt, jf, k) of ``expr``; an empty expression
    accepts every frame. With ``interface`` (in the current thread's namespace), on a live
    handle so that ``vlan`` reads the tag from the metadata."""
    expr = expand_shortcut(expr or "")
    lib = _libpcap()
    with _lock:
        handle = _live_handle(lib, interface) if interface else None
        live = handle is not None
        if handle is None:
            handle = lib.pcap_open_dead(DLT_EN10MB, FULL_SNAP)
        try:
            return _compile_on(lib, handle, expr)
        finally:
            if live or handle:
                lib.pcap_close(handle)


def check_filter(expr: str) -> str | None:
    """None when libpcap accepts ``expr`` (for Ethernet), else its message."""
    try:
        compile_filter(expr)
    except FilterError as e:
        return str(e)
    return None


def sock_fprog(insns: list[tuple[int, int, int, int]]) -> tuple[bytes, ctypes.Array]:
    """``struct sock_fprog`` for SO_ATTACH_FILTER, and the instruction array it points at
    (keep the array alive until setsockopt returns)."""
    arr = (_Insn * len(insns))(*[_Insn(*i) for i in insns])
    return struct.pack("HxxxxxxP", len(insns), ctypes.addressof(arr)), arr


def filter_frames(
    expr: str, address: int, offsets: list[int], caplens: list[int], origlens: list[int]
) -> list[bool]:
    """Whether each frame at ``address + offsets[i]`` (``caplens[i]`` bytes captured of
    ``origlens[i]``) passes ``expr``: libpcap's own ``bpf_filter``, as tcpdump -r applies
    it. Once per replayed capture, at build time (one C call per frame, not the hot path);
    the caller keeps the memory at ``address`` alive."""
    insns = compile_filter(expr)
    lib = _libpcap()
    lib.bpf_filter.restype = ctypes.c_uint
    lib.bpf_filter.argtypes = [ctypes.POINTER(_Insn), ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    arr = (_Insn * len(insns))(*[_Insn(*i) for i in insns])
    f = lib.bpf_filter
    return [
        f(arr, address + o, w, c) != 0 for o, c, w in zip(offsets, caplens, origlens, strict=True)
    ]
