"""The engine's event log: typed events with times, a pull cursor and push subscriptions."""

from __future__ import annotations

import time
from typing import Any

import trio

from tgen_tui.engine.api import EngineEvent, EngineNotice, EngineWarning

KEEP = 10_000  # a long console session keeps the last 10,000 events


class EventLog:
    """Every event since the engine opened (the last ``KEEP``), in order."""

    def __init__(self) -> None:
        self.t_open = time.monotonic()
        self._events: list[EngineEvent] = []
        self._n = 0
        self._subs: list[trio.MemorySendChannel] = []

    def now(self) -> float:
        """Seconds since the engine opened (the ``t`` of events)."""
        return time.monotonic() - self.t_open

    def emit(self, ev: EngineEvent) -> None:
        self._events.append(ev)
        self._n += 1
        del self._events[:-KEEP]
        fan_out(self._subs, ev)

    def notice(self, message: str) -> None:
        self.emit(EngineNotice(self.now(), message))

    def warning(self, message: str) -> None:
        self.emit(EngineWarning(self.now(), message))

    def lines(self) -> list[str]:
        """The log as text lines with times (for result files and logs)."""
        return [f"[{e.t:8.2f}s] {e.text()}" for e in self._events]

    def all(self) -> list[EngineEvent]:
        return list(self._events)

    def since(self, cursor: int) -> tuple[int, list[EngineEvent]]:
        """Events after ``cursor`` (the count already read; start with 0) and the new cursor."""
        dropped = self._n - len(self._events)
        return self._n, self._events[max(0, cursor - dropped) :]

    def subscribe(self, buffer: int = 1000) -> trio.MemoryReceiveChannel:
        send, recv = trio.open_memory_channel[EngineEvent](buffer)
        self._subs.append(send)
        return recv

    def close(self) -> None:
        for ch in self._subs:
            ch.close()


def fan_out(channels: list[trio.MemorySendChannel], item: Any) -> None:
    """Send ``item`` to every subscriber without waiting: one whose buffer is full misses
    it, a closed one is dropped from ``channels``."""
    for ch in list(channels):
        try:
            ch.send_nowait(item)
        except trio.WouldBlock:
            pass
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            channels.remove(ch)


__all__ = ["EventLog", "fan_out"]
