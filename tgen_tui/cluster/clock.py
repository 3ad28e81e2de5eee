"""Clock offsets between the engine and each tester host, and what latency may use them.

NTP's four timestamps, over Ray: the engine notes t1 (its CLOCK_MONOTONIC), the agent
notes t2 on arrival and t3 on return (its CLOCK_MONOTONIC), the engine notes t4. Then::

    offset = ((t2 - t1) + (t3 - t4)) / 2      # agent clock - engine clock
    delay  = (t4 - t1) - (t3 - t2)            # the round trip, less the agent's time

The round with the smallest delay wins; the true offset lies within ``delay / 2`` of
its estimate whatever the asymmetry of the path, so that is the stated uncertainty.

A frame sent on host A and received on host B carries A's timestamp and is compared
with B's clock: its latency is off by ``offset(B) - offset(A)``. The receiving worker
subtracts that ``skew`` (configure: ``clock_skew_ns``) when both offsets were measured;
otherwise the stream has no latency, and ``latency_note`` says why.

Standard library only (no Ray): unit-tested without a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

LOCAL = None  # the host key of ports that run on the engine's machine


@dataclass(frozen=True)
class ClockOffset:
    """One host's clock against the engine's: ``offset_ns`` = host - engine."""

    host: str | None
    offset_ns: int
    uncertainty_ns: int  # half the best round trip
    rtt_ns: int
    rounds: int

    def to_dict(self) -> dict:
        return {
            "clock_offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "best_rtt_ns": self.rtt_ns,
            "rounds": self.rounds,
        }


def estimate(samples: Iterable[tuple[int, int, int, int]]) -> tuple[int, int, int]:
    """(offset, uncertainty, delay) in ns from (t1, t2, t3, t4) samples: the least-delay one."""
    best = None
    for t1, t2, t3, t4 in samples:
        delay = (t4 - t1) - (t3 - t2)
        if best is None or delay < best[0]:
            best = (delay, ((t2 - t1) + (t3 - t4)) // 2)
    if best is None:
        raise ValueError("no clock samples")
    delay, off = best
    delay = max(0, delay)
    return off, (delay + 1) // 2, delay


def measure(
    host: str | None, probe: Callable[[], tuple[int, int]], rounds: int = 16
) -> ClockOffset:
    """Measure ``host``'s offset with ``probe()`` → (t2, t3) in the host's clock."""
    samples = []
    for _ in range(rounds):
        t1 = time.monotonic_ns()
        t2, t3 = probe()
        t4 = time.monotonic_ns()
        samples.append((t1, int(t2), int(t3), t4))
    off, unc, delay = estimate(samples)
    return ClockOffset(host, off, unc, delay, rounds)


LOCAL_CLOCK = ClockOffset(LOCAL, 0, 0, 0, 0)


@dataclass(frozen=True)
class StreamClock:
    """How one stream's latency is measured: the skew its receiver subtracts, or why none."""

    skew_ns: int = 0
    note: str | None = None
    usable: bool = True  # False: tx and rx clocks differ by an unmeasured offset


def _where(h: str | None) -> str:
    return f"host {h}" if h else "the engine's host"


def stream_clocks(
    streams: Iterable[tuple[str, str, str | None]],
    port_host: dict[str, str | None],
    offsets: dict[str | None, ClockOffset | None],
    why_unmeasured: dict[str | None, str] | None = None,
) -> dict[str, StreamClock]:
    """Per stream (name, tx port, rx port): its skew and note. Streams whose ports share
    a host are left out (their latency is used as it is)."""
    why_unmeasured = why_unmeasured or {}
    out = {}
    for name, tx, rx in streams:
        if rx is None:
            continue
        a, b = port_host.get(tx), port_host.get(rx)
        if a == b:
            continue
        oa, ob = offsets.get(a), offsets.get(b)
        if oa is None or ob is None:
            missing = a if oa is None else b
            why = why_unmeasured.get(missing, "not measured")
            out[name] = StreamClock(
                0,
                f"no latency: sent on {_where(a)}, received on {_where(b)}, and the clock "
                f"offset of {_where(missing)} is unknown ({why})",
                usable=False,
            )
            continue
        skew = ob.offset_ns - oa.offset_ns
        unc = ob.uncertainty_ns + oa.uncertainty_ns
        out[name] = StreamClock(
            skew,
            f"sent on {_where(a)}, received on {_where(b)}: clock offset "
            f"{skew / 1e3:+.1f} us +/- {unc / 1e3:.1f} us (measured over Ray) subtracted",
        )
    return out


def apply_to_snapshot(snap, clocks: dict[str, StreamClock]):
    """The snapshot with ``latency_note`` set on cross-host streams and latency removed
    where the clock offset is unknown (the sampler itself is not involved)."""
    if not clocks:
        return snap
    from tgen_tui.engine.snapshot import Latency

    streams = []
    for s in snap.streams:
        c = clocks.get(s.name)
        if c is not None:
            s = replace(s, latency_note=c.note)
            if not c.usable:
                s = replace(s, latency_ns=Latency())
        streams.append(s)
    return replace(snap, streams=tuple(streams))
