"""An open run, as a front end holds it: the engine's commands and feed, and the run's
own record.

A :class:`Session` wraps an engine (the real one, or the console's fake) and is what
``tgen run``, the console and ``tgen serve`` talk to while the engine is open. It passes
every command and reading through (:class:`~tgen_tui.engine.api.EngineAPI`,
:class:`~tgen_tui.engine.api.EngineFeed`), and adds what a run needs beyond one engine's
life: the time it spent sending and the counters a clear would lose
(:class:`~tgen_tui.session.record.InteractiveRecord`), and, when it ends, its final
snapshot and the engine's report of it, taken before the engine closes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tgen_tui.session.record import InteractiveRecord

if TYPE_CHECKING:
    from tgen_tui.engine.api import EngineDescription, EngineEvent
    from tgen_tui.engine.snapshot import StatsSnapshot
    from tgen_tui.packets.compile import CompiledProfile
    from tgen_tui.results.models import RunResult


class Session:
    """The engine of one run and the run's record (see the module docstring)."""

    def __init__(self, engine: Any, profile_path: str = "", thresholds: list[str] | None = None):
        self.engine = engine
        self.profile_path = profile_path
        self.thresholds = list(thresholds or [])
        self.record = InteractiveRecord()
        self.duration_s: float | None = None  # how long it sent (None: the record's time)
        self.final: StatsSnapshot | None = None
        self.report: RunResult | None = None  # the engine's report of the final snapshot

    # ------------------------------------------------------------------ commands (EngineAPI)
    def describe(self) -> EngineDescription:
        return self.engine.describe()

    def latest_snapshot(self) -> StatsSnapshot | None:
        """The newest snapshot; each one read counts toward the run's sending time."""
        snap = self.engine.latest_snapshot()
        if snap is not None:
            self.record.observe(snap, time.monotonic())
        return snap

    def events_since(self, cursor: int) -> tuple[int, list[EngineEvent]]:
        return self.engine.events_since(cursor)

    async def start(self, ports: list[str] | None = None) -> None:
        await self.engine.start(ports)

    async def stop(self, ports: list[str] | None = None) -> None:
        await self.engine.stop(ports)

    async def set_rate(self, target: str, rate: str | float) -> float:
        return await self.engine.set_rate(target, rate)

    async def scale_rates(self, factor: float, ports: list[str] | None = None) -> None:
        await self.engine.scale_rates(factor, ports)

    async def pause(self, stream: str) -> None:
        await self.engine.pause(stream)

    async def resume(self, stream: str) -> None:
        await self.engine.resume(stream)

    async def clear(self, ports: list[str] | None = None, streams: list[str] | None = None) -> None:
        """Zero counters; the run's record keeps what they held (its result covers all)."""
        before = await self.sample_now()
        if before is not None:
            self.record.before_clear(before)
        await self.engine.clear(ports, streams)

    async def reload(self, compiled: CompiledProfile) -> None:
        await self.engine.reload(compiled)

    # ------------------------------------------------------------------ feed (EngineFeed)
    async def sample_now(self) -> StatsSnapshot | None:
        sample = getattr(self.engine, "sample_now", None)
        return await sample() if sample is not None else self.engine.latest_snapshot()

    def __getattr__(self, name: str) -> Any:
        """The rest of the engine's feed (snapshots, subscribe_events, plan_text, ...)."""
        if name == "engine":  # not set yet (copying): no recursion
            raise AttributeError(name)
        return getattr(self.engine, name)

    # ------------------------------------------------------------------ the end
    async def conclude(self, partial: bool) -> None:
        """Stop every port, take the final snapshot and the engine's report of it (with the
        counters carried over clears), before the engine closes."""
        await self.engine.stop()
        final = await self.engine.final_snapshot()
        self.record.observe(final, time.monotonic())
        self._report(final, partial)

    def conclude_now(self, partial: bool) -> None:
        """The same from the last snapshot, without awaiting (a console whose loop is gone:
        the SIGTERM/SIGHUP watchdog). Does nothing when the run concluded already."""
        if self.report is not None:
            return
        final = self.engine.latest_snapshot()
        if final is None:
            return
        self._report(final, partial)

    def _report(self, final: StatsSnapshot, partial: bool) -> None:
        """The final figures (counters carried over clears) and the engine's report of
        them, over the run's sending time unless a duration was set."""
        self.final = self.record.merged(final)
        duration = self.duration_s if self.duration_s is not None else self.record.active_s
        self.report = self.engine.report(
            self.final,
            duration_s=duration,
            partial=partial,
            profile_path=self.profile_path,
            thresholds=self.thresholds,
        )


__all__ = ["Session"]
