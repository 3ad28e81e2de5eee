"""The run owner: one run of a profile from start to end, for every front end.

A :class:`RunOwner` is made from typed :class:`~tgen_tui.session.options.RunOptions`
(bad input is refused here, before anything runs) and drives the run in this order::

    begin   preflight (--preflight), the before_run hook, --flush-dut, TCP handshakes
    session the engine (frame streams and socket flows) as a Session; --dut-event
            commands at their times; ports started, stopped, cleared by the front end
    end     TCP teardown, the after_run hook (also after Ctrl-C, SIGTERM, SIGHUP)
    result  the typed RunResult: the final snapshot's figures, the hooks' runs, the DUT
            events and their outages, the TCP section, thresholds, the signal
    status  one exit code (:mod:`tgen_tui.session.exits`), and the run stored

``tgen run`` calls :meth:`RunOwner.run` with its headless drive (trio, the stop signals
caught here); the console opens :meth:`RunOwner.open` in its trio guest run (Textual owns
the signals and tells the owner); a methodology verb runs its procedure as the body and
opens an engine per trial through :meth:`RunOwner.trial`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from tgen_tui.diagnostics import BadInput, ExitCode
from tgen_tui.dut.channel import DutChannel, pick_dut
from tgen_tui.dut.hooks import HookFailed, profile_hooks
from tgen_tui.engine.controller import open_engine
from tgen_tui.engine.options import EngineOptions
from tgen_tui.packets.compile import CompiledProfile, compile_profile
from tgen_tui.results.models import RunResult
from tgen_tui.results.record import store_result
from tgen_tui.session import prologue
from tgen_tui.session.exits import STOP_SIGNALS, ExitStatus, exit_status, signal_exit
from tgen_tui.session.finish import finish_result
from tgen_tui.session.options import RunOptions
from tgen_tui.session.session import Session

PreflightSink = Callable[[list], None]


@dataclass
class RunRecord:
    """What the run did besides the engine: the hooks' runs, the DUT events, the TCP
    connections, the preflight checks; filled as it goes, read by the result."""

    started_at: str = field(
        default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
    )
    dut_events: list[dict] = field(default_factory=list)
    tcp: dict | None = None
    preflight: list = field(default_factory=list)
    captures: list = field(default_factory=list)  # the captures' final views (engine/capture.py)
    hook_failure: HookFailed | None = None  # the after_run hook's, raised once stored


class RunOwner:
    """One run (see the module docstring). Construct it before anything runs: the
    profile, the options and the DUT events are checked here (BadInput: exit 2)."""

    def __init__(self, opts: RunOptions, *, on_preflight: PreflightSink | None = None) -> None:
        from tgen_tui.profiles.loader import load_profile
        from tgen_tui.profiles.revalidate import with_pacing

        self.opts = opts
        self.profile = with_pacing(load_profile(opts.profile), opts.pacing)
        self.tcp = prologue.tcp_plan_of(self.profile) if opts.tcp_handshake else None
        data = self.tcp.data_profile if self.tcp is not None else None
        self.compiled: CompiledProfile = compile_profile(
            data or self.profile, rate_scale=opts.rate_scale
        )
        prologue.check_ports(self.compiled, opts.ports)
        self.duration_s = opts.duration_s if opts.duration_s is not None else self.profile.duration
        prologue.check_dut_events(opts.dut_events, self.duration_s)
        self.hooks = profile_hooks(self.profile, opts.dut_netns, opts.dut_ssh)
        self.dut = pick_dut(
            opts.dut_netns, opts.dut_ssh, self.compiled.dut_netns, self.compiled.dut_ssh
        )
        if (opts.flush_dut or opts.dut_events or self.tcp) and DutChannel.of(*self.dut) is None:
            what = (
                "--flush-dut"
                if opts.flush_dut
                else "--dut-event"
                if opts.dut_events
                else "tcp.handshake"
            )
            raise BadInput(
                f"{what} needs a DUT: dut.netns in the profile, --dut-netns or --dut-ssh"
            )
        self._check_captures()
        self.on_preflight = on_preflight
        self.record = RunRecord()
        self.signal: str | None = None  # the stop signal that ended the run
        self.preflight_done = False
        self.session: Session | None = None
        self._interruptible: list[trio.CancelScope] = []

    # ------------------------------------------------------------------ checks
    def _check_captures(self) -> None:
        """Each --capture refused up front (BadInput): ports, streams, the filter, the file."""
        from tgen_tui.engine.capture import check_spec

        used = list(self.opts.ports or self.compiled.ports)
        progs = [p for p in self.compiled.streams if p.port in used]
        names = [p.name for p in progs]
        self.captures = []
        for spec in self.opts.captures:
            if spec.lost and not spec.ports:  # every port that sends or receives a stream
                seen = [x for p in progs for x in (p.port, p.rx_port) if x in used]
                spec = replace(spec, ports=tuple(dict.fromkeys(seen)))
                if not spec.ports:
                    raise BadInput("--capture-lost: the run has no frame streams")
            if spec.trigger == "dut-event" and not self.opts.dut_events:
                raise BadInput("--capture-trigger dut-event: the run has no --dut-event")
            check_spec(spec, used, names)
            self.captures.append(spec)

    def check_environment(self, needs_root: str | None = None) -> None:
        """Root, every port's namespace (EnvironmentProblem: exit 3), the --cluster option."""
        from tgen_tui.engine.cli_options import check_cluster_option, check_environment

        check_cluster_option(self.opts.cluster)
        kw = {"needs_root": needs_root} if needs_root else {}
        check_environment(self.compiled, self.opts.cluster, **kw)

    def engine_options(self, **changes: Any) -> EngineOptions:
        o = self.opts
        base = EngineOptions(
            cores=list(o.cores) if o.cores else None,
            lanes=o.lanes,
            interval=o.interval_s,
            drain_ms=int(o.drain_s * 1000),
            ports=list(o.ports) if o.ports else None,
            dut_netns=o.dut_netns,
            dut_ssh=o.dut_ssh,
            cluster=o.cluster,
            transport=o.transport,
        )
        return replace(base, **changes)

    # ------------------------------------------------------------------ the edges
    async def preflight(self) -> None:
        """tgen preflight's checks (once); PreflightFailed (exit 1) when one fails."""
        if self.preflight_done or not self.opts.preflight:
            return
        self.preflight_done = True
        checks = await prologue.preflight(self.compiled, self.engine_options(neighbours={}))
        self.record.preflight = checks
        if self.on_preflight is not None:
            self.on_preflight(checks)
        prologue.raise_failed(checks)

    async def begin(self) -> None:
        """Preflight, the before_run hook (a failure stops the run with its output), the
        DUT flush, the TCP handshakes."""
        await self.preflight()
        await trio.to_thread.run_sync(self.hooks.run, "before_run")
        if self.opts.flush_dut:
            await trio.to_thread.run_sync(prologue.flush_dut, self.dut)
        if self.tcp is not None:
            self.record.tcp = await prologue.handshake(self.tcp, self.engine_options(), self.dut)

    async def end(self) -> None:
        """TCP teardown and the after_run hook; its failure is kept (raised once the
        result is written and stored)."""
        if self.tcp is not None:
            await prologue.teardown(self.tcp, self.engine_options(), self.dut)
            self.record.tcp = self.tcp.report
        try:
            await trio.to_thread.run_sync(self.hooks.run, "after_run")
        except HookFailed as e:
            self.record.hook_failure = e

    # ------------------------------------------------------------------ engines
    @contextlib.asynccontextmanager
    async def engine(self, **changes: Any) -> AsyncIterator[Session]:
        """The run's engine as a Session (``changes``: to its EngineOptions); when it
        ends, the ports stop and the final snapshot and report are taken before the
        engine closes."""
        async with open_engine(self.compiled, self.engine_options(**changes)) as eng:
            s = Session(eng, self.opts.profile, [t.text for t in self.opts.thresholds])
            self.session = s
            ids = [(await eng.start_capture(c)).id for c in self.captures]
            try:
                yield s
            finally:
                with trio.CancelScope(shield=True):
                    await s.conclude(partial=self.signal is not None)
                    for cid in ids:  # after the drain: every frame that came is in
                        v = await eng.stop_capture(cid, "run ended", loss_comment(s.report))
                        self.record.captures.append(v)

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Session]:
        """begin, the engine, end: the whole run around a front end that drives it."""
        await self.begin()
        try:
            async with self.engine() as s:
                yield s
        finally:
            with trio.CancelScope(shield=True):
                await self.end()

    async def trial_hook(self, name: str, trial_no: int) -> list[dict]:
        """A methodology trial's ``before_trial`` or ``after_trial`` hook (when the profile
        has it), its record; HookFailed stops the run with its output."""
        if not self.hooks.has(name):
            return []
        rec = await trio.to_thread.run_sync(self.hooks.run, name, trial_no)
        return [rec.to_dict()] if rec is not None else []

    def trial_engine(self, compiled: CompiledProfile, options: EngineOptions) -> Any:
        """A methodology trial's own engine (fresh counters, sequence numbers and
        histograms), with the run's DUT and --cluster transport where the trial names
        none: ``async with owner.trial_engine(c, o) as eng``."""
        o = self.opts
        options = replace(
            options,
            dut_netns=options.dut_netns or o.dut_netns,
            dut_ssh=options.dut_ssh or o.dut_ssh,
            cluster=options.cluster or o.cluster,
            transport=options.transport or o.transport,
        )
        return open_engine(compiled, options)

    async def run_dut_events(self, t0: float) -> None:
        """The --dut-event commands at their times from ``t0`` (CLOCK_MONOTONIC s)."""
        from tgen_tui.engine.dut_events import run_events

        channel = DutChannel.of(*self.dut)
        eng = self.session.engine if self.session is not None else None
        fire = getattr(getattr(eng, "captures", None), "fire", None)

        async def before(ev) -> None:  # --capture-trigger dut-event starts with the first
            if fire is not None:
                await fire("dut-event")

        note = getattr(eng, "notice", None)  # the engine's log (the fake has none)
        await run_events(
            channel, list(self.opts.dut_events), t0, self.record.dut_events, before, note
        )

    # ------------------------------------------------------------------ headless
    @contextlib.contextmanager
    def interruptible(self) -> Iterator[trio.CancelScope]:
        """The part of a run that a stop signal cancels, when it is not the whole body:
        the headless drive's sending (its engine, open around it, then stops the ports
        and counts the drain with every task still alive)."""
        with trio.CancelScope() as scope:
            self._interruptible.append(scope)
            try:
                if self.signal is not None:  # the signal came before this part began
                    scope.cancel()
                yield scope
            finally:
                self._interruptible.remove(scope)

    def run(self, body: Callable[[RunOwner], Awaitable[None]]) -> None:
        """``begin``, ``body(self)``, ``end`` under trio; a stop signal (Ctrl-C, SIGTERM,
        SIGHUP) cancels the body (or the part of it the body marked
        :meth:`interruptible`), the run still ends (``end`` runs) and ``signal`` says
        which. Installed before anything starts: a Ctrl-C at any moment ends cleanly."""

        async def main() -> None:
            with trio.open_signal_receiver(*STOP_SIGNALS) as sigs:
                async with trio.open_nursery() as nursery:

                    async def watch() -> None:
                        async for s in sigs:
                            self.signal = signal.Signals(s).name
                            for scope in self._interruptible or [body_scope]:
                                scope.cancel()
                            return

                    nursery.start_soon(watch)
                    began = False
                    try:
                        with trio.CancelScope() as body_scope:
                            await self.begin()
                            began = True
                            await body(self)
                    finally:  # also after a signal or an error: after_run restores the DUT
                        if began:
                            with trio.CancelScope(shield=True):
                                await self.end()
                        nursery.cancel_scope.cancel()

        trio.run(main)

    # ------------------------------------------------------------------ the end
    def result(self, of: Session | None = None, **fields: Any) -> RunResult | None:
        """The run's typed result (None when the engine never opened): the engine's
        report of the final snapshot of session ``of`` (default: the run's), and what
        the run did besides; ``fields``: extra top-level fields (the console's
        ``session``)."""
        s = of or self.session
        if s is None or s.report is None:
            return None
        return finish_result(
            s.report,
            started_at=self.record.started_at,
            signal=self.signal,
            thresholds=list(self.opts.thresholds),
            dut_events=self.record.dut_events if self.opts.dut_events else None,
            tcp=self.record.tcp,
            hooks=self.hooks.to_doc(),
            **(
                {"captures": [v.to_doc() for v in self.record.captures]}
                if self.record.captures
                else {}
            ),
            **fields,
        )

    def status(self, result: RunResult) -> ExitStatus:
        failed = [
            n for n, p in result.ports.items() if (p.model_extra or {}).get("state") == "failed"
        ]
        return exit_status(
            signal_name=self.signal,
            partial=result.partial,
            breached=bool(result.breached),
            failed_ports=failed,
            tcp_error=(self.record.tcp or {}).get("error"),
        )

    def status_without_result(self) -> int:
        """The exit status of a run that ended before its engine opened (a stop signal)."""
        return signal_exit(self.signal) if self.signal else int(ExitCode.ENVIRONMENT)

    def store(self, result: RunResult) -> int | None:
        """File the result in the results store (never fails the run)."""
        return store_result(result, self.opts.store, test=self.opts.test, params=self.opts.params())


def loss_comment(report: RunResult | None) -> str | None:
    """The run's loss in one line, for the lost frames' capture file: per stream the
    frames lost and the counters that explain them."""
    if report is None:
        return None
    parts = []
    for name, st in report.streams.items():
        if not st.lost:
            continue
        why = ", ".join(f"{c.cause} ({c.where}): {c.frames}" for c in st.loss_causes or [])
        unexplained = f", unexplained {st.loss_unexplained}" if st.loss_unexplained else ""
        parts.append(
            f"{name}: {st.lost} of {st.tx_frames} lost"
            + (f" [{why}{unexplained}]" if why else unexplained)
        )
    return "tgen-tui lost frames. " + ("; ".join(parts) if parts else "the run lost no frames")


__all__ = ["RunOwner", "RunRecord", "loss_comment"]
