"""DUT events during a run: a command run on the DUT (over its channel) at a given time,
and the outage it caused.

``tgen run --dut-event "5s: nft -f reload.nft"`` runs the command 5 s after sending
began; the console runs a named one (``dut.events: {name: command}`` in the profile)
from the keyboard. Each event is recorded with when it ran, how long it took, its exit
status and the tail of its output. :func:`attach_outages` then sets, next to each event,
the longest receive gap of any stream that began while the command ran or shortly after
(``outage_ms``, ``outage_stream``): the outage the event caused, from the workers'
kernel receive times (:mod:`tgen_tui.engine.stateful`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tgen_tui.diagnostics import BadInput

OUTPUT_TAIL = 400  # characters of the command's output kept in the record
AFTER_S = 1.0  # a gap that began up to this long after the command ended is its outage
BEFORE_S = 0.1  # ... or this long before it began (the start of sending is an estimate)
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DutEvent:
    at_s: float  # from the start of sending
    command: str
    name: str | None = None


def parse_dut_event(text: str) -> DutEvent:
    """``"5s: COMMAND"`` (or ``"1.5: COMMAND"``, seconds) -> DutEvent; BadInput otherwise."""
    from tgen_tui.profiles.units import parse_duration

    when, sep, command = text.partition(":")
    if not sep or not command.strip():
        raise BadInput(f"--dut-event {text!r}: give TIME: COMMAND, e.g. '5s: nft -f rules.nft'")
    try:
        at = parse_duration(when.strip())
    except ValueError as e:
        raise BadInput(f"--dut-event {text!r}: {e}") from None
    if at < 0:
        raise BadInput(f"--dut-event {text!r}: the time must be >= 0")
    return DutEvent(float(at), command.strip())


def run_event(channel, command: str, t0_s: float, name: str | None = None) -> dict:
    """Run ``command`` on the DUT now (blocking); the record of what happened, with
    times from ``t0_s`` (CLOCK_MONOTONIC s, the start of sending)."""
    started = time.monotonic()
    rec: dict = {"name": name, "command": command, "at_s": round(started - t0_s, 3)}
    try:
        out = channel.run(command, timeout=TIMEOUT_S)
    except Exception as e:  # the channel itself failed: the run goes on, the record says so
        rec.update(ok=False, rc=None, error=str(e))
    else:
        text = (out.stdout or "") + (out.stderr or "")
        rec.update(ok=out.ok, rc=out.returncode, output=text[-OUTPUT_TAIL:])
        if out.timed_out:
            rec["error"] = f"timed out after {TIMEOUT_S:g} s"
    ended = time.monotonic()
    rec["took_ms"] = round((ended - started) * 1000, 1)
    rec["end_s"] = round(ended - t0_s, 3)
    return rec


async def run_events(
    channel,
    events: list[DutEvent],
    t0_s: float,
    records: list[dict],
    before=None,
    note: Callable[[str], None] | None = None,
) -> None:
    """Run ``events`` at their times (from ``t0_s``, CLOCK_MONOTONIC s), in order; append
    each record to ``records`` as it finishes. ``before``: awaited just before each event
    runs (a capture's ``dut-event`` trigger). ``note``: called with :func:`start_line`
    as each event begins and :func:`done_line` as it ends (the engine's log: a fault is
    named at the moment it happens, not only in the result). Cancel the task to stop early."""
    import trio

    for ev in sorted(events, key=lambda e: e.at_s):
        wait = t0_s + ev.at_s - time.monotonic()
        if wait > 0:
            await trio.sleep(wait)
        if before is not None:
            await before(ev)
        if note is not None:
            note(start_line(ev, time.monotonic() - t0_s))
        rec = await trio.to_thread.run_sync(run_event, channel, ev.command, t0_s, ev.name)
        rec["scheduled_s"] = ev.at_s
        records.append(rec)
        if note is not None:
            note(done_line(rec))


def start_line(ev: DutEvent, at_s: float) -> str:
    """'DUT event at 5.00 s: conntrack -F' (the log's line as the command begins)."""
    return f"DUT event at {at_s:.2f} s: {ev.name or ev.command}"


def done_line(rec: dict) -> str:
    """'DUT event done in 12 ms (ok): conntrack -F' (or FAILED rc=1 ...) as it ends."""
    what = rec.get("name") or rec["command"]
    return f"DUT event done in {rec['took_ms']:.0f} ms ({_status(rec)}): {what}"


def _status(rec: dict) -> str:
    return "ok" if rec.get("ok") else f"FAILED rc={rec.get('rc')} {rec.get('error', '')}".strip()


def attach_outages(records: list[dict], streams: dict[str, dict]) -> None:
    """Set ``outage_ms`` / ``outage_stream`` on each event record: the longest receive gap
    (``streams.<name>.outage_ms``, began at ``outage_at_s``) that began within
    [at_s - BEFORE_S, end_s + AFTER_S]. Each stream keeps only its longest gap, so when
    none began then, this event's outage is not known, only bounded by the longest gap
    elsewhere: ``outage_ms`` None and ``outage_at_most_ms`` (0 when no stream had one)."""
    for rec in records:
        lo, hi = rec["at_s"] - BEFORE_S, rec.get("end_s", rec["at_s"]) + AFTER_S
        best: tuple[float, str | None] = (0.0, None)
        bound = 0.0
        for name, s in streams.items():
            gap, at = s.get("outage_ms"), s.get("outage_at_s")
            if gap is None or at is None:
                continue
            if not lo <= at <= hi:
                bound = max(bound, float(gap))
            elif gap > best[0]:
                best = (float(gap), name)
        rec.pop("outage_at_most_ms", None)
        rec.pop("outage_recovered", None)
        if best[1] is None and bound > 0:
            rec["outage_ms"], rec["outage_at_most_ms"] = None, bound
        else:
            rec["outage_ms"] = best[0]
        rec["outage_stream"] = best[1]
        if best[1] is not None and streams[best[1]].get("outage_recovered") is False:
            rec["outage_recovered"] = False  # that stream never came back


def event_line(rec: dict) -> str:
    """One line for the summary table."""
    what = rec.get("name") or rec["command"]
    out = f"DUT event at {rec['at_s']:.2f} s ({rec['took_ms']:.0f} ms, {_status(rec)}): {what}"
    if rec.get("outage_ms"):
        out += f"; outage {rec['outage_ms']:.1f} ms ({rec['outage_stream']}"
        out += ", not recovered)" if rec.get("outage_recovered") is False else ")"
    elif rec.get("outage_at_most_ms"):
        out += (
            f"; outage at most {rec['outage_at_most_ms']:.1f} ms (not measured: each stream "
            "keeps only its longest gap, which began at another time)"
        )
    elif "outage_ms" in rec:
        out += "; no outage"
    return out


__all__ = [
    "DutEvent",
    "attach_outages",
    "done_line",
    "event_line",
    "parse_dut_event",
    "run_event",
    "run_events",
    "start_line",
]
