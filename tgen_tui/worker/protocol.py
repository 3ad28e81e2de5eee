"""The worker's command protocol: JSON lines on stdin, events as JSON lines on stdout.

Start::

    python -m tgen_tui.worker --core N --parent-pid P

The worker dies with its parent process: ``PR_SET_PDEATHSIG`` = SIGUSR2, whose handler
kills it once ``getppid()`` no longer names P (the signal also comes when only the thread
that spawned it ends). It exits with status 3 if its parent is no longer P, pins itself to core N, ignores
SIGINT (the engine stops it with commands), and prints ``hello``. stdin EOF is a
``quit``. Every command may carry an ``"id"``; the events it causes echo it.

Every message is a frozen dataclass below (``Configure``, ``Start``, ... ``Ready``,
``Stopped``, ...); :func:`encode` writes one JSON line, :func:`decode_command` and
:func:`decode_event` read one back into its dataclass (unknown names or fields are a
ValueError). The engine, the tests, the benchmarks and the calibration all use them.

Commands (``{"cmd": ...}``)
---------------------------
``configure``
    ``{"cmd": "configure", "shm": "/dev/shm/tgen-....ctr", "n_streams": N,
    "ports": [{"name": "p0", "interface": "veth0", "netns": "lab-t0" | null,
    "rx": true, "tx_streams": [program_to_dict(p), ...],
    "tx_path": "sendmmsg" | "tx_ring" | "af_xdp" | "xdp" (optional), "max_batch": 1024 (optional),
    "clock_skew_ns": {stream: ns} (optional: rx clock - tx clock of streams sent from
    another host, subtracted from their latency),
    "learn": {"path": "/dev/shm/tgen-learn-X.npy", "streams": [i, ...], "max": M}
    (optional: the RFC 9693 Responder learns the tuples of those streams' frames,
    :mod:`tgen_tui.worker.learn`)}],
    "rx_ring": {"block_size": 1048576, "block_nr": 32, "retire_ms": 20} (optional)}``

    Opens the tx sockets and, at once, the rx rings (nothing is missed later), creates
    the counter file (layout: :mod:`tgen_tui.worker.counters`; ports, tx streams and rx
    tables in the order given here) and answers ``ready``. A worker is configured once.
``start``
    ``{"cmd": "start", "ports": ["p0"] (default all), "t0_ns": T}``: frame i of a stream
    is due at ``T + due_s(i)`` (CLOCK_MONOTONIC ns; choose T a little in the future, e.g.
    now + 50 ms, so that all workers start together). Restarting a stopped port runs its
    schedules again from the new T, but the sequence numbers go on from where they
    stopped (the receiver's window stays valid: no phantom loss). Answers ``started``.
``stop``
    ``{"cmd": "stop", "ports": [...] (default all), "drain_ms": 2000}``: transmission
    stops at once; receiving goes on for ``drain_ms``, then the ring is drained, the
    kernel statistics read, and ``stopped`` is sent for each port with its final counters.
``set_rate``
    ``{"cmd": "set_rate", "stream": global_index, "pps": R}``: from now on the stream runs
    at R (its schedule is re-based at the current frame and time: the on/off phase and
    burst position restart; ``count`` and ``stop_s`` still hold). ``pps <= 0`` pauses it.
    Answers ``rate``.
``clear``
    ``{"cmd": "clear", "ports": [...] (default all), "streams": [global indexes] (optional)}``:
    resets the rx sequence state (duplicate window, highest sequence, min/max latency,
    jitter chain) of those streams on every rx table (without ``streams``: of every stream
    on the named ports), and restarts the sequence of those tx streams whose port is not
    sending (sender and receiver together). Counters stay monotonic: the engine subtracts
    baselines. Answers ``cleared`` with ``seq``: ``{stream: [next_seq, tx_frames]}``.
``pause`` / ``resume``
    ``{"cmd": "pause", "stream": global_index}``: nothing more of the stream becomes due
    (the port keeps running); ``resume`` re-bases it at the current frame and time.
    Answers ``paused`` with ``{stream, paused}``.
``ping``
    Answers ``pong`` with the worker's CLOCK_MONOTONIC ``t_ns``.
``quit``
    Answers ``bye`` and exits with status 0 (the counter file stays for the engine).

Events (``{"event": ...}``)
---------------------------
``hello``   ``{pid, core}`` once pinned.
``ready``   ``{shm, ports: [names], tx: [{port, stream, row}], rx_tables: {port: k},
            window, tx_path: {port: kind}}``.
``started`` ``{ports, t0_ns}``.
``tx_done`` ``{port}``: every tx stream of the port reached its count or stop time.
``stopped`` ``{port, counters: {port counters...}, streams: [{stream, tx_frames, due,
            requested_pps, late_events}]}``: the engine computes the achieved rate from
            these (requested × tx_frames / due, tgen_tui/engine/figures.py).
            A port configured with ``learn`` adds ``learned: {path, tuples, max, full,
            frames, unparsed, overflow}`` (the table was written to ``path``).
``rate``    ``{stream, pps}``.
``cleared`` ``{ports, streams, seq_reset, seq}``.
``paused``  ``{stream, paused}``.
``pong``    ``{t_ns}``.
``error``   ``{message, cmd?, port?, flow?, fatal: bool}``; a fatal error is followed by
            exit 3.
``bye``     ``{}``.

Flow workers (``python -m tgen_tui.worker.flows --core N --parent-pid P``, kernel TCP
and UDP sockets: :mod:`tgen_tui.worker.flows`) speak the same protocol with their own
configure: ``configure_flows`` ``{shm, flows: [flow_to_dict(f), ...]}`` opens every
flow's receiving socket and connects its TCP flows, then answers ``flows_ready`` ``{shm,
flows: [ids], ports}``; ``start``/``stop`` take the flows of those ports (``stopped``
per port once its flows drained, with empty ``counters``/``streams``; ``tx_done`` when
every flow of the port reached its schedule's stop); ``set_flow_rate`` ``{flow, bps}``
answers ``flow_rate``; ``clear``, ``ping`` and ``quit`` as above. Their counters are in
:mod:`tgen_tui.worker.flowcounters`.

Pacing (DESIGN rule 7): each loop turn sends, for every running stream, all frames whose
due time has passed, in batches of at most ``max_batch`` (one syscall each), stamped with
the send time. A batch whose first frame goes out more than ``LATE_NS`` (1 ms) after its
due time counts one ``late_event`` on the port, and ``late_max_ns`` keeps the worst
lateness. Frames are never skipped: a late sender catches up, and the achieved rate
the engine reports (requested × tx_frames / ``due``) shows what really happened. Between
turns the worker sleeps in ``poll()`` on stdin and the rx rings until the next due frame
(at least ``MIN_WAKE_NS`` = 200 µs later, so high rates go out in batches: the
builder's fixed cost per batch is tens of µs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

LATE_NS = 1_000_000
MIN_WAKE_NS = 200_000
EXIT_OK = 0
EXIT_FATAL = 3


@dataclass(frozen=True)
class Message:
    """Base of every command and event. ``id`` is the request id echoed by replies."""

    KIND: ClassVar[str] = ""
    KEY: ClassVar[str] = ""  # "cmd" or "event"
    id: str | int | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        d = {self.KEY: self.KIND, **asdict(self)}
        if d.get("id") is None:
            d.pop("id", None)
        return d

    # read access by name, for scripts and tests that treat messages as mappings
    def __getitem__(self, name: str) -> Any:
        if name == self.KEY:
            return self.KIND
        try:
            return getattr(self, name)
        except AttributeError:
            raise KeyError(name) from None

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default


@dataclass(frozen=True)
class Command(Message):
    KEY: ClassVar[str] = "cmd"


@dataclass(frozen=True)
class Event(Message):
    KEY: ClassVar[str] = "event"


# ---------------------------------------------------------------------- commands
@dataclass(frozen=True)
class Configure(Command):
    KIND: ClassVar[str] = "configure"
    shm: str
    n_streams: int
    ports: list[dict]
    rx_ring: dict | None = None
    stamps: str | None = None  # the engine's shared kernel tx timestamp table (txstamps)


@dataclass(frozen=True)
class Start(Command):
    KIND: ClassVar[str] = "start"
    ports: list[str] | None = None
    t0_ns: int | None = None
    end_ns: int | None = None  # send no frame due at or after this (a run's planned end)


@dataclass(frozen=True)
class Stop(Command):
    KIND: ClassVar[str] = "stop"
    ports: list[str] | None = None
    drain_ms: float = 0.0


@dataclass(frozen=True)
class SetRate(Command):
    KIND: ClassVar[str] = "set_rate"
    stream: int
    pps: float


@dataclass(frozen=True)
class Pause(Command):
    KIND: ClassVar[str] = "pause"
    stream: int


@dataclass(frozen=True)
class Resume(Command):
    KIND: ClassVar[str] = "resume"
    stream: int


@dataclass(frozen=True)
class Clear(Command):
    KIND: ClassVar[str] = "clear"
    ports: list[str] | None = None
    streams: list[int] | None = None


@dataclass(frozen=True)
class ConfigureFlows(Command):
    """A flow worker's configure: its counter file and its flows
    (:func:`tgen_tui.packets.flowprogram.flow_to_dict` each)."""

    KIND: ClassVar[str] = "configure_flows"
    shm: str
    flows: list[dict]


@dataclass(frozen=True)
class SetFlowRate(Command):
    """A UDP flow's payload rate from now on (bit/s; its schedule re-based)."""

    KIND: ClassVar[str] = "set_flow_rate"
    flow: int
    bps: float


@dataclass(frozen=True)
class Ping(Command):
    KIND: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Quit(Command):
    KIND: ClassVar[str] = "quit"


# ---------------------------------------------------------------------- events
@dataclass(frozen=True)
class Hello(Event):
    KIND: ClassVar[str] = "hello"
    pid: int
    core: int | None = None


@dataclass(frozen=True)
class Ready(Event):
    KIND: ClassVar[str] = "ready"
    shm: str
    ports: list[str]
    tx: list[dict]
    rx_tables: dict[str, int]
    window: dict[str, int]
    tx_path: dict[str, str]
    pacing: dict[str, str] = field(default_factory=dict)  # port: qdisc | timer | burst


@dataclass(frozen=True)
class FlowsReady(Event):
    """A flow worker opened every flow's sockets (TCP connected) and its counter file."""

    KIND: ClassVar[str] = "flows_ready"
    shm: str
    flows: list[int]
    ports: list[str]
    notes: list[str] = field(default_factory=list)  # limits raised, for the log


@dataclass(frozen=True)
class FlowRateSet(Event):
    KIND: ClassVar[str] = "flow_rate"
    flow: int
    bps: float


@dataclass(frozen=True)
class Started(Event):
    KIND: ClassVar[str] = "started"
    ports: list[str]
    t0_ns: int


@dataclass(frozen=True)
class TxDone(Event):
    KIND: ClassVar[str] = "tx_done"
    port: str


@dataclass(frozen=True)
class Stopped(Event):
    KIND: ClassVar[str] = "stopped"
    port: str
    counters: dict[str, int]
    streams: list[dict]
    learned: dict | None = None  # a learning port's table (see tgen_tui.worker.learn)
    flows: dict | None = None  # rx gaps, flow verification, live replies (worker.liveflow)


@dataclass(frozen=True)
class RateSet(Event):
    KIND: ClassVar[str] = "rate"
    stream: int
    pps: float


@dataclass(frozen=True)
class PausedEvent(Event):
    KIND: ClassVar[str] = "paused"
    stream: int
    paused: bool


@dataclass(frozen=True)
class Cleared(Event):
    KIND: ClassVar[str] = "cleared"
    ports: list[str]
    streams: list[int] | None = None
    seq_reset: list[int] = field(default_factory=list)
    seq: dict[str, list[int]] = field(default_factory=dict)  # stream -> [next_seq, tx_frames]


@dataclass(frozen=True)
class Pong(Event):
    KIND: ClassVar[str] = "pong"
    t_ns: int


@dataclass(frozen=True)
class Error(Event):
    KIND: ClassVar[str] = "error"
    message: str
    fatal: bool = False
    cmd: str | None = None
    port: str | None = None
    traceback: str | None = None
    flow: int | None = None  # a flow worker's flow the error is about


@dataclass(frozen=True)
class Bye(Event):
    KIND: ClassVar[str] = "bye"


COMMAND_TYPES: dict[str, type[Command]] = {
    c.KIND: c
    for c in (
        Configure,
        ConfigureFlows,
        Start,
        Stop,
        SetRate,
        SetFlowRate,
        Pause,
        Resume,
        Clear,
        Ping,
        Quit,
    )
}
EVENT_TYPES: dict[str, type[Event]] = {
    e.KIND: e
    for e in (
        Hello,
        Ready,
        FlowsReady,
        FlowRateSet,
        Started,
        TxDone,
        Stopped,
        RateSet,
        PausedEvent,
        Cleared,
        Pong,
        Error,
        Bye,
    )
}
COMMANDS = tuple(COMMAND_TYPES)
EVENTS = tuple(EVENT_TYPES)


def encode(msg: Message | dict) -> bytes:
    """One JSON line (a dict is accepted for hand-written messages in tools)."""
    d = msg.to_dict() if isinstance(msg, Message) else msg
    return (json.dumps(d, separators=(",", ":")) + "\n").encode()


def decode(line: bytes | str) -> dict:
    """One JSON line as a plain dict (no validation)."""
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise ValueError("a message must be a JSON object")
    return msg


def _build(types: Mapping[str, type[Message]], key: str, d: dict) -> Message:
    kind = d.get(key)
    cls = types.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown {key} {kind!r} (known: {', '.join(types)})")
    names = {f.name for f in fields(cls)}
    extra = set(d) - names - {key}
    if extra:
        raise ValueError(f"{kind}: unknown field(s) {', '.join(sorted(extra))}")
    missing = [
        f.name
        for f in fields(cls)
        if f.name not in d and f.default is MISSING and f.default_factory is MISSING
    ]
    if missing:
        raise ValueError(f"{kind}: missing field(s) {', '.join(missing)}")
    return cls(**{k: v for k, v in d.items() if k != key})


def decode_command(line: bytes | str | dict) -> Command:
    """A command line (or dict) as its dataclass; ValueError names what is wrong."""
    d = line if isinstance(line, dict) else decode(line)
    return _build(COMMAND_TYPES, "cmd", d)  # type: ignore[return-value]


def decode_event(line: bytes | str | dict) -> Event:
    """An event line (or dict) as its dataclass; ValueError names what is wrong."""
    d = line if isinstance(line, dict) else decode(line)
    return _build(EVENT_TYPES, "event", d)  # type: ignore[return-value]


def command(name: str, **fields_: Any) -> Command:
    """Build a command by its wire name: ``command("start", ports=["p0"])``."""
    return decode_command({"cmd": name, **fields_})
