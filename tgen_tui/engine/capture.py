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
from typing import Any

import trio

from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.engine.capturespec import (
    DEFAULT_BUDGET_PPS,
    DEFAULT_RING_MB,
    DIRECTIONS,
    SELECTOR_STREAM,
    TRIGGERS,
    CaptureSpec,
    SentFrames,
    capture_config,
    check_spec,
    parse_capture_arg,
)


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
                    s.lost > 0 and (s.port in ports or s.rx_port in ports) for s in snap.streams
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


__all__ = [
    "DEFAULT_BUDGET_PPS",
    "DEFAULT_RING_MB",
    "DIRECTIONS",
    "SELECTOR_STREAM",
    "TRIGGERS",
    "CaptureProc",
    "CaptureSpec",
    "CaptureView",
    "Captures",
    "RecentFrame",
    "SentFrames",
    "capture_config",
    "check_spec",
    "parse_capture_arg",
]
