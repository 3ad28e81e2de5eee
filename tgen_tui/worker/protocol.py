"""The worker's command protocol: JSON lines on stdin, events as JSON lines on stdout.

Start::

    python -m tgen_tui.worker --core N --parent-pid P

The worker sets ``PR_SET_PDEATHSIG`` = SIGKILL (it dies with the thread that spawned
it), exits with status 3 if its parent is no longer P, pins itself to core N, ignores
SIGINT (the engine stops it with commands), and prints ``hello``. stdin EOF is a
``quit``. Every command may carry an ``"id"``; the events it causes echo it.

Commands (``{"cmd": ...}``)
---------------------------
``configure``
    ``{"cmd": "configure", "shm": "/dev/shm/tgen-....ctr", "n_streams": N,
    "ports": [{"name": "p0", "interface": "veth0", "netns": "lab-t0" | null,
    "rx": true, "tx_streams": [program_to_dict(p), ...],
    "tx_path": "sendmmsg" | "tx_ring" (optional), "max_batch": 1024 (optional)}],
    "rx_ring": {"block_size": 1048576, "block_nr": 32, "retire_ms": 4} (optional)}``

    Opens the tx sockets and, at once, the rx rings (nothing is missed later), creates
    the counter file (layout: :mod:`tgen_tui.worker.counters`; ports, tx streams and rx
    tables in the order given here) and answers ``ready``. A worker is configured once.
``start``
    ``{"cmd": "start", "ports": ["p0"] (default all), "t0_ns": T}``: frame i of a stream
    is due at ``T + due_s(i)`` (CLOCK_MONOTONIC ns; choose T a little in the future, e.g.
    now + 50 ms, so that all workers start together). Restarting a stopped port starts
    its streams again from sequence 0. Answers ``started``.
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
    ``{"cmd": "clear", "ports": [...] (default all)}``: resets the rx sequence state
    (duplicate window, highest sequence, min/max latency, jitter chain). Counters stay
    monotonic: the engine subtracts baselines. Answers ``cleared``.
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
            requested_pps, achieved_pps, late_events}]}``: achieved_pps is tx_frames over
            the time from the stream's first due frame to its last send (or the stop).
``rate``    ``{stream, pps}``.
``cleared`` ``{ports}``.
``pong``    ``{t_ns}``.
``error``   ``{message, cmd?, port?, fatal: bool}``; a fatal error is followed by exit 3.
``bye``     ``{}``.

Pacing (DESIGN rule 7): each loop turn sends, for every running stream, all frames whose
due time has passed, in batches of at most ``max_batch`` (one syscall each), stamped with
the send time. A batch whose first frame goes out more than ``LATE_NS`` (1 ms) after its
due time counts one ``late_event`` on the port, and ``late_max_ns`` keeps the worst
lateness. Frames are never skipped: a late sender catches up, and the achieved rate
(tx_frames / elapsed, and tx_frames against ``due``) shows what really happened. Between
turns the worker sleeps in ``poll()`` on stdin and the rx rings until the next due frame
(at least ``MIN_WAKE_NS`` = 200 µs later, so high rates go out in batches: the
builder's fixed cost per batch is tens of µs).
"""

from __future__ import annotations

import json

LATE_NS = 1_000_000
MIN_WAKE_NS = 200_000
COMMANDS = ("configure", "start", "stop", "set_rate", "pause", "resume", "clear", "ping", "quit")
EVENTS = (
    "hello",
    "ready",
    "started",
    "tx_done",
    "stopped",
    "rate",
    "cleared",
    "pong",
    "error",
    "bye",
)
EXIT_OK = 0
EXIT_FATAL = 3


def encode(msg: dict) -> bytes:
    """One JSON line."""
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


def decode(line: bytes | str) -> dict:
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise ValueError("a message must be a JSON object")
    return msg
