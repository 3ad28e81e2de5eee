"""The guest-mode host: a trio 'engine' inside Textual's asyncio loop, commands, errors, close."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import trio
from textual.app import App

from tgen_tui.engine.api import EngineCommandError
from tgen_tui.ui.host import GuestEngineHost


class TrioThing:
    """A trivial trio engine: a ticking task, a command that sleeps in trio, a refusal."""

    def __init__(self) -> None:
        self.ticks = 0
        self.closed = False

    async def tick(self) -> None:
        while True:
            await trio.sleep(0.01)
            self.ticks += 1

    async def double(self, x: int) -> int:
        await trio.sleep(0.01)  # a trio-only await: fails unless we are in trio
        return 2 * x

    async def refuse(self) -> None:
        await trio.sleep(0)
        raise EngineCommandError("p9", "no such port")


@contextlib.asynccontextmanager
async def trio_thing_cm(thing: TrioThing):
    async with trio.open_nursery() as n:
        n.start_soon(thing.tick)
        try:
            yield thing
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.01)
                thing.closed = True
            n.cancel_scope.cancel()


class HostApp(App):
    def __init__(self, host: GuestEngineHost) -> None:
        super().__init__()
        self.host = host
        self.errors: list[BaseException] = []
        host.on_error = self.errors.append

    async def on_mount(self) -> None:
        await self.host.astart()

    async def on_unmount(self) -> None:
        await self.host.aclose()


@pytest.mark.timeout(30)
def test_guest_run_ticks_runs_commands_reports_refusals_and_closes() -> None:
    asyncio.run(_guest_run())


async def _guest_run() -> None:
    thing = TrioThing()
    host = GuestEngineHost(lambda: trio_thing_cm(thing))
    app = HostApp(host)
    async with app.run_test() as pilot:
        for _ in range(100):
            await pilot.pause(0.02)
            if thing.ticks >= 5:
                break
        assert host.engine is thing
        assert thing.ticks >= 5, "the trio task did not tick inside Textual's loop"
        assert await host.call(thing.double, 21) == 42
        host.submit(thing.refuse)
        for _ in range(50):
            await pilot.pause(0.02)
            if app.errors:
                break
        assert [str(e) for e in app.errors] == ["p9: no such port"]
        assert app.is_running
    # on_unmount awaited trio's done callback: the engine's shielded clean-up ran
    assert thing.closed
    assert host.closed and host.error is None
