"""The tester agent: one per host, a Ray actor that runs that host's workers.

:mod:`tgen_tui.cluster.remote` places it with ``ray.remote(TesterAgent).options(
resources={"tgen:<host>": 1})``; this module does not import Ray, so the class can be
used and tested as a plain object.

The agent spawns ``python -m tgen_tui.worker --core N --parent-pid AGENT`` exactly as
the engine does on its own machine, and is a relay for the typed protocol
(:mod:`tgen_tui.worker.protocol`): command lines from the engine go to the worker's
stdin unchanged, and the worker's event lines come back unchanged on :meth:`events`
(a long poll). When a worker reports ``ready`` the agent maps its counter block
read-only and unlinks the file (a SIGKILLed agent leaves none behind);
:meth:`poll` returns a copy of every block as bytes, with the interface counters (and,
now and then, the link state) of the ports on this host, at the engine's sampling rate.

Workers are spawned from one long-lived thread, so their ``PR_SET_PDEATHSIG`` fires only
when the agent process dies (never when a Ray thread ends). :meth:`shutdown` (also run
at exit) kills every worker; a killed agent's workers die by that signal. The engine
calls the agent many times a second (samples, the event long poll); when it has not for
``WATCHDOG_S`` (a SIGKILLed engine, a hung one, a network split) the watchdog process
(:mod:`tgen_tui.cluster.watchdog`) kills the workers. It is a process of its own because
an actor whose owner was SIGKILLed stalls until Ray removes it, about 15 s later.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import platform
import queue
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from tgen_tui.worker import counters as C
from tgen_tui.worker import protocol as P
from tgen_tui.worker.client import describe_exit, stderr_suffix, worker_argv

LINK_EVERY_NS = 1_000_000_000
WATCHDOG_S = 5.0  # no call from the engine for this long: it is gone, kill the workers


class _Worker:
    """One worker process on this host and what the agent knows of it."""

    def __init__(self, wid: int, core: int, shm: str, proc: subprocess.Popen) -> None:
        self.wid = wid
        self.core = core
        self.shm = shm
        self.proc = proc
        self.cond = threading.Condition()
        self.events: collections.deque[bytes] = collections.deque()
        self.eof = False
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.view: C.CounterView | None = None
        self.send_lock = threading.Lock()

    def exit_text(self) -> str:
        return describe_exit(self.proc.returncode) + stderr_suffix(self.stderr_tail)


class TesterAgent:
    """The per-host actor. Every public method is a remote call (threaded actor)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._workers: dict[int, _Worker] = {}
        self._lock = threading.Lock()
        self._jobs: queue.Queue[tuple[Callable[[], object], queue.Queue] | None] = queue.Queue()
        self._spawner = threading.Thread(target=self._spawn_loop, name="tgen-spawner", daemon=True)
        self._spawner.start()
        self._ifprobe = None
        self._cpu = None
        self._links: dict[tuple[str | None, str], str] = {}
        self._link_ns = 0
        self._closed = False
        self._contact = 0.0
        self._dog_lock = threading.Lock()
        with contextlib.suppress(Exception):  # counter files of agents that were SIGKILLed
            from tgen_tui.engine.transport import remove_stale_counter_files

            remove_stale_counter_files()
        self._dog: subprocess.Popen | None = self._in_spawner(self._start_watchdog)  # type: ignore[assignment]
        atexit.register(self.shutdown)

    def _start_watchdog(self) -> subprocess.Popen:
        argv = [sys.executable, "-m", "tgen_tui.cluster.watchdog"]
        argv += ["--parent-pid", str(os.getpid()), "--timeout", str(WATCHDOG_S)]
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def _tell_dog(self, line: str) -> None:
        dog = self._dog
        if dog is None or dog.stdin is None:
            return
        with self._dog_lock, contextlib.suppress(OSError, ValueError):
            dog.stdin.write(line.encode() + b"\n")
            dog.stdin.flush()

    def _touch(self) -> None:
        now = time.monotonic()
        if now - self._contact >= 0.25:  # a beat at most 4 times a second
            self._contact = now
            self._tell_dog("beat")

    # ------------------------------------------------------------------ facts
    def hello(self) -> dict:
        self._touch()
        return {
            "host": self.host,
            "hostname": platform.node(),
            "pid": os.getpid(),
            "cores": sorted(os.sched_getaffinity(0)),
            "python": sys.executable,
        }

    def clock(self) -> tuple[int, int]:
        """(arrival, departure) in this host's CLOCK_MONOTONIC ns (NTP's t2 and t3)."""
        t2 = time.monotonic_ns()
        t3 = time.monotonic_ns()
        self._touch()
        return t2, t3

    def port_configs(self, specs: list[tuple]) -> list[dict]:
        """The configure entries of this host's ports (``port_config`` arguments each):
        tx_path 'auto' becomes what ``tgen calibrate`` measured on this host."""
        self._touch()
        from tgen_tui.engine.workers import port_config

        return [port_config(*a) for a in specs]

    # ------------------------------------------------------------------ workers
    def _spawn_loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, reply = job
            try:
                reply.put((True, fn()))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                reply.put((False, e))

    def _in_spawner(self, fn: Callable[[], object]) -> object:
        reply: queue.Queue = queue.Queue()
        self._jobs.put((fn, reply))
        ok, value = reply.get()
        if not ok:
            raise value  # type: ignore[misc]
        return value

    def _pick_core(self, wid: int, core: int) -> int:
        allowed = sorted(os.sched_getaffinity(0))
        if core in allowed:
            return core
        pool = allowed[1:] if len(allowed) > 1 else allowed  # keep the first for the agent
        return pool[wid % len(pool)]

    def spawn(self, wid: int, core: int) -> dict:
        """Start worker ``wid`` pinned to ``core`` (or, if this host lacks that core, to one
        of its own, all but the first). Returns its pid, core and counter file path."""
        self._touch()
        if self._closed:
            raise RuntimeError(f"agent on {self.host} is shutting down")
        self.kill(wid)
        core = self._pick_core(wid, core)
        shm = f"/dev/shm/tgen-{os.getpid()}-w{wid}-{secrets.token_hex(4)}"
        argv = worker_argv(core)

        def start() -> subprocess.Popen:
            return subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )

        proc = self._in_spawner(start)
        self._tell_dog(f"pid {proc.pid}")  # type: ignore[attr-defined]
        w = _Worker(wid, core, shm, proc)  # type: ignore[arg-type]
        with self._lock:
            self._workers[wid] = w
        threading.Thread(target=self._read_stdout, args=(w,), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(w,), daemon=True).start()
        return {"pid": w.proc.pid, "core": core, "shm": shm}

    def _read_stdout(self, w: _Worker) -> None:
        assert w.proc.stdout is not None
        for line in w.proc.stdout:
            if not line.strip():
                continue
            if w.view is None and b'"ready"' in line:
                with contextlib.suppress(ValueError):
                    if isinstance(P.decode_event(line), P.Ready):
                        self._attach(w)
            with w.cond:
                w.events.append(line)
                w.cond.notify_all()
        w.proc.wait()
        with w.cond:
            w.eof = True
            w.cond.notify_all()

    def _read_stderr(self, w: _Worker) -> None:
        assert w.proc.stderr is not None
        for line in w.proc.stderr:
            w.stderr_tail.append(line.decode(errors="replace")[:300])

    def _attach(self, w: _Worker) -> None:
        """Map the counter block the worker created at configure; then the name can go."""
        try:
            w.view = C.CounterView.open(w.shm)
        except (OSError, ValueError) as e:
            w.stderr_tail.append(f"agent on {self.host}: cannot map {w.shm}: {e}")
        with contextlib.suppress(OSError):
            os.unlink(w.shm)

    def _get(self, wid: int) -> _Worker:
        w = self._workers.get(wid)
        if w is None:
            raise RuntimeError(f"no worker {wid} on host {self.host}")
        return w

    def send(self, wid: int, data: bytes) -> None:
        """Write one encoded command line to the worker's stdin."""
        self._touch()
        w = self._get(wid)
        if w.proc.poll() is not None or w.proc.stdin is None:
            raise RuntimeError(f"worker {wid} on host {self.host} {w.exit_text()}")
        try:
            with w.send_lock:
                w.proc.stdin.write(data)
                w.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            raise RuntimeError(f"worker {wid} on host {self.host}: pipe closed: {e}") from None

    def events(self, wid: int, timeout: float = 1.0) -> tuple[list[bytes], dict | None]:
        """Event lines since the last call (waits up to ``timeout`` s for one). The second
        item is None while the worker runs, and once it exited (and every line was
        returned) ``{returncode, reason}``."""
        self._touch()
        w = self._get(wid)
        with w.cond:
            if not w.events and not w.eof:
                w.cond.wait(timeout)
        self._touch()
        with w.cond:
            lines = list(w.events)
            w.events.clear()
            done = w.eof and not w.events
        if done:
            return lines, {"returncode": w.proc.returncode, "reason": w.exit_text()}
        return lines, None

    def kill(self, wid: int) -> None:
        w = self._workers.get(wid)
        if w is not None and w.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                w.proc.kill()

    # ------------------------------------------------------------------ sampling
    def poll(self, ifaces: list[tuple[str | None, str]]) -> dict:
        """Every worker's counter block (bytes), this host's interface counters for the
        namespaces of ``ifaces`` ((netns, interface) pairs), link states (re-read once a
        second), worker CPU % and the host's clock at the reading."""
        from tgen_tui.engine.probes import CpuProbe, InterfaceProbe

        self._touch()
        if self._ifprobe is None:
            self._ifprobe, self._cpu = InterfaceProbe(), CpuProbe()
        blocks = {}
        cpu = {}
        for wid, w in list(self._workers.items()):
            if w.view is not None and w.view.arr is not None:
                blocks[wid] = w.view.arr.tobytes()
            cpu[wid] = self._cpu.process(w.proc.pid) if w.proc.poll() is None else 0.0
        ifc = {}
        for ns in {n for n, _ in ifaces}:
            try:
                ifc[ns] = self._ifprobe.read(ns)
            except OSError:
                ifc[ns] = {}
        now = time.monotonic_ns()
        if now - self._link_ns >= LINK_EVERY_NS:
            self._link_ns = now
            for ns, name in ifaces:
                self._links[(ns, name)] = InterfaceProbe.link_state(ns, name)
        return {
            "t_ns": time.monotonic_ns(),
            "blocks": blocks,
            "ifc": ifc,
            "links": dict(self._links),
            "cpu": cpu,
        }

    # ------------------------------------------------------------------ the end
    def shutdown(self) -> int:
        """Kill every worker (the engine quits them first); returns how many were running."""
        self._closed = True
        n = 0
        for w in list(self._workers.values()):
            if w.proc.poll() is None:
                n += 1
                with contextlib.suppress(ProcessLookupError):
                    w.proc.kill()
        for w in list(self._workers.values()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(5)
            with contextlib.suppress(OSError):
                os.unlink(w.shm)
            if w.view is not None:
                w.view.close()
                w.view = None
        dog, self._dog = self._dog, None
        if dog is not None and dog.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                dog.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(subprocess.TimeoutExpired):
                dog.wait(2)
            if dog.poll() is None:
                dog.kill()
        return n


__all__ = ["TesterAgent", "describe_exit"]
