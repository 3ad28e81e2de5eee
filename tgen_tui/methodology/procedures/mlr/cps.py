"""A connections-per-second search (RFC 9411-style, over request/response flows) with
the RFC 9971 search's machinery (:func:`~tgen_tui.methodology.procedures.mlr.search.mlr_search`).

The load is new connections per second. A trial runs the profile's app flows (their
``load: connections_per_s`` scaled to the trial's load) for the trial's duration with
``tgen run --rate-scale S --flush-dut`` (the DUT's state reset before each trial, as RFC
9693 asks of its connection-rate trials), and counts, over every app flow: *intended*
connections (load x duration), *offered* (attempted) and *received* (attempted minus
failed). **What counts as a failed connection**: refused, reset, timed out (no connect
or no response within the app's ``timeout``, or a connect still unanswered when the
stop's drain ended) and the tester's own limits; connections not attempted (the tester
fell behind) count as loss too (CSIT's unsent-is-loss). A trial is high-loss when that
loss ratio exceeds the goal's. To find a DUT's limit on new connections, give the app a
``timeout`` below the SYN retransmission time (1 s): a dropped SYN then fails its
connection instead of being retried through.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import trio

from tgen_tui.methodology.procedures.mlr.goals import Goal
from tgen_tui.methodology.procedures.mlr.search import MlrResult, mlr_search
from tgen_tui.results.models import DirectionCounts, Trial, TrialExtra

FAILED = ("failed_refused", "failed_reset", "failed_timeout", "failed_local")
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


def cps_trial_from(result: dict, load: float, duration: float) -> Trial:
    """A search trial from one run's result: connections as the frames of one direction."""
    attempted, failed, established = app_counts(result)
    intended = round(load * duration)
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
    with tempfile.TemporaryDirectory(prefix="tgen-cps-") as tmp:
        out = Path(tmp) / "r.json"
        argv = [sys.executable, "-m", "tgen_tui", "run", str(profile), "--duration",
                f"{duration:g}", "--rate-scale", f"{load / base:.9g}", "--flush-dut",
                "--json", str(out), "-q", *extra]  # fmt: skip
        cp = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False,
                                    env=dict(os.environ))  # fmt: skip
        if not out.exists():
            err = cp.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no result"]
            raise RuntimeError(f"cps trial at {load:,.0f} conn/s: {err[0]}")
        return cps_trial_from(json.loads(out.read_text()), load, duration)


async def cps_search(
    profile: Path,
    base: float,
    goals: list[Goal],
    *,
    min_load: float,
    max_load: float,
    settle_s: float = 1.0,
    extra: Sequence[str] = (),
) -> MlrResult:
    """The search over ``profile``'s app flows (``base``: their connections/s as written)."""

    async def trial(load: float, d: float) -> Trial:
        t = await run_trial(profile, base, load, d, extra)
        await trio.sleep(settle_s)
        return t

    return await mlr_search(trial, goals, min_load=min_load, max_load=max_load)


__all__ = ["DEFINITION", "app_counts", "cps_search", "cps_trial_from", "run_trial"]
