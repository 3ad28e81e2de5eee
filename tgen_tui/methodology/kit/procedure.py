"""What a procedure is to the kit: :class:`Procedure` says how a test runs, what its
report holds and how it is shown. The procedures (tgen_tui.methodology.procedures) fill
one in each, the registry keys them by test name, and the kit's generic functions
(documents, output) are handed the one they work for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tgen_tui.methodology.kit.state import RunState
from tgen_tui.results.models import Doc

Table = tuple  # (title, header, columns, rows)
PathFn = Callable[[str], "str | None"]  # plot name -> file path (None: terminal only)

R = TypeVar("R", bound=Doc)  # the test's report model (ThroughputReport, ...)


def no_lines(report: Any) -> list[str]:
    return []


def no_plots(report: Any, path: PathFn) -> list[str]:
    return []


def no_metrics(report: Any) -> dict[str, float | None]:
    return {}


def no_trials(state: RunState) -> list[Doc]:
    return []


@dataclass(frozen=True)
class Procedure(Generic[R]):
    """One test: how it runs, its part of the report, and how it is shown from its model."""

    name: str  # the registry key: throughput, loss, ...
    test: str  # the verb's name for it, and the store's: rfc2544-throughput, ...
    run: Callable[[RunState], Awaitable[None]]
    # (state, partial) -> its part of the report: the report model's fields, typed
    report: Callable[[RunState, bool], dict[str, Any]]
    metrics: Callable[[R], dict[str, float | None]]  # the report -> its headline figures
    trials: Callable[[RunState], list[Doc]]  # every trial, flat, as the store keeps them
    tables: Callable[[R], list[Table]]
    plots: Callable[[R, PathFn], list[str]] = no_plots
    lines: Callable[[R], list[str]] = no_lines  # text lines after the tables
    rate_unit: str = "frames/s per direction"
    label: str = ""  # what the rate is, in the scale-up table
    unit: str = ""  # the searched rate's unit, for scale-up (empty: cannot be scaled)
    stateful: bool = False  # RFC 9693: trials of N frames
    common: bool = True  # the report has the common fields (documents.common_fields)
    app: bool = False  # its trials run the profile's app flows (tgen run), not frame streams
