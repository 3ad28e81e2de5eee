"""What a methodology run has produced so far (:class:`RunState`): the report is built
from it, also after Ctrl-C, so an interrupted run still reports every trial so far."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tgen_tui.methodology.kit.params import Params
from tgen_tui.methodology.kit.progress import Progress
from tgen_tui.methodology.kit.search import ProgressFn, SearchResult
from tgen_tui.results.models import Trial


@dataclass
class RunState:
    """What a run has produced so far: the report is built from it even after Ctrl-C."""

    test: str
    params: Params
    progress: Progress | None = None
    profile_doc: dict = field(default_factory=dict)
    dut_settings: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    body: dict = field(default_factory=dict)  # the verb's own results
    latency_sources: set = field(default_factory=set)  # "kernel"/"signature" of the trials
    started: float = field(default_factory=time.time)
    finished: float | None = None  # set when a run inside a larger one (scale-up) ends

    def trial_done(self, t: Trial, **ctx) -> None:
        for s in (t.extra.streams or {}).values():
            if s.latency_ns.p50 is not None and s.latency_source:
                self.latency_sources.add(s.latency_source)
        if self.progress:
            self.progress.trial(t, **ctx)

    def on_trial(self, *, bounds: bool = True, **ctx: object) -> ProgressFn:
        """A search's ``on_trial``: each trial reported with ``ctx`` (and the search's l
        and h so far, with ``bounds``)."""

        def done(s: SearchResult, t: Trial) -> None:
            if bounds:
                self.trial_done(t, l_pps=s.l_pps, h_pps=s.h_pps, **ctx)
            else:
                self.trial_done(t, **ctx)

        return done

    def note(self, text: str) -> None:
        if self.progress:
            self.progress.note(text)
