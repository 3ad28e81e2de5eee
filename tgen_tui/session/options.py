"""What a front end asks of one run, typed: the options ``tgen run``, the console and the
methodology verbs parse their command lines into, and nothing else reaches the core.

Plain data. :meth:`RunOptions.params` is what the results store files as the run's
parameters (the options as given, JSON-able).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tgen_tui.engine.capture import CaptureSpec
from tgen_tui.engine.dut_events import DutEvent
from tgen_tui.engine.options import TransportFactory
from tgen_tui.engine.thresholds import Threshold
from tgen_tui.results.record import StoreOptions


@dataclass(frozen=True)
class RunOptions:
    """One run of a profile (defaults as ``tgen run`` has them)."""

    profile: str  # the profile's path
    duration_s: float | None = None  # how long to send (None: the profile's duration)
    ports: tuple[str, ...] | None = None  # ports to use (None: all)
    cores: tuple[int, ...] | None = None  # cores for workers (None: all but the first)
    lanes: int | None = None  # sender lanes of every port (None: each port's own)
    pacing: str | None = None  # every port's pacing (None: each port's own; worker.pacing)
    rate_scale: float = 1.0  # every stream's and UDP flow's rate times this
    interval_s: float = 0.1  # snapshot interval
    drain_s: float = 0.5  # keep counting after sending stops
    thresholds: tuple[Threshold, ...] = ()  # --fail-on
    dut_netns: str | None = None  # the DUT (replaces the profile's, as a whole)
    dut_ssh: str | None = None
    flush_dut: bool = False  # empty the DUT's conntrack table first
    dut_events: tuple[DutEvent, ...] = ()  # commands on the DUT at times of the run
    cluster: str | None = None  # Ray head: ports that name a host run there
    transport: TransportFactory | None = field(default=None, compare=False)
    preflight: bool = False  # tgen preflight's checks first (exit 1 on a failure)
    tcp_handshake: bool = True  # open a tcp.handshake stream's connections around the run
    # (methodology verbs make their own TCP connections per trial: False)
    quiet: bool = False  # no progress, no tables, no preflight table
    store: StoreOptions = field(default_factory=StoreOptions)
    test: str = "run"  # the store's test name: run (tgen run), tui (the console)
    front_end: str = "tgen run"  # what the result's session says ran it
    extra_params: Mapping[str, Any] = field(default_factory=dict)  # a verb's own options
    captures: tuple[CaptureSpec, ...] = ()  # --capture, --capture-lost (engine/capture.py)

    def params(self) -> dict[str, Any]:
        """The options as the results store files them (plain, JSON-able)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in (
                "store",
                "transport",
                "extra_params",
                "front_end",
                "test",
                "tcp_handshake",
            ):
                continue
            v = getattr(self, f.name)
            if f.name == "thresholds":
                v = [t.text for t in v]
            elif f.name == "captures":
                v = [c.describe() + (" (lost)" if c.lost else "") for c in v]
            elif f.name == "dut_events":
                v = [f"{e.at_s:g}s: {e.command}" for e in v]
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out | dict(self.extra_params)


__all__ = ["RunOptions", "StoreOptions"]
