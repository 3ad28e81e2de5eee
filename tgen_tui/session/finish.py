"""A run's typed result, finished: the engine's report of the final snapshot, and what the
run did besides the engine (the thresholds judged on it, the DUT events and the outage
each caused, the TCP connections, every run of a DUT hook, the signal that ended it,
and, for an interactive run, its clears and sending time)."""

from __future__ import annotations

from typing import Any

from tgen_tui.engine.dut_events import attach_outages
from tgen_tui.engine.thresholds import Threshold, evaluate
from tgen_tui.results.models import RunResult


def finish_result(
    report: RunResult,
    *,
    started_at: str,
    signal: str | None,
    thresholds: list[Threshold],
    dut_events: list[dict] | None,
    tcp: dict | None,
    hooks: list[dict],
    **fields: Any,
) -> RunResult:
    """The result of a run from the engine's ``report`` (``fields``: extra top-level
    fields to set, e.g. the console's ``session``)."""
    r = report.model_copy(deep=True)
    r.started_at = started_at
    if signal:
        r.signal = signal
        r.partial = True
    r.breached = evaluate(thresholds, r)
    r.passed = not r.breached
    if dut_events is not None:
        records = [dict(x) for x in dut_events]
        attach_outages(records, {n: s.to_doc() for n, s in r.streams.items()})
        r.dut_events = records
    if tcp:
        r.tcp = tcp
    if hooks:
        r.dut_hooks = hooks
    for k, v in fields.items():
        setattr(r, k, v)
    return RunResult.model_validate(r.to_doc())


__all__ = ["finish_result"]
