"""A connections-per-second search and a concurrent-capacity search (RFC 9411-style, over
request/response flows) with the RFC 9971 search's machinery
(:func:`~tgen_tui.methodology.procedures.mlr.search.mlr_search`); ``tgen rfc9411 cps`` and
``tgen rfc9411 concurrent`` run them (:mod:`.appsearch`).

The load is new connections per second. A trial runs the profile's app flows (their
``load: connections_per_s`` scaled to the trial's load) for the trial's duration with
``tgen run --rate-scale S --flush-dut`` (the DUT's state reset before each trial, as RFC
9693 asks of its connection-rate trials), and counts, over every app flow: *intended*
connections (load x duration), *offered* (attempted) and *received* (attempted minus
failed); intended is the connections the asked rate made due by the run's stop (the
flow workers' count; load x duration when they have none), so that the few due in the
last milliseconds of a ``--duration`` stop are not taken for a sender that fell behind.
**What counts as a failed connection**: refused, reset, timed out (no connect
or no response within the app's ``timeout``, or a connect still unanswered when the
stop's drain ended) and the tester's own limits; connections not attempted (the tester
fell behind) count as loss too (CSIT's unsent-is-loss). A trial is high-loss when that
loss ratio exceeds the goal's. To find a DUT's limit on new connections, give the app a
``timeout`` below the SYN retransmission time (1 s): a dropped SYN then fails its
connection instead of being retried through.

The concurrent-capacity search's load is a number of connections kept open (each app
flow's ``load: concurrent`` set to its share of the trial's load in a derived profile).
Its trial intends the target C, and **loses** the larger of the target's connections
never established (C - established) and the connections that failed (any reason),
capped at C: a DUT that stops admitting new entries (a conntrack table full, a ``ct
count`` limit) leaves C - limit connect attempts to time out.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import trio

from tgen_tui.results.models import DirectionCounts, Trial, TrialExtra

FAILED = ("failed_refused", "failed_reset", "failed_timeout", "failed_local")
CONCURRENT_DEFINITION = (
    "a trial of C concurrent connections lost the larger of the connections never "
    "established (C - established) and the connections that failed (refused, reset, timed "
    "out, the tester's own limits), at most C"
)
DEFINITION = (
    "a connection failed when it was refused, reset, timed out (no connect or response "
    "within the app's timeout, or a connect unanswered at the stop's drain end) or hit "
    "the tester's own limits; connections due but not attempted count as failed too"
)


def app_counts(result: dict) -> tuple[int, int, int]:
    """(attempted, failed, established) over the app flows of a ``tgen run --json``."""
    streams = (result.get("transport") or {}).get("streams") or {}
    app = [s for s in streams.values() if s.get("app")]
    attempted = sum(s.get("attempted") or 0 for s in app)
    failed = sum(sum(s.get(k) or 0 for k in FAILED) for s in app)
    return attempted, failed, sum(s.get("established") or 0 for s in app)


def app_due(result: dict) -> int:
    """Connections the asked rate made due by the stop, over the app flows (the flow
    workers' count: the run's own start and stop, not load x duration); 0 when a flow
    has none."""
    streams = (result.get("transport") or {}).get("streams") or {}
    dues = [s.get("due") for s in streams.values() if s.get("app")]
    return sum(dues) if dues and all(dues) else 0


def cps_trial_from(result: dict, load: float, duration: float) -> Trial:
    """A search trial from one run's result: connections as the frames of one direction."""
    attempted, failed, established = app_counts(result)
    due = app_due(result)
    intended = due or round(load * duration)
    ok = attempted - failed
    t = Trial(
        rate_pps=load,
        kind="search",
        duration_s=duration,
        tx_frames=attempted,
        rx_frames=ok,
        lost=failed,
        achieved_pps=attempted / duration if duration else 0.0,
        passed=failed == 0 and attempted >= intended,
        reason=f"{failed:,} of {attempted:,} connections failed" if failed else "",
        extra=TrialExtra(),
    )
    t.extra.directions = {
        "forward": DirectionCounts(
            intended_pps=load,
            intended_frames=intended,
            offered_frames=attempted,
            received_frames=ok,
            offered_pps=round(attempted / duration, 1) if duration else None,
            received_pps=round(ok / duration, 1) if duration else None,
            sender_fell_behind=attempted < intended,
        )
    }
    t.extra.established = established  # type: ignore[attr-defined]
    return t


async def run_trial(
    profile: Path, base: float, load: float, duration: float, extra: Sequence[str] = ()
) -> Trial:
    """One trial: ``tgen run`` at ``load`` connections/s for ``duration`` s."""
    argv = [str(profile), "--duration", f"{duration:g}", "--rate-scale", f"{load / base:.9g}",
            "--flush-dut", *extra]  # fmt: skip
    result = await _tgen_run(argv, f"cps trial at {load:,.0f} conn/s")
    return cps_trial_from(result, load, duration)


def concurrent_trial_from(result: dict, load: float, duration: float) -> Trial:
    """A concurrent-capacity trial from one run's result: the target C as intended and
    offered, C less the connections lost (:data:`CONCURRENT_DEFINITION`) as received."""
    attempted, failed, established = app_counts(result)
    target = round(load)
    lost = min(target, max(target - established, failed))
    t = Trial(
        rate_pps=load,
        kind="search",
        duration_s=duration,
        tx_frames=target,
        rx_frames=target - lost,
        lost=lost,
        achieved_pps=attempted / duration if duration else 0.0,
        passed=lost == 0,
        reason=f"{lost:,} of {target:,} connections not held ({failed:,} failed, "
        f"{established:,} established)"
        if lost
        else "",
        extra=TrialExtra(),
    )
    t.extra.directions = {
        "forward": DirectionCounts(
            intended_pps=load,
            intended_frames=target,
            offered_frames=target,
            received_frames=target - lost,
            sender_fell_behind=attempted < target,
        )
    }
    t.extra.established = established  # type: ignore[attr-defined]
    t.extra.attempted = attempted  # type: ignore[attr-defined]
    t.extra.failed = failed  # type: ignore[attr-defined]
    return t


def with_concurrent(profile_path: Path, target: int):
    """The profile with its concurrent app flows' targets summing to ``target`` (each
    its share of the profile's own, whole connections, at least 1), validated again."""
    from tgen_tui.profiles.loader import load_profile
    from tgen_tui.profiles.revalidate import revalidate

    prof = load_profile(str(profile_path))
    base = sum(t.load.concurrent for t in app_flows(prof, "concurrent"))

    def change(d: dict) -> None:
        for t in d.get("transport", []):
            ld = t.get("load") or {}
            if t.get("enabled", True) and t.get("app") and ld.get("concurrent"):
                ld["concurrent"] = max(1, round(target * ld["concurrent"] / base))

    return revalidate(prof, change)


def app_flows(prof, mode: str) -> list:
    """The profile's enabled app flows whose load is ``mode`` (cps, concurrent, tps)."""
    return [
        t
        for t in prof.transport
        if t.enabled and t.app is not None and t.load is not None and t.load.mode == mode
    ]


async def _tgen_run(argv: list[str], what: str) -> dict:
    """``tgen run ARGV --json``: its result (RuntimeError with its last stderr line)."""
    with tempfile.TemporaryDirectory(prefix="tgen-app-") as tmp:
        out = Path(tmp) / "r.json"
        cmd = [sys.executable, "-m", "tgen_tui", "run", *argv, "--json", str(out), "-q"]
        cp = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False,
                                    env=dict(os.environ))  # fmt: skip
        if not out.exists():
            err = cp.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no result"]
            raise RuntimeError(f"{what}: {err[0]}")
        return json.loads(out.read_text())


async def run_concurrent_trial(
    profile: Path, load: float, duration: float, extra: Sequence[str] = ()
) -> Trial:
    """One trial: ``tgen run --flush-dut`` of the profile with ``round(load)`` connections
    kept open for ``duration`` s."""
    with tempfile.TemporaryDirectory(prefix="tgen-conc-") as tmp:
        derived = Path(tmp) / "concurrent.yaml"
        prof = with_concurrent(profile, round(load))
        derived.write_text(json.dumps(prof.model_dump(mode="json", exclude_none=True)))
        argv = [str(derived), "--duration", f"{duration:g}", "--flush-dut", *extra]
        result = await _tgen_run(argv, f"concurrent trial of {round(load):,} connections")
    return concurrent_trial_from(result, load, duration)


__all__ = [
    "CONCURRENT_DEFINITION",
    "DEFINITION",
    "app_counts",
    "app_flows",
    "concurrent_trial_from",
    "cps_trial_from",
    "run_concurrent_trial",
    "run_trial",
    "with_concurrent",
]
