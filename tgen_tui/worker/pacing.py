"""How a port's frames are spaced on the wire: the methods and the tester-side qdisc.

A port's ``pacing`` (resolved by the engine, :mod:`tgen_tui.calibrate.pacing`) is one of:

- ``qdisc``: the kernel spaces the frames. The worker puts a token-bucket filter (TBF) as
  the root qdisc of its own port, at the port's frame rate, and hands the kernel frames
  up to ``QDISC_LOOKAHEAD_NS`` before they are due, in batches, waking about once per
  ``QDISC_WAKE_NS``: the TBF releases them one by one, and the worker sleeps (its CPU is
  in proportion to the batches, not the frames). Every frame counts as the port's
  largest frame (``mpu``), so the gap is one frame time whatever the frame's size (an
  IMIX stream is spaced by frames, not bytes). The bucket holds 2.5 frames: a timer that
  fires a little late is made up by the next frame, not lost from the rate.
- ``timer``: user space releases each frame at its own due time: it sleeps (1 ns timer
  slack) to a margin before the due time, spins the rest, and sends what is due in one
  syscall. The margin is measured, not assumed (:class:`WakeMargin`): on the 2-core VM a
  sleep of 20-300 µs woke 20-30 µs late at p50 and 30-70 µs at p99, so a fixed 20 µs
  margin left about half the frames late (and the next ones sent at once after them). For drawn inter-departure laws, bursts
  and on/off schedules, which a TBF would smooth away; it costs CPU per frame.
- ``burst``: today's behaviour: every due frame of a turn in one batch (the peak rate).

The TBF is the tester's own, on the interface the user named, with the handle
``QDISC_HANDLE`` so that tgen removes only its own (also one left by a worker that was
killed). Imports: the standard library only (DESIGN rule 2).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess

METHODS = ("qdisc", "timer", "burst")
QDISC_HANDLE = "7467:"  # "tg"
QDISC_LOOKAHEAD_NS = 4_000_000  # frames go to the TBF up to 4 ms before they are due
QDISC_WAKE_NS = 2_000_000  # ... in batches about every 2 ms
# A port whose streams all send at a constant rate (no shape) wakes about once per
# QDISC_TURN_FRAMES frames (between QDISC_WAKE_NS and QDISC_STEADY_WAKE_NS apart) and
# looks two wake periods ahead: a turn's Python and numpy cost hardly depends on how many
# frames it builds, so fewer, larger turns cost less CPU (lab.yaml's two workers at
# 20 kpps each, lab RPS off: 81-85 % of a core with 2 ms turns, 25-27 % with 512
# frames / 20 ms, 11-22 % with 1,024 / 50 ms; benchmarks/worker_cpu.py). A
# shaped port keeps the short horizon: the TBF's rate follows the frames it holds, and a
# step seen 40 ms early would move ~1 % of a second's frames into the wrong second.
QDISC_TURN_FRAMES = 1024
QDISC_STEADY_WAKE_NS = 50_000_000
QDISC_BUCKET_FRAMES = 2.5  # the token bucket: late timers are made up, bursts are not made
QDISC_LIMIT_S = 1.0  # the TBF's queue holds 1 s of frames (then the kernel refuses more)
QDISC_DRAIN_MAX_NS = 2_000_000_000  # tx done waits at most 2 s for the TBF to empty
QDISC_KEEP_MIN = 64  # at a stop, a TBF queue up to this many frames always drains
QDISC_KEEP_DRAIN = 0.8  # ... and one the TBF releases within 80 % of the drain
TRIM_GAIN = 4.0  # the TBF runs 1 % faster per 2.5 ms of lag behind the due times
TRIM_MAX = 0.08  # ... at most 8 % off the asked rate: a stall of the worker is caught up
# (50 ms of lag in about 0.7 s) with every gap still within 10 % of the asked one
TRIM_STEP = 0.002  # ... changed when the trim moves by 0.2 % (a change refills the bucket)
TRIM_EVERY_NS = 100_000_000  # the lag is averaged over 100 ms
TIMER_SPIN_NS = 20_000  # timer pacing sleeps at least to 20 µs before a frame is due ...
TIMER_SPIN_START_NS = 100_000  # ... to 100 µs until the host's wake-up lateness is measured
TIMER_SPIN_MAX_NS = 500_000  # ... and never more than 500 µs (then it spins, not sleeps)
TIMER_WAKES = 256  # the margin is the p99 of the last 256 wake-ups' lateness, + 5 µs
TIMER_COALESCE_NS = 1_000  # frames due within 1 µs of each other leave in one syscall
TIMER_TURN_NS = 2_000_000  # timer pacing gives rx and commands a turn at least every 2 ms
# ... the compiled loop (worker.cpace) takes that turn, once 2 ms have passed, only at a gap
# of 500 µs before the next frame (a turn of receive work made the frames due in it late,
# then left back to back), and in any case within 50 ms
TIMER_YIELD_GAP_NS = 500_000
TIMER_TURN_MAX_NS = 50_000_000


class WakeMargin:
    """How long before a due frame the timer pacer must wake: the p99 of the host's
    wake-up lateness over the last ``TIMER_WAKES`` sleeps, + 5 µs, within
    [TIMER_SPIN_NS, TIMER_SPIN_MAX_NS]; TIMER_SPIN_START_NS until the first window."""

    def __init__(self) -> None:
        self.ns = TIMER_SPIN_START_NS
        self.asked = 0  # the wake-up asked for by the last sleep (0: none pending)
        self.late: list[int] = []

    def sleep_until(self, wake_ns: int) -> int:
        """Record the wake-up asked for; return it (the step's next wake)."""
        self.asked = wake_ns
        return wake_ns

    def add(self, late_ns) -> None:
        """Wake-up lateness samples measured elsewhere (the compiled pacer's sleeps)."""
        for v in late_ns:
            self.late.append(int(v))
            if len(self.late) >= TIMER_WAKES:
                self._update()

    def _update(self) -> None:
        p99 = sorted(self.late)[int(0.99 * (len(self.late) - 1))]
        self.ns = min(TIMER_SPIN_MAX_NS, max(TIMER_SPIN_NS, p99 + 5_000))
        self.late.clear()

    def woke(self, now_ns: int) -> None:
        """A turn began at ``now_ns``: a wake-up at or after the one asked is a sample
        (an earlier one was a command or a retired block, not the end of the sleep)."""
        if not self.asked or now_ns < self.asked:
            return
        self.late.append(now_ns - self.asked)
        self.asked = 0
        if len(self.late) >= TIMER_WAKES:
            self._update()


class PacingError(OSError):
    """The tester's qdisc could not be set (the message says what tc answered)."""


def _tc(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("tc") or "/usr/sbin/tc"
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=10)


def tbf_args(pps: float, frame_len: int) -> list[str]:
    """The ``tc ... tbf`` parameters that space ``frame_len``-byte frames at ``pps``."""
    L = max(60, int(frame_len))
    rate = max(8, int(round(pps * L)))  # bytes/s; every frame counts as L bytes (mpu)
    burst = int(math.ceil(QDISC_BUCKET_FRAMES * L))
    limit = max(64 * 1024, int(rate * QDISC_LIMIT_S))
    return ["rate", f"{rate}bps", "burst", str(burst), "mpu", str(L), "limit", str(limit)]


class QdiscPacer:
    """The TBF on one port (construct and call it inside the port's network namespace).

    The TBF runs at the port's frame rate times a trim factor that keeps the frames'
    departures on their due times: the kernel's transmit stamps of sampled frames give
    the lag (departure - due), and :meth:`trim` speeds the TBF up (at most
    ``TRIM_MAX``) while it lags, slows it down while it runs ahead. Without it, every
    timer that fires later than the bucket can make up costs the rate a little (0.3-0.7 %
    measured on a VM). Changes go to one ``tc -batch`` child (a pipe write, no fork per
    change), which ends with the worker's pipe.
    """

    def __init__(self, interface: str, frame_len: int) -> None:
        self.interface = interface
        self.frame_len = int(frame_len)
        self.pps = 0.0  # the ports' asked frame rate
        self.factor = 1.0  # the trim
        self.installed = False
        self._batch: subprocess.Popen | None = None

    def _cmd(self, verb: str, pps: float) -> list[str]:
        dev = ["qdisc", verb, "dev", self.interface, "root", "handle", QDISC_HANDLE, "tbf"]
        return dev + tbf_args(pps, self.frame_len)

    def set_rate(self, pps: float) -> None:
        """Space the port's frames at ``pps`` (0: leave the last rate; nothing is sent)."""
        if pps <= 0 or (self.installed and abs(pps - self.pps) <= 1e-9 * pps):
            return
        self.pps = float(pps)
        if self.installed:
            self._change()
            return
        r = _tc(*self._cmd("replace", pps))
        if r.returncode != 0:
            msg = (r.stderr or r.stdout).strip().splitlines()
            raise PacingError(
                f"pacing: qdisc on {self.interface}: tc said: {msg[-1] if msg else r.returncode}"
            )
        self.installed = True
        exe = shutil.which("tc") or "/usr/sbin/tc"
        self._batch = subprocess.Popen(
            [exe, "-force", "-batch", "-"], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    def _change(self) -> None:
        if self._batch is None or self._batch.stdin is None:
            return
        try:
            self._batch.stdin.write(" ".join(self._cmd("change", self.pps * self.factor)) + "\n")
            self._batch.stdin.flush()
        except (BrokenPipeError, OSError):
            self._batch = None

    def backlog(self) -> int:
        """Frames the TBF holds now (``tc -s``, inside the port's namespace); 0: unknown."""
        shown = _tc("-s", "qdisc", "show", "dev", self.interface, "root").stdout
        m = re.search(r"backlog \S+ (\d+)p", shown)
        return int(m.group(1)) if m else 0

    def drop_queue(self) -> None:
        """Drop what the TBF holds: a new TBF in its place, at the same rate (inside the
        port's namespace). The dropped frames were handed to the kernel but never leave:
        the engine counts them as the port's frames not put on the wire (tx_unsent)."""
        if self.installed:
            _tc("qdisc", "del", "dev", self.interface, "root", "handle", QDISC_HANDLE)
            _tc(*self._cmd("replace", self.pps * self.factor))

    def trim(self, lag_s: float) -> None:
        """Follow the due times: ``lag_s`` is how far the port's frames leave behind them."""
        f = 1.0 + max(-TRIM_MAX, min(TRIM_MAX, TRIM_GAIN * lag_s))
        if self.installed and abs(f - self.factor) >= TRIM_STEP:
            self.factor = f
            self._change()

    def remove(self) -> None:
        """Take the TBF off again (quietly: the port may be gone)."""
        if self._batch is not None and self._batch.stdin is not None:
            try:
                self._batch.stdin.close()
                self._batch.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self._batch.kill()
            self._batch = None
        if self.installed:
            remove_tbf(self.interface)
            self.installed = False


def remove_tbf(interface: str) -> bool:
    """Remove tgen's TBF from ``interface`` (current namespace) if it is there; whether it was."""
    shown = _tc("qdisc", "show", "dev", interface, "root")
    if f"tbf {QDISC_HANDLE}" not in shown.stdout:
        return False
    _tc("qdisc", "del", "dev", interface, "root", "handle", QDISC_HANDLE)
    return True


__all__ = [
    "METHODS",
    "PacingError",
    "QdiscPacer",
    "remove_tbf",
    "tbf_args",
    "QDISC_HANDLE",
    "QDISC_LOOKAHEAD_NS",
    "QDISC_STEADY_WAKE_NS",
    "QDISC_TURN_FRAMES",
    "QDISC_WAKE_NS",
    "TIMER_SPIN_NS",
    "WakeMargin",
    "TIMER_COALESCE_NS",
    "TIMER_TURN_MAX_NS",
    "TIMER_TURN_NS",
    "TIMER_YIELD_GAP_NS",
    "TRIM_EVERY_NS",
]
