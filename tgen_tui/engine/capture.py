"""Packet capture under the engine: specs, the capture process, its live view.

A capture is a process of its own (:mod:`tgen_tui.worker.capture`): taps on the ports'
interfaces inside their namespaces, a kernel BPF filter, one pcapng file. The workers'
send and receive paths are not touched, so a port that no capture watches costs
nothing, and one that is watched pays the kernel's filter and copy only.

- :class:`CaptureSpec`: what to capture (ports, a tcpdump expression or one of tgen's
  selectors, direction, stops, bounds, the file); :func:`parse_capture_arg` reads the
  command line's ``PORT[,PORT]:FILTER``; :func:`check_spec` refuses a bad one (exit 2).
- :class:`CaptureProc`: the process under trio: started in the engine's nursery, its
  status lines kept as a :class:`CaptureView` (counts, the last few frames), stopped
  with a command and a bounded wait (then killed), its final report kept.
- :func:`capture_config`: the process's plain configuration from the engine's Setup
  (each port's interface and namespace, the signature's stream names and lane stride).

Triggers (``trigger: loss``) are the engine's: it starts the process when a snapshot
first shows a lost frame on one of the spec's ports.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import trio

from tgen_tui.diagnostics import BadInput, EnvironmentProblem

SELECTOR_STREAM = "stream "
DIRECTIONS = ("both", "rx", "tx")
TRIGGERS = ("loss", "dut-event")
DEFAULT_BUDGET_PPS = 200_000
DEFAULT_RING_MB = 32


@dataclass(frozen=True)
class CaptureSpec:
    """One capture. ``filter``: a tcpdump expression, ``arpnd``, ``stream NAME`` (that
    stream's test frames) or ``other`` (frames without a signature)."""

    ports: tuple[str, ...]
    file: str
    filter: str = ""
    direction: str = "both"
    count: int = 0  # stop after this many frames kept (0: no limit)
    duration_s: float = 0.0  # stop after this long (0: with the run)
    snaplen: int = 262144
    budget_pps: int = DEFAULT_BUDGET_PPS  # frames kept per second at most (0: no limit)
    ring_mb: int = DEFAULT_RING_MB  # the kernel ring per port, MiB
    stop_on_full: bool = False  # stop when the ring first overflows
    trigger: str | None = None  # loss: when a port first loses a frame; dut-event: when
    # the first --dut-event command runs
    lost: bool = False  # keep only the tx copies of the frames that never arrived
    # lost, while the ports still send (the console): frames sent this long before the
    # stop may still be on their way and are not judged (0: the ports had stopped)
    lost_guard_s: float = 0.0

    @property
    def bpf(self) -> str:
        f = self.filter.strip()
        return "" if f == "other" or f.startswith(SELECTOR_STREAM) else f

    @property
    def stream(self) -> str | None:
        f = self.filter.strip()
        return f[len(SELECTOR_STREAM) :].strip() if f.startswith(SELECTOR_STREAM) else None

    @property
    def other(self) -> bool:
        return self.filter.strip() == "other"

    def describe(self) -> str:
        what = self.filter or "all frames"
        return f"{','.join(self.ports)} {self.direction}: {what}"


def parse_capture_arg(text: str, file: str, **kw: Any) -> CaptureSpec:
    """``PORT[,PORT...][:FILTER]`` (``p1:udp and dst port 7``, ``p0,p1``, ``p1:stream up``)."""
    ports_txt, _, filt = text.partition(":")
    ports = tuple(p.strip() for p in ports_txt.split(",") if p.strip())
    if not ports:
        raise BadInput(f"--capture {text!r}: name a port first (PORT[:FILTER], e.g. p1:udp)")
    return CaptureSpec(ports=ports, file=file, filter=filt.strip(), **kw)


def check_spec(spec: CaptureSpec, port_names: list[str], stream_names: list[str]) -> None:
    """BadInput (exit 2) for a spec that cannot run: unknown port or stream, a filter
    that libpcap rejects, bounds out of range, a file that cannot be written."""
    from tgen_tui.packets.bpf import FilterError, check_filter

    where = f"capture {spec.describe()}"
    bad = [p for p in spec.ports if p not in port_names]
    if bad:
        raise BadInput(f"{where}: unknown port {', '.join(bad)} (ports: {', '.join(port_names)})")
    if spec.direction not in DIRECTIONS:
        raise BadInput(f"{where}: direction must be one of {', '.join(DIRECTIONS)}")
    if spec.stream is not None and spec.stream not in stream_names:
        raise BadInput(
            f"{where}: no stream {spec.stream!r} (streams: {', '.join(stream_names) or 'none'})"
        )
    try:
        msg = check_filter(spec.bpf)
    except FilterError as e:
        raise EnvironmentProblem(str(e)) from None
    if msg:
        raise BadInput(f"{where}: bad filter {spec.bpf!r}: {msg}")
    if spec.count < 0 or spec.duration_s < 0 or spec.budget_pps < 0:
        raise BadInput(f"{where}: count, duration and budget must be >= 0")
    if not 64 <= spec.snaplen <= 262144:
        raise BadInput(f"{where}: snaplen must be 64..262144 bytes")
    if not 1 <= spec.ring_mb <= 4096:
        raise BadInput(f"{where}: ring must be 1..4096 MiB")
    if spec.trigger is not None and spec.trigger not in TRIGGERS:
        raise BadInput(f"{where}: trigger must be one of {', '.join(TRIGGERS)}")
    check_writable(spec.file, "capture file")


def check_writable(path: str, what: str) -> None:
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"{what} {path}: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise BadInput(f"{what} {path}: no such folder {parent}")
    if not os.access(parent, os.W_OK):
        raise BadInput(f"{what} {path}: folder {parent} is not writable")


def capture_config(spec: CaptureSpec, setup: Any) -> dict:
    """The capture process's configuration (plain data) for ``spec`` on ``setup``."""
    block = max(1, setup.n_streams // max(1, setup.lanes))
    names = [f"#{i}" for i in range(block)]
    for p in setup.compiled.streams:
        if p.index < block:
            names[p.index] = p.name
    taps = []
    for name in spec.ports:
        ps = setup.ports[name]
        if ps.host is not None:
            raise BadInput(f"capture on {name}: the port is on tester host {ps.host} (--cluster)")
        taps.append(
            {
                "port": name,
                "interface": ps.interface,
                "netns": ps.netns,
                "rx": spec.direction in ("both", "rx"),
                "tx": spec.direction in ("both", "tx") or spec.lost,
                "filter": spec.bpf,
            }
        )
    streams = None
    if spec.stream is not None:
        idx = next(p.index for p in setup.compiled.streams if p.name == spec.stream)
        streams = [idx + k * block for k in range(max(1, setup.lanes))]
    return {
        "file": spec.file,
        "taps": taps,
        "streams": streams,
        "other": spec.other,
        "names": names,
        "block": block,
        "snaplen": spec.snaplen,
        "count": spec.count,
        "duration_s": spec.duration_s,
        "budget_pps": 0 if spec.lost else spec.budget_pps,
        "ring_mb": spec.ring_mb,
        "stop_on_full": spec.stop_on_full,
        "lost": spec.lost,
        "lost_guard_s": spec.lost_guard_s,
        "comment": f"tgen-tui capture {spec.describe()}; timestamps: the kernel's "
        "CLOCK_REALTIME stamps (the ones the latency figures use, on CLOCK_MONOTONIC)",
    }


@dataclass(frozen=True)
class RecentFrame:
    """One of the last frames a capture kept (for the console's live list)."""

    port: str
    direction: str
    ts_ns: int
    length: int
    comment: str
    data: bytes


@dataclass(frozen=True)
class CaptureView:
    """A capture as the front ends see it (immutable; a new one per status line)."""

    id: int
    spec: CaptureSpec
    state: str = "starting"  # waiting (trigger) | starting | running | done | failed
    reason: str = ""  # why it stopped: count, duration, ring full, stopped, run ended
    message: str = ""  # a failure's text
    seen: int = 0
    kept: int = 0
    selected_out: int = 0
    over_budget: int = 0
    over_count: int = 0
    ring_drops: int = 0
    bytes: int = 0
    recent: tuple[RecentFrame, ...] = ()
    lost_frames: int | None = None
    lost_by_stream: dict = field(default_factory=dict)

    @property
    def not_kept(self) -> int:
        return self.over_budget + self.ring_drops

    def line(self) -> str:
        """One line: what it kept and what it could not."""
        s = f"capture {self.spec.describe()} → {self.spec.file}: {self.state}"
        if self.reason:
            s += f" ({self.reason})"
        s += f", {self.kept:,} frames kept"
        if self.lost_frames is not None:
            s += f" (the tx copies of the {self.lost_frames:,} lost frames)"
        if self.ring_drops:
            s += f", ring full: {self.ring_drops:,} not kept"
        if self.over_budget:
            s += f", over the budget of {self.spec.budget_pps:,}/s: {self.over_budget:,} not kept"
        if self.message:
            s += f": {self.message}"
        return s

    def to_doc(self) -> dict:
        return {
            "ports": list(self.spec.ports),
            "filter": self.spec.filter,
            "direction": self.spec.direction,
            "file": self.spec.file,
            "state": self.state,
            "reason": self.reason,
            "message": self.message or None,
            "seen": self.seen,
            "kept": self.kept,
            "not_kept": {"ring_full": self.ring_drops, "over_budget": self.over_budget},
            "bytes": self.bytes,
            **(
                {"lost_frames": self.lost_frames, "lost_by_stream": self.lost_by_stream}
                if self.lost_frames is not None
                else {}
            ),
        }


def _recent(items: list[dict]) -> tuple[RecentFrame, ...]:
    return tuple(
        RecentFrame(
            r["port"],
            r["dir"],
            int(r["ts_ns"]),
            int(r["len"]),
            r["comment"],
            base64.b64decode(r["data"]),
        )  # fmt: skip
        for r in items
    )


class SentFrames:
    """The frame a stream sent as sequence number ``seq``, rebuilt by its batch builder
    (the frames are a function of the frame index: the same bytes but the timestamp), so
    a received frame can be shown next to what it was before the DUT rewrote it. A
    stream split over lanes, or without that frame, gives None."""

    def __init__(self) -> None:
        self._builders: dict[tuple[int, str], Any] = {}

    def frame(self, setup: Any, stream: str, seq: int, lane: int = 0) -> bytes | None:
        from tgen_tui.packets.batch import BatchBuilder

        prog = next((p for p in setup.programs if p.name == stream), None)
        if prog is None or lane != 0 or seq < 0:
            return None
        ps = setup.ports.get(prog.port)
        if ps is not None and getattr(ps, "lanes", 1) > 1:
            return None
        key = (id(setup), stream)
        b = self._builders.get(key)
        if b is None:
            if len(self._builders) > 64:
                self._builders.clear()
            b = self._builders[key] = BatchBuilder(prog, max_batch=1)
        try:
            return b.frames(int(seq), 1, 0)[0]
        except (ValueError, IndexError, OverflowError):
            return None


class CaptureProc:
    """One capture process under trio (see the module docstring)."""

    def __init__(self, cid: int, spec: CaptureSpec, setup: Any) -> None:
        self.view = CaptureView(cid, spec)
        self.config = capture_config(spec, setup)
        self.done = trio.Event()
        self._ready = trio.Event()
        self._proc: trio.Process | None = None
        self._stderr = b""

    def _update(self, ev: dict) -> None:
        kind = ev.get("ev")
        if kind == "error":
            self.view = replace(self.view, state="failed", message=str(ev.get("message")))
            self._ready.set()
            return
        if kind == "ready":
            self.view = replace(self.view, state="running")
            self._ready.set()
            return
        counts = {
            k: int(ev.get(k) or 0)
            for k in (
                "seen",
                "kept",
                "selected_out",
                "over_budget",
                "over_count",
                "ring_drops",
                "bytes",
            )
        }
        v = replace(self.view, recent=_recent(ev.get("recent") or []), **counts)  # type: ignore[arg-type]
        if kind == "done":
            lost = ev.get("lost_frames")
            v = replace(
                v,
                state="done",
                reason=self.view.reason or str(ev.get("reason") or ""),
                lost_frames=None if lost is None else int(lost),
                lost_by_stream=dict(ev.get("lost_by_stream") or {}),
            )
        self.view = v

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Spawn the process, wait for it to be ready (then ``task_status.started``),
        follow its status lines until it ends."""
        argv = [sys.executable, "-m", "tgen_tui.worker.capture", "--parent-pid", str(os.getpid())]
        proc = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._proc = proc
        started = False
        try:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.send_all(json.dumps(self.config).encode() + b"\n")
            async with trio.open_nursery() as nursery:

                async def errs() -> None:
                    assert proc.stderr is not None
                    while chunk := await proc.stderr.receive_some(65536):
                        self._stderr = (self._stderr + chunk)[-4000:]

                nursery.start_soon(errs)
                buf = b""
                while True:
                    chunk = await proc.stdout.receive_some(1 << 20)
                    if not chunk:
                        break
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if line.strip():
                            self._update(json.loads(line))
                    if self._ready.is_set() and not started:
                        started = True
                        task_status.started()
                rc = await proc.wait()
                if self.view.state not in ("done", "failed"):
                    tail = self._stderr.decode(errors="replace").strip().splitlines()[-1:]
                    self.view = replace(
                        self.view,
                        state="failed",
                        message=f"the capture process exited with {rc}"
                        + (f": {tail[0]}" if tail else ""),
                    )
                nursery.cancel_scope.cancel()
        finally:
            if proc.returncode is None:
                with trio.CancelScope(shield=True):
                    proc.kill()
                    await proc.wait()
            self._ready.set()
            self.done.set()
            if not started:
                task_status.started()

    async def stop(
        self, reason: str = "stopped", comment: str | None = None, timeout_s: float = 10
    ) -> CaptureView:
        """Ask it to stop (final drain, the lost frames' file), wait boundedly, else kill."""
        p = self._proc
        if p is not None and p.returncode is None and p.stdin is not None:
            msg = {"cmd": "stop", "reason": reason, "comment": comment}
            try:
                await p.stdin.send_all(json.dumps(msg).encode() + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            with trio.move_on_after(timeout_s):
                await self.done.wait()
            if not self.done.is_set():
                p.kill()
                await self.done.wait()
        return self.view


class Captures:
    """The engine's captures: start (now or on a trigger), stop, views."""

    def __init__(self, nursery: trio.Nursery, setup_of: Any, latest: Any) -> None:
        self._nursery = nursery
        self._setup_of = setup_of  # () -> the engine's current Setup
        self._latest = latest  # () -> the latest StatsSnapshot
        self._procs: dict[int, CaptureProc] = {}
        self._waiting: dict[int, CaptureView] = {}
        self._cancel: dict[int, trio.CancelScope] = {}
        self._next = 1

    def views(self) -> list[CaptureView]:
        out = [p.view for p in self._procs.values()] + list(self._waiting.values())
        return sorted(out, key=lambda v: v.id)

    def view(self, cid: int) -> CaptureView:
        if cid in self._procs:
            return self._procs[cid].view
        if cid in self._waiting:
            return self._waiting[cid]
        raise BadInput(f"no capture {cid}")

    async def start(self, spec: CaptureSpec) -> CaptureView:
        """Start ``spec`` (after its trigger, if it has one); its first view."""
        setup = self._setup_of()
        check_spec(spec, list(setup.port_names), [p.name for p in setup.programs])
        cid = self._next
        self._next += 1
        if spec.trigger is not None:
            self._waiting[cid] = CaptureView(cid, spec, state="waiting")
            if spec.trigger == "loss":
                self._nursery.start_soon(self._on_loss, cid, spec)
            return self._waiting[cid]
        return await self._launch(cid, spec)

    async def fire(self, trigger: str) -> None:
        """Start every capture waiting for ``trigger`` (the run owner's ``dut-event``)."""
        for cid, v in list(self._waiting.items()):
            if v.spec.trigger == trigger:
                await self._launch(cid, v.spec)

    async def _launch(self, cid: int, spec: CaptureSpec) -> CaptureView:
        proc = CaptureProc(cid, spec, self._setup_of())
        self._procs[cid] = proc
        self._waiting.pop(cid, None)
        await self._nursery.start(proc.run)
        if proc.view.state == "failed":
            raise EnvironmentProblem(f"capture {spec.describe()}: {proc.view.message}")
        return proc.view

    async def _on_loss(self, cid: int, spec: CaptureSpec) -> None:
        with trio.CancelScope() as scope:
            self._cancel[cid] = scope
            ports = set(spec.ports)
            while True:
                snap = self._latest()
                if snap is not None and any(
                    s.lost > 0 and (s.port in ports or getattr(s, "rx_port", None) in ports)
                    for s in snap.streams
                ):
                    break
                await trio.sleep(0.05)
            await self._launch(cid, spec)

    async def stop(
        self, cid: int, reason: str = "stopped", comment: str | None = None
    ) -> CaptureView:
        if cid in self._waiting:
            if cid in self._cancel:
                self._cancel[cid].cancel()
            v = replace(self._waiting.pop(cid), state="done", reason="never triggered")
            return v
        if cid not in self._procs:
            raise BadInput(f"no capture {cid}")
        return await self._procs[cid].stop(reason, comment)

    async def stop_all(
        self, reason: str = "run ended", comment: str | None = None
    ) -> list[CaptureView]:
        out = []
        for cid in list(self._waiting):
            out.append(await self.stop(cid, reason))
        for p in list(self._procs.values()):
            out.append(await p.stop(reason, comment) if not p.done.is_set() else p.view)
        return sorted(out, key=lambda v: v.id)
