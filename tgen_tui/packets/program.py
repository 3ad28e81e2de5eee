"""StreamProgram: the plain-data description of one stream that a worker executes.

It is produced by ``tgen_tui.packets.compile`` (scapy + pydantic, engine side) and
consumed by ``tgen_tui.packets.batch`` and the worker (stdlib + numpy only). It is a
frozen dataclass tree of ints, floats, strings and bytes, serialisable to JSON with
:func:`program_to_dict` / :func:`program_from_dict`, so a worker process receives it
over a pipe without importing pydantic or scapy (DESIGN rule 2).

The test-frame signature (DESIGN rule 8) is the last ``SIG_LEN`` bytes of every
frame, inside the L4 payload, little-endian::

    offset  size  field
    0       2     magic   0x7467 ("tg")
    2       2     stream  global stream index (0..65535)
    4       4     seq     frame index within the stream, modulo 2**32
    8       4     ts      transmit time, CLOCK_MONOTONIC ns, low 32 bits

12 bytes is the smallest layout that fits a 64-byte IPv4/UDP frame with one VLAN tag
(60 bytes without FCS: 14 + 4 + 20 + 8 + 12 = 58). Putting it at the end of the frame
lets the receiver find it at ``len - 12`` whatever headers (or stripped VLAN tags)
came before it. The 32-bit timestamp limits measurable latency to 4.29 s.
"""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass, field

from tgen_tui.profiles.wire import FCS_LEN as FCS_LEN
from tgen_tui.profiles.wire import SIG_LEN as SIG_LEN
from tgen_tui.profiles.wire import VLAN_TAG_LEN as VLAN_TAG_LEN

SIG_MAGIC = 0x7467
# the signature as numpy reads and writes it (little-endian): magic, stream, seq, tx time
SIG_FIELDS = (("magic", "<u2"), ("stream", "<u2"), ("seq", "<u4"), ("ts", "<u4"))


def __getattr__(name: str):
    """``SIG_DTYPE`` as a numpy dtype, built on first use (this module stays numpy-free)."""
    if name == "SIG_DTYPE":
        import numpy as np

        return np.dtype(list(SIG_FIELDS))
    raise AttributeError(name)


# Checksum domains a field takes part in.
CSUM_NONE = 0
CSUM_IP = 1  # IPv4 header checksum
CSUM_L4 = 2  # UDP/TCP/ICMP checksum (pseudo-header or payload)
CSUM_BOTH = 3

# Field modes
FIXED, INC, DEC, RANDOM, UNIQUE = "fixed", "inc", "dec", "random", "unique"
TABLE = "table"  # a column of the stream's learned-tuple table (StreamProgram.table)
LIVE_TABLE = "live"  # StreamProgram.table: the sending port's own table, learned as it runs

# The learned-tuple table (RFC 9693 Responder): an (M, 4) uint32 .npy, one row per tuple
# as the Responder received it, in order of first arrival.
TABLE_COLUMNS = ("src_ip", "dst_ip", "src_port", "dst_port")
TABLE_ORDERS = ("fixed", "inc", "dec", "random")  # row of frame i: 0, i mod M, M-1 - i mod M, PRNG


@dataclass(frozen=True)
class FieldOp:
    """A varying header field: ``width`` big-endian bytes at ``offset`` take values in [min, max].

    - ``inc``/``dec``: value(i) = min + (start_offset ± i*step) mod (max-min+1)
    - ``random``: uniform, independent per frame, from a counter-based PRNG keyed by ``key``
      (RFC 4814); the same frame index and key always give the same value.
    - ``unique``: one dimension of the stream's unique product space (see StreamProgram.unique).
    - ``table``: column ``column`` (see TABLE_COLUMNS) of the stream's learned-tuple table,
      at the row that ``StreamProgram.table_order`` gives frame i (the same row for every
      table field of the frame).
    """

    name: str
    offset: int
    width: int
    mode: str
    min: int
    max: int
    step: int = 1
    key: int = 0
    csum: int = CSUM_NONE
    column: int = 0  # table mode only: the learned table's column

    @property
    def span(self) -> int:
        return self.max - self.min + 1


@dataclass(frozen=True)
class SizeProgram:
    """Frame sizes on the wire *without* FCS (profile size minus 4).

    mode: ``fixed`` (min), ``inc`` (min..max by step, wrapping), ``random`` (uniform in
    [min, max], keyed), ``imix`` (``pattern[i % len(pattern)]``: a seeded shuffle of the
    weighted sizes, so the mix is exact over every cycle).
    """

    mode: str
    min: int
    max: int
    step: int = 1
    key: int = 0
    pattern: tuple[int, ...] = ()

    @property
    def mean(self) -> float:
        if self.mode == "fixed":
            return float(self.min)
        if self.mode == "imix":
            return sum(self.pattern) / len(self.pattern)
        if self.mode == "inc":
            n = (self.max - self.min) // self.step + 1
            return self.min + self.step * (n - 1) / 2
        return (self.min + self.max) / 2


@dataclass(frozen=True)
class Schedule:
    """When frames are due, relative to the port's start, in seconds.

    - ``pps``: the mean frame rate while on.
    - ``count``: total frames to send (None = until stopped / stop_s).
    - ``start_s``/``stop_s``: timed start and stop.
    - ``on_s``/``off_s``: periodic on/off (0 = always on).
    - ``burst``/``burst_gap_s``: multi-burst: ``burst`` frames at ``pps``, then a gap.
    - ``shape``: the rate over time (:mod:`tgen_tui.packets.rateshape`), segments of
      ``(duration_s, m_start, m_end)`` as multiples of ``pps`` (the shape's peak).
    - ``idt``: inter-departure distribution: constant, exponential, pareto, normal, uniform,
      gamma, weibull, lognormal or (truncated) cauchy, with ``idt_params`` (see
      tgen_tui.packets.schedule).
    """

    pps: float
    count: int | None = None
    start_s: float = 0.0
    stop_s: float | None = None
    on_s: float = 0.0
    off_s: float = 0.0
    burst: int = 0
    burst_gap_s: float = 0.0
    idt: str = "constant"
    idt_params: tuple[float, ...] = ()
    key: int = 0
    shape: tuple[tuple[float, float, float], ...] = ()  # (s, m_start, m_end) × pps
    shape_repeat: bool = False
    shape_phase_s: float = 0.0  # where in the shape frame 0 is (a re-based schedule)


def schedule_from_dict(d: dict) -> Schedule:
    """A :class:`Schedule` from its JSON form (lists back to tuples)."""
    sc = dict(d)
    sc["idt_params"] = tuple(sc.get("idt_params", ()))
    sc["shape"] = tuple(tuple(float(x) for x in seg) for seg in sc.get("shape", ()))
    return Schedule(**sc)


@dataclass(frozen=True)
class ReplayProgram:
    """A ``pcap:`` stream's source and rewrite as plain data (tgen_tui.profiles.replay).

    The worker reads the file and builds the templates itself (packets.replay), once."""

    file: str  # absolute path
    first: int = 1  # frame numbers from 1, both ends included; last 0: to the end
    last: int = 0
    filter: str = ""  # BPF expression ("" keeps every frame)
    loops: int = 1  # 0: until stopped
    unique: bool = False  # each loop moves the sources on by their span
    timing: str = "rate"  # rate | recorded
    speed: float = 1.0
    max_gap_s: float = 0.0  # 0: recorded gaps as they are
    signature: bool = True
    mtu: int = 1500
    ipv4: tuple[tuple[str, str], ...] = ()  # prefix map, first match wins
    ipv6: tuple[tuple[str, str], ...] = ()
    ports: tuple[tuple[int, int], ...] = ()
    vlan: str = "keep"  # keep | strip | set
    vlan_id: int = 0
    vlan_pcp: int = -1  # -1: kept
    macs: bool = False  # the template's first 12 bytes replace every frame's MACs
    frames: int = 0  # frames selected (the compile's count; the worker checks it)
    period_s: float = 0.0  # recorded timing: one loop's length at speed 1


@dataclass(frozen=True)
class StreamProgram:
    """Everything a worker needs to build and pace one stream's frames."""

    index: int  # global stream index, carried in the signature
    name: str
    port: str  # profile port name
    template: bytes  # max-size frame (no FCS); varying fields, lengths and checksums zeroed
    l3: int  # 0 none, 4 IPv4, 6 IPv6
    l3_offset: int
    l4: str  # "udp" | "tcp" | "icmp" | "none"
    l4_offset: int
    l4_csum_offset: int  # -1 when there is no L4 checksum
    ip_csum_base: int  # unfolded 16-bit word sum of the zeroed IPv4 header
    l4_csum_base: int  # unfolded sum of the zeroed L4 segment + fixed pseudo-header words
    l4_pseudo: bool  # whether the L4 checksum covers a pseudo-header (UDP/TCP/ICMPv6)
    sizes: SizeProgram
    schedule: Schedule
    fields: tuple[FieldOp, ...] = ()
    unique: tuple[int, ...] = ()  # indexes into fields: product space, last varies fastest
    unique_key: int = 0
    seed: int = 0
    rx_port: str | None = None  # where the stream is expected to arrive, if anywhere
    vlan_ids: tuple[int, ...] = field(default_factory=tuple)  # configured tags, outer first
    # table-mode fields: the learned-tuple table's path, its row order (TABLE_ORDERS) and
    # the PRNG key of the random order
    table: str = ""
    table_order: str = "inc"
    table_key: int = 0
    # the Ethernet addresses are the port's MAC and its resolved gateway's: the worker
    # writes them into the template's first 12 bytes (issue 19)
    eth_auto: bool = False
    replay: ReplayProgram | None = None  # a pcap: stream (packets.replay builds its frames)
    # flows in blocks: every header field takes frame i // blocks's value, so each flow
    # sends ``blocks`` frames in a row (1: the next flow every frame, round-robin)
    blocks: int = 1

    @property
    def unique_space(self) -> int:
        n = 1
        for i in self.unique:
            n *= self.fields[i].span
        return n


def program_to_dict(p: StreamProgram) -> dict:
    """JSON-safe dict (bytes as base64) for the worker pipe."""
    d = asdict(p)
    d["template"] = base64.b64encode(p.template).decode("ascii")
    return d


def program_from_dict(d: dict) -> StreamProgram:
    """Inverse of :func:`program_to_dict`."""
    d = dict(d)
    d["template"] = base64.b64decode(d["template"])
    d["fields"] = tuple(FieldOp(**f) for f in d.get("fields", ()))
    sz = dict(d["sizes"])
    sz["pattern"] = tuple(sz.get("pattern", ()))
    d["sizes"] = SizeProgram(**sz)
    d["schedule"] = schedule_from_dict(d["schedule"])
    d["unique"] = tuple(d.get("unique", ()))
    d["vlan_ids"] = tuple(d.get("vlan_ids", ()))
    if d.get("replay") is not None:
        r = dict(d["replay"])
        for k in ("ipv4", "ipv6", "ports"):
            r[k] = tuple(tuple(x) for x in r.get(k, ()))
        d["replay"] = ReplayProgram(**r)
    return StreamProgram(**d)
