"""Engine hosts: where the engine's coroutines run while Textual owns the event loop.

:class:`GuestEngineHost` runs the real trio engine in trio *guest mode* on Textual's
asyncio loop (DESIGN rule 5, CONSOLE.md): one guest run per app, started from the app's
``on_mount``, ended by cancelling its root scope and awaiting trio's done callback in
``on_unmount``. :class:`AsyncioEngineHost` runs the fake engine directly on asyncio, for
Pilot and snapshot tests. Both offer the same small interface:

- ``engine``: the :class:`~tgen_tui.engine.api.EngineAPI` once it is open (else None);
- ``call(fn, *args)``: run an engine command; an asyncio future of its result;
- ``submit(fn, *args)``: the same, fire and forget; refusals go to ``on_error``;
- ``aclose()``: stop everything and wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from tgen_tui.engine.api import EngineAPI

if TYPE_CHECKING:  # trio itself is imported when a guest run starts
    import trio
    from outcome import Outcome

EngineFactory = Callable[[], AbstractAsyncContextManager[EngineAPI]]
ErrorSink = Callable[[BaseException], None]


class _HostBase:
    """What both hosts share: the engine, readiness, and error reporting."""

    def __init__(self, factory: EngineFactory, owner: Any = None) -> None:
        self.factory = factory
        self.owner = owner  # the run owner (tgen_tui.session.owner.RunOwner); None: the fake
        self.engine: EngineAPI | None = None
        self.error: BaseException | None = None  # why the engine could not open, or died
        self.on_error: ErrorSink = lambda e: None  # refusals of commands (set by the app)
        self.on_ready: Callable[[], None] = lambda: None
        self.on_failed: Callable[[BaseException], None] = lambda e: None
        self._done: asyncio.Future | None = None

    def submit(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> asyncio.Future:
        """Run ``fn(*args)`` in the engine's world; errors go to ``on_error``, never raise."""
        fut = self.call(fn, *args)

        def _report(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is not None:
                self.on_error(f.exception())  # type: ignore[arg-type]

        fut.add_done_callback(_report)
        return fut

    def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> asyncio.Future:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._done is not None and self._done.done()


class AsyncioEngineHost(_HostBase):
    """Runs an engine whose coroutines await nothing trio-specific (the fake) on asyncio."""

    def __init__(self, factory: EngineFactory, owner: Any = None) -> None:
        super().__init__(factory, owner)
        self._cm: AbstractAsyncContextManager[EngineAPI] | None = None

    async def astart(self) -> None:
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        self._cm = self.factory()
        try:
            self.engine = await self._cm.__aenter__()
        except Exception as e:  # noqa: BLE001 - reported to the app, which exits with it
            self.error = e
            self._done.set_result(None)
            self.on_failed(e)
            return
        self.on_ready()

    def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> asyncio.Future:
        return asyncio.ensure_future(fn(*args))

    async def aclose(self) -> None:
        if self._done is None or self._done.done():
            return
        if self._cm is not None:
            await self._cm.__aexit__(None, None, None)
        self._done.set_result(None)


class GuestEngineHost(_HostBase):
    """Runs the trio engine in guest mode on the running asyncio loop: the run owner's
    whole run (``RunOwner.open``: hooks, handshakes, the engine as a Session, and the
    end), or any factory of an engine context."""

    def __init__(self, factory: EngineFactory, owner: Any = None) -> None:
        super().__init__(factory, owner)
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._root_scope: trio.CancelScope | None = None

    async def astart(self) -> None:
        import trio

        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._done = done

        def done_callback(outcome: Outcome[None]) -> None:
            try:
                outcome.unwrap()
            except BaseException as e:  # noqa: BLE001 - the engine's end, reported, not raised
                if self.error is None and not _is_cancel(e):
                    self.error = _first_leaf(e)
                    self.on_failed(self.error)
            if not done.done():
                done.set_result(None)

        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=done_callback,
            host_uses_signal_set_wakeup_fd=True,
        )

    async def _main(self) -> None:
        import trio

        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._root_scope = nursery.cancel_scope
            async with self.factory() as eng:
                self.engine = eng
                self.on_ready()
                await trio.sleep_forever()

    def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if self._nursery is None or self._token is None or self.closed:
            fut.set_exception(RuntimeError("the engine is not running"))
            return fut

        async def runner() -> None:
            try:
                result = await fn(*args)
            except Exception as e:  # noqa: BLE001 - handed to the UI, never crashes the engine
                if not fut.done():
                    fut.set_exception(e)
                return
            if not fut.done():
                fut.set_result(result)

        self._token.run_sync_soon(self._nursery.start_soon, runner)
        return fut

    async def aclose(self) -> None:
        """Cancel the root scope (the engine stops its ports, shielded) and wait for trio."""
        if self._done is None:
            return
        if not self._done.done() and self._token is not None and self._root_scope is not None:
            with contextlib.suppress(RuntimeError):  # trio already finished
                self._token.run_sync_soon(self._root_scope.cancel)
        await self._done


def _is_cancel(e: BaseException) -> bool:
    import trio

    if isinstance(e, BaseExceptionGroup):
        return all(_is_cancel(x) for x in e.exceptions)
    return isinstance(e, trio.Cancelled)


def _first_leaf(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return e


@contextlib.asynccontextmanager
async def fake_engine_cm(engine: Any, profile_path: str = "") -> AsyncIterator[EngineAPI]:
    """A ready fake engine as the factory's context manager, in a Session as the real
    engine is (tgen_tui.session): on exit its ports stop and the run concludes (final
    snapshot, report)."""
    from tgen_tui.session.session import Session

    s = Session(engine, profile_path)
    try:
        yield s
    finally:
        await s.conclude(partial=False)


__all__ = ["AsyncioEngineHost", "EngineFactory", "GuestEngineHost", "fake_engine_cm"]
