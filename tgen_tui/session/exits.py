"""The one rule for a run's exit status, for every front end.

- A signal ended it (Ctrl-C, SIGTERM, SIGHUP): 128 + the signal's number (130, 143, 129),
  after the result was written and stored, marked ``partial``.
- A threshold was breached (``--fail-on``) or the TCP handshake did not open every
  connection: 1 (the test failed).
- A port failed (its worker died) or the run ended early without a signal: 3 (the
  environment).
- Otherwise 0.
A failed ``after_run`` hook is raised once the result is written (exit 3 with its
output); bad input is 2 before anything runs (:mod:`tgen_tui.diagnostics`).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from tgen_tui.diagnostics import ExitCode

#: the signals a run ends cleanly on: the ports stop and the result is written
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_exit(name: str) -> int:
    """The exit status of a run a signal ended: 128 + its number (SIGINT: 130)."""
    return 128 + int(signal.Signals[name])


@dataclass(frozen=True)
class ExitStatus:
    """A run's exit code and the lines that say why (for stderr)."""

    code: int
    why: tuple[str, ...] = field(default_factory=tuple)


def exit_status(
    *,
    signal_name: str | None,
    partial: bool,
    breached: bool,
    failed_ports: list[str],
    tcp_error: str | None = None,
) -> ExitStatus:
    """The rule above, from what the run's result says."""
    if signal_name:
        return ExitStatus(signal_exit(signal_name), (f"stopped by {signal_name}",))
    if partial:
        return ExitStatus(int(ExitCode.ENVIRONMENT), ("the run ended early",))
    if breached:
        return ExitStatus(int(ExitCode.TEST_FAILED))
    if tcp_error:
        return ExitStatus(
            int(ExitCode.TEST_FAILED), (f"TCP handshake failed at {tcp_error}: the run fails",)
        )
    if failed_ports:
        return ExitStatus(int(ExitCode.ENVIRONMENT), (f"port(s) {', '.join(failed_ports)} failed",))
    return ExitStatus(0)


__all__ = ["STOP_SIGNALS", "ExitStatus", "exit_status", "signal_exit"]
