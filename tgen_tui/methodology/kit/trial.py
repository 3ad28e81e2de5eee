"""The real trial runner: one trial = one fresh engine on the lab (or real ports).

A trial at rate r sends ``r × duration`` frames per direction as count-limited streams,
paced against absolute deadlines, and keeps counting for the timeout after sending ends
(METHODOLOGY "wait after sending"). It is **invalid** when the sender had not sent every
frame by ``duration × (1 + tolerance)`` after its start (read from the worker counters at
that instant); an invalid trial counts as failed. With ``early_stop`` a trial whose loss
already exceeds the tolerance is stopped at once: it cannot pass any more, and searches
from a line-rate maximum then cost seconds, not minutes. Between trials the runner waits
``settle`` seconds for the DUT.

Each trial opens its own engine (about 0.35 s here): sequence numbers, counters and
histograms start at zero, so no trial inherits anything from the one before.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from tgen_tui.methodology.kit.drops import trial_fields
from tgen_tui.methodology.kit.dut import DutControl
from tgen_tui.methodology.kit.spacing import from_snapshot as spacing_of
from tgen_tui.methodology.kit.verdict import LossTolerance, judge
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.program import StreamProgram
from tgen_tui.results.models import (
    ClearRecord,
    ConntrackCounts,
    HookRun,
    Latency,
    PortCounts,
    StreamCounts,
    Trial,
)
from tgen_tui.session.batch import scaled_programs

if TYPE_CHECKING:
    from tgen_tui.dut.hooks import Hooks
    from tgen_tui.engine.options import LearnSpec, TransportFactory

DIRECTIONS = ("forward", "reverse", "bidirectional")
START_LEAD_S = 0.02  # the engine schedules the first frame 20 ms after the start command


def select_streams(compiled: CompiledProfile, direction: str) -> dict[str, list[StreamProgram]]:
    """Streams per direction: forward = sent from the profile's first port, reverse = from
    the others, bidirectional = both (each direction gets the full rate)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}")
    first = next(iter(compiled.ports))
    fwd = [s for s in compiled.streams if s.port == first]
    rev = [s for s in compiled.streams if s.port != first]
    out = {}
    if direction in ("forward", "bidirectional") and fwd:
        out["forward"] = fwd
    if direction in ("reverse", "bidirectional") and rev:
        out["reverse"] = rev
    return out


@dataclass
class TrialRunner:
    """Runs trials of one compiled profile on the engine. All times in seconds."""

    compiled: CompiledProfile
    direction: str = "forward"
    duration_s: float = 60.0  # full length (confirmation, latency, ...)
    search_duration_s: float = 60.0  # search trials may be shorter
    timeout_s: float = 2.0  # keep counting after sending ends
    settle_s: float = 2.0  # pause before the next trial
    tolerance: float = 1e-3  # validity: sending may take duration × (1 + tolerance)
    loss_tolerance: LossTolerance = field(default_factory=LossTolerance)
    cores: list[int] | None = None
    early_stop: bool = True
    dut: DutControl | None = None
    max_late_s: float = 0.010  # a failing trial whose sender stalled longer is retried
    retries: int = 2
    cluster: str | None = None  # Ray head address (ports that name a host run there)
    transport: TransportFactory | None = None  # EngineOptions.transport (the cluster's)
    lanes: int | None = None  # sender lanes of every port (tgen_tui.engine.lanes)
    trials_run: int = 0
    _last_end: float = 0.0
    hooks: Hooks | None = None  # before_trial / after_trial around every trial
    # the run owner (tgen_tui.session.owner.RunOwner): every trial's hooks and engine go
    # through it; None: a runner on its own (tests, tools)
    owner: Any = None

    def __post_init__(self) -> None:
        self.groups = select_streams(self.compiled, self.direction)
        if not self.groups:
            raise ValueError(f"the profile has no streams for direction {self.direction!r}")

    @property
    def stream_names(self) -> list[str]:
        return [p.name for ps in self.groups.values() for p in ps]

    def duration_for(self, kind: str) -> float:
        return self.search_duration_s if kind in ("search", "upper_bound") else self.duration_s

    async def throughput_trial(self, rate: float, kind: str = "search") -> Trial:
        """RFC 2544 trial: rate per direction for the kind's duration."""
        return await self.with_retries(
            lambda: self.run(rate, kind, duration_s=self.duration_for(kind))
        )

    async def with_retries(self, attempt) -> Trial:
        """Run ``attempt()``; an invalid trial that a transient stall explains is run again,
        up to ``retries`` times: one that lost frames while the sender stalled (its
        catch-up burst, not the requested rate, met the DUT), or one whose sender missed
        the deadline by less than 10 % of the frames. A sender that cannot reach the rate
        at all is not retried. Every attempt stays in ``extra.retried``."""
        earlier: list[Trial] = []
        while True:
            t = await attempt()
            if not _retry_worthy(t) or len(earlier) >= self.retries:
                break
            earlier.append(t.without_streams())
        if earlier:
            t.extra.retried = earlier
        return t

    async def run(
        self,
        rate: float,
        kind: str,
        *,
        duration_s: float | None = None,
        count: int | None = None,
        reset_dut: bool = False,
        clear_at_s: float | None = None,
        early_stop: bool | None = None,
        learn: dict[str, LearnSpec] | None = None,
    ) -> Trial:
        """One trial. ``count``: frames per direction (stateful trials: N tuples);
        ``clear_at_s``: zero the counters then (RFC 8219 latency delay); ``learn``: ports
        that learn the tuples they receive (RFC 9693 Responder, EngineOptions.learn)."""
        from tgen_tui.engine.controller import open_engine
        from tgen_tui.engine.options import EngineOptions

        d = duration_s if duration_s is not None else (count / rate if count else 0.0)
        if d <= 0:
            raise ValueError("a trial needs a positive duration or count")
        progs = scaled_programs(self.groups, rate, d, count=count)
        compiled = dataclasses.replace(self.compiled, streams=progs)
        wait = self._last_end + self.settle_s - time.monotonic()
        if self.trials_run and wait > 0:
            await trio.sleep(wait)
        ct_reset_s = None
        if reset_dut and self.dut is not None:
            ct_reset_s = await trio.to_thread.run_sync(self.dut.reset)
        trial_no = self.trials_run + 1
        hook_runs = await self._hook("before_trial", trial_no)
        ct_before = await self._count()
        backlog_drops_before = host_backlog_drops()
        early = self.early_stop if early_stop is None else early_stop
        expected = {p.name: p.schedule.count or 0 for p in progs}  # count-limited streams
        t = Trial(rate_pps=rate, kind=kind, duration_s=d)
        t.extra.wall_start = time.time()
        opts = EngineOptions(
            cores=self.cores,
            interval=0.1,
            drain_ms=int(self.timeout_s * 1000),
            dut_netns=self.dut.netns if self.dut else None,
            dut_ssh=self.dut.ssh if self.dut else None,
            cluster=self.cluster,
            transport=self.transport,
            learn=learn,
            lanes=self.lanes,
        )
        opened = self.owner.trial_engine if self.owner is not None else open_engine
        try:
            async with opened(compiled, opts) as eng:
                await eng.start()
                w = await self._drive(eng, t, progs, expected, d, clear_at_s, early)
                await eng.stop()
                final = await eng.final_snapshot()
                if learn:  # what each learning port's worker reported (on its own host)
                    t.extra.learned_report = {
                        port: got for port, got in eng.learned().items() if port in learn
                    }
        finally:
            self._last_end = time.monotonic()
            self.trials_run += 1
        hook_runs += await self._hook("after_trial", trial_no)
        if hook_runs:
            t.extra.dut_hooks = [HookRun.model_validate(h) for h in hook_runs]
        self._account(t, final, expected, w)
        trial_fields(t.extra, final, list(expected))  # loss causes, drop counters
        self._check_tester(t, host_backlog_drops() - backlog_drops_before)
        self._check_sender(t)
        ct_after = await self._count()
        if ct_before is not None or ct_after is not None:
            t.extra.conntrack = ConntrackCounts(
                before=ct_before,
                after=ct_after,
                rise=(ct_after - ct_before)
                if (ct_after is not None and ct_before is not None)
                else None,
                reset_s=ct_reset_s,
            )
        return judge(t, self.loss_tolerance)

    async def _drive(self, eng, t: Trial, progs, expected, d, clear_at_s, early) -> _Window:
        """Watch the trial until every port is done sending or the validity deadline
        passes: clear the counters at ``clear_at_s``, stop early on loss; then read what
        had been sent by the deadline."""
        w = _Window(t_start=time.monotonic() + START_LEAD_S)
        w.last_start = max(p.schedule.start_s for p in progs)
        w.allowed = d * (1 + self.tolerance)
        deadline = w.t_start + w.last_start + w.allowed
        cleared = clear_at_s is None
        pre_clear_tx = clear_slack = 0
        last_seq, lossy_samples = None, 0
        while True:
            now = time.monotonic()
            if eng.ports_done_sending():
                w.t_done = now
                break
            if now >= deadline:
                break
            if not cleared and now >= w.t_start + clear_at_s:
                t_a = time.monotonic()
                pre = await eng.sample_now()
                pre_clear_tx = sum(pre.stream(n).tx_frames for n in expected)
                await eng.clear()
                total_pps = sum(p.schedule.pps for p in progs)
                clear_slack = math.ceil(total_pps * (time.monotonic() - t_a))
                t.extra.clear = ClearRecord(
                    at_s=round(t_a - w.t_start, 4),
                    sent_before=pre_clear_tx,
                    unobserved_frames_max=clear_slack,
                )
                cleared = True
            snap = eng.latest_snapshot()
            if early and snap is not None and snap.seq != last_seq:
                # live loss counts gaps below the highest sequence seen; a frame
                # merely reordered would fill its gap by the next sample, so stop
                # only when two successive samples both exceed the tolerance
                last_seq = snap.seq
                lost = sum(snap.stream(n).lost for n in expected)
                sent = sum(snap.stream(n).tx_frames for n in expected)
                over = not self.loss_tolerance.allows(lost, sent)
                if over and lossy_samples:
                    t.stopped_early = True
                    t.extra.early_stop_at_s = round(now - w.t_start, 3)
                    break
                lossy_samples = 1 if over else 0
            left = deadline - now
            await trio.sleep(min(0.05, left) if left > 0.15 else min(0.005, left))
        at_deadline = await eng.sample_now()
        w.sent_by_deadline = sum(at_deadline.stream(n).tx_frames for n in expected)
        if clear_at_s is not None and cleared:
            # the counters restarted at the clear: add what was sent before it, and
            # allow the frames due in the unobserved window between that reading
            # and the clear's baselines
            w.sent_by_deadline += pre_clear_tx + clear_slack
        return w

    def _account(self, t: Trial, final, expected: dict[str, int], w: _Window) -> None:
        """Counts per stream and port from the final snapshot, the achieved rate, the
        send time, and validity: every frame sent by the deadline."""
        rate = t.rate_pps
        want_total = sum(expected.values())
        complete = w.sent_by_deadline >= want_total
        if w.t_done is not None:
            t.send_time_s = round(min(w.t_done - w.t_start - w.last_start, w.allowed), 4)
        elif complete:
            t.send_time_s = round(w.allowed, 4)  # done by the deadline (tx_done not seen yet)
        per = {n: _stream_counts(final.stream(n), want) for n, want in expected.items()}
        t.tx_frames = sum(v.tx_frames for v in per.values())
        t.rx_frames = sum(v.rx_frames for v in per.values())
        t.lost = sum(v.lost for v in per.values())
        # achieved: the schedule's rate when every frame went out in time; otherwise the
        # engine's achieved rate (requested × sent / due) of what was sent by the deadline
        if complete or t.stopped_early:
            t.achieved_pps = rate
        else:
            from tgen_tui.engine.figures import achieved_pps

            t.achieved_pps = round(achieved_pps(rate, w.sent_by_deadline, want_total), 1)
        t.extra.sent_by_deadline = w.sent_by_deadline
        t.extra.streams = per
        t.extra.spacing = spacing_of(final.streams, per) or None
        t.extra.ports = {
            p.name: PortCounts(
                tx_frames=p.tx_frames,
                rx_frames=p.rx_frames,
                rx_other=p.rx_other,
                if_tx_frames=p.if_tx_frames,
                if_rx_frames=p.if_rx_frames,
                rx_drops=p.rx_drops,
                late_max_ns=getattr(p, "late_max_ns", None),
            )
            for p in final.ports
        }
        if not t.stopped_early and not complete:
            t.valid = False
            t.reason = (
                f"invalid: the sender had sent {w.sent_by_deadline:,} of {want_total:,} frames "
                f"after {w.allowed:.3f} s (achieved "
                f"{100 * t.achieved_pps / rate if rate else 0:.1f} % of the rate)"
            )
        elif t.stopped_early:
            t.reason = (
                f"lost {t.lost:,} frames by {t.extra.early_stop_at_s} s: stopped early "
                f"(sent {t.tx_frames:,} of {want_total:,})"
            )

    def _check_tester(self, t: Trial, host_drops: int) -> None:
        """Frames this host's receive backlog or the tester's RX ring dropped are not the
        DUT's loss: a trial that lost frames with either is invalid."""
        t.extra.host_backlog_drops = host_drops
        if host_drops > 0 and t.lost > 0 and t.valid:
            t.extra.host_dropped = True
            t.valid = False
            t.reason = (
                f"invalid: this host's receive backlog dropped {host_drops:,} packets during "
                f"the trial (CPU contention, /proc/net/softnet_stat) and {t.lost:,} frames "
                "were lost: not the DUT's loss"
            )
        self._check_ring(t)

    def _check_ring(self, t: Trial) -> None:
        """The tester's own RX ring drops (tp_drops, every port)."""
        drops = sum((v.rx_drops or 0) for v in (t.extra.ports or {}).values())
        t.extra.tester_ring_drops = drops
        if drops > 0 and t.lost > 0 and t.valid:
            t.valid = False
            t.reason = (
                f"invalid: the tester's RX ring dropped {drops:,} frames during the trial "
                f"(its receiver fell behind) and {t.lost:,} frames were lost: not the DUT's loss"
            )

    def _check_sender(self, t: Trial) -> None:
        """A sender that stalled longer than max_late_s while frames were lost: invalid."""
        rate = t.rate_pps
        late = max((v.late_max_ns or 0) for v in (t.extra.ports or {}).values()) / 1e9
        t.extra.sender_late_max_s = round(late, 6)
        if not (self.max_late_s and late > self.max_late_s and t.lost > 0 and t.valid):
            return
        t.valid = False
        stop_at = t.extra.early_stop_at_s
        due = rate * len(self.groups) * stop_at if stop_at else 0
        if due and t.tx_frames < 0.9 * due:  # not a stall: it never kept the rate
            t.reason = (
                f"invalid: the sender fell behind ({100 * t.tx_frames / due:.0f} % of the "
                f"frames due by {stop_at} s) and {t.lost:,} frames were lost"
            )
        else:
            t.extra.sender_stalled = True
            t.reason = (
                f"invalid: the sender stalled {late * 1000:.0f} ms (a catch-up burst of "
                f"about {late * rate:,.0f} frames) and {t.lost:,} frames were lost"
            )

    async def _hook(self, name: str, trial_no: int) -> list[dict]:
        """Run DUT hook ``name`` (if the profile has it) for the next trial; its record.
        A failing hook raises HookFailed: the run stops with its output."""
        if self.hooks is None or not self.hooks.has(name):
            return []
        if self.owner is not None:
            return await self.owner.trial_hook(name, trial_no)
        rec = await trio.to_thread.run_sync(self.hooks.run, name, trial_no)
        return [rec.to_dict()] if rec is not None else []

    async def _count(self) -> int | None:
        if self.dut is None or not self.dut.can_count:
            return None
        return await trio.to_thread.run_sync(self.dut.count)


@dataclass
class _Window:
    """The sending window of one trial, as :meth:`TrialRunner._drive` saw it."""

    t_start: float
    last_start: float = 0.0
    allowed: float = 0.0  # duration × (1 + tolerance)
    t_done: float | None = None
    sent_by_deadline: int = 0


def _stream_counts(s, want: int) -> StreamCounts:
    """A stream's counts in the trial record, from its final snapshot."""
    return StreamCounts(
        requested_pps=s.requested_pps,
        count=want,
        tx_frames=s.tx_frames,
        rx_frames=s.rx_frames,
        lost=s.lost,
        out_of_order=s.out_of_order,
        duplicates=s.duplicates,
        latency_ns=Latency.model_validate(dataclasses.asdict(s.latency_ns)),
        latency_source=s.latency_source,
        latency_every=s.latency_every,
    )


def host_backlog_drops() -> int:
    """Packets this host's per-CPU receive backlogs dropped since boot (netdev_max_backlog
    overflows; the second column of /proc/net/softnet_stat). veth delivery goes through
    these backlogs, so a stalled CPU loses lab frames that the DUT never saw."""
    try:
        with open("/proc/net/softnet_stat") as f:
            return sum(int(line.split()[1], 16) for line in f if line.strip())
    except (OSError, ValueError, IndexError):
        return 0


def _retry_worthy(t: Trial) -> bool:
    if t.extra.sender_stalled or t.extra.host_dropped:
        return True
    if t.extra.tester_ring_drops and not t.valid:
        return True
    want = sum(v.count for v in (t.extra.streams or {}).values())
    sent = t.extra.sent_by_deadline or 0
    return not t.valid and not t.stopped_early and want > 0 and sent >= 0.9 * want
