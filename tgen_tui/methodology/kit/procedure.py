"""What a procedure is to the kit: :class:`Procedure` says how a test runs, what its
report holds and how it is shown. The procedures (tgen_tui.methodology.procedures) fill
one in each, the registry keys them by test name, and the kit's generic functions
(documents, output) are handed the one they work for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tgen_tui.methodology.kit.state import RunState

Table = tuple  # (title, header, columns, rows)
PathFn = Callable[[str], "str | None"]  # plot name -> file path (None: terminal only)


def no_lines(doc: dict) -> list[str]:
    return []


def no_plots(doc: dict, path: PathFn) -> list[str]:
    return []


def no_metrics(doc: dict) -> dict:
    return {}


def no_trials(state: RunState) -> list[dict]:
    return []


@dataclass(frozen=True)
class Procedure:
    """One test: how it runs, its part of the report, and how it is shown."""

    name: str  # the registry key: throughput, loss, ...
    test: str  # the verb's name for it, and the store's: rfc2544-throughput, ...
    run: Callable[[RunState], Awaitable[None]]
    report: Callable[[RunState, bool], dict]  # (state, partial) -> its part of the report
    metrics: Callable[[dict], dict]  # its part -> the headline figures (results store)
    trials: Callable[[RunState], list[dict]]  # every trial, flat (results store)
    tables: Callable[[dict], list[Table]]
    plots: Callable[[dict, PathFn], list[str]] = no_plots
    lines: Callable[[dict], list[str]] = no_lines  # text lines after the tables
    rate_unit: str = "frames/s per direction"
    label: str = ""  # what the rate is, in the scale-up table
    unit: str = ""  # the searched rate's unit, for scale-up (empty: cannot be scaled)
    stateful: bool = False  # RFC 9693: trials of N frames
    common: bool = True  # the report has the common fields (documents.common_fields)
