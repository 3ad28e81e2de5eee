"""``tgen run``'s drive of a run: start every port, send for the duration (or until the
finite streams and flows are done, or a stop signal), stop, and hand every snapshot and
event to the front end's outputs on the way.

It is the body :meth:`tgen_tui.session.owner.RunOwner.run` runs between ``begin`` and
``end``; the front end gives it its :class:`Outputs` (NDJSON, the progress line) and
renders the result afterwards.
"""

from __future__ import annotations

import math
import time
from typing import Any, Protocol

import trio

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.portcontrol import START_LEAD_NS
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.schedule import DueTimes
from tgen_tui.session.owner import RunOwner


class Outputs(Protocol):
    """What a headless front end shows while a run goes."""

    def plan(self, lines: list[str]) -> None:
        """The worker -> core -> port -> streams/flows mapping, once the engine is open."""
        ...

    def snapshot(self, snap: Any) -> None: ...

    def event(self, ev: Any) -> None: ...


def runs_until_stopped(compiled: CompiledProfile) -> bool:
    """True when a stream or socket flow of ``compiled`` has no end of its own (count or
    stop time): such a run needs a duration."""
    if any(f.schedule.stop_s is None for f in compiled.flows):
        return True
    return any(DueTimes(p.schedule).total() is None for p in compiled.streams)


def check_duration(owner: RunOwner) -> None:
    """BadInput for a run with no duration that would never end by itself."""
    if owner.duration_s is None and runs_until_stopped(owner.compiled):
        raise BadInput("the profile runs until stopped: give --duration (e.g. --duration 10s)")


async def drive(owner: RunOwner, out: Outputs) -> None:
    """Open the engine, start every port, wait, stop; the final snapshot goes to ``out``
    too. The session keeps how long it sent (its ``duration_s``)."""
    # the workers know the run's end: frames handed to the kernel ahead of their time
    # (a TBF's lookahead) never include frames due after it
    async with owner.engine(send_for_s=owner.duration_s) as s:
        out.plan(s.plan_text())
        snaps = s.snapshots()
        events = s.subscribe_events()
        for ev in s.events_since(0)[1]:  # what happened while the workers started
            out.event(ev)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump, snaps, out.snapshot)
            nursery.start_soon(_pump, events, out.event)
            t_start = time.monotonic()
            try:
                with owner.interruptible():  # a stop signal ends the sending here
                    await s.start()
                    if owner.opts.dut_events:  # --dut-event: its own task, ended with it
                        nursery.start_soon(owner.run_dut_events, t_start)
                    await _wait(s, owner.duration_s)
            finally:
                s.duration_s = time.monotonic() - t_start
                with trio.CancelScope(shield=True):
                    await s.stop()
                nursery.cancel_scope.cancel()
        _drain(snaps, out.snapshot)  # what the stop published, in order
        _drain(events, out.event)
    if s.final is not None:
        out.snapshot(s.final)


async def _wait(s: Any, duration: float | None) -> None:
    """Until the duration passed, finite streams and flows are done, or every port failed."""
    finite = s.finite_total() is not None
    # the workers' clock starts START_LEAD_NS after the start was sent, and they end the
    # sending at t0 + duration (EngineOptions.send_for_s): stop after that, not before
    lead = START_LEAD_NS / 1e9
    deadline = time.monotonic() + duration + lead if duration is not None else math.inf
    while time.monotonic() < deadline:
        await trio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        if finite and s.ports_done_sending():
            return
        if all(st == "failed" for st in s.port_states().values()):
            return


async def _pump(channel: Any, sink: Any) -> None:
    async for item in channel:
        sink(item)


def _drain(channel: Any, sink: Any) -> None:
    """Hand on what is still queued in a subscription, then close it."""
    while True:
        try:
            sink(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
    channel.close()


__all__ = ["Outputs", "check_duration", "drive", "runs_until_stopped"]
