"""The methodology verbs as plain async procedures: parameters in, a result document out.

The command line (``tgen_tui.commands.methodology_cmds``) parses options into
:class:`Params`, runs the test's procedure (:mod:`tgen_tui.methodology.registry`) under
trio with a :class:`RunState`, and writes what the state holds, so an interrupted run
still reports every trial so far (marked partial). Here: the parameters, the state, the
setup shared by every test, and the RFC 2544 procedures (RFC 9693's: ``rfc9693``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from tgen_tui.diagnostics import BadInput
from tgen_tui.dut.channel import pick_dut
from tgen_tui.methodology.dut import DutControl, timeout_warnings
from tgen_tui.methodology.procedures import (
    LossPoint,
    frame_loss,
    pdv_ns,
    penalty_ns,
    tl_wcl_from_percentiles,
)
from tgen_tui.methodology.progress import Progress
from tgen_tui.methodology.search import (
    LossTolerance,
    RepeatedSearch,
    SearchResult,
    TrialResult,
    binary_search,
)
from tgen_tui.methodology.trial import TrialRunner, select_streams
from tgen_tui.profiles.revalidate import with_frame_size, with_seed

RFC2544_SIZES = (64, 128, 256, 512, 1024, 1280, 1518)
L1_OVERHEAD = 20  # preamble + inter-frame gap, bytes


def line_rate_fps(speed_bps: float, frame_size: int) -> int:
    """``line_rate / (8 × (frame_size + 20))``: 14,880,952 fps for 64 B at 10 Gbit/s."""
    return int(speed_bps / (8 * (frame_size + L1_OVERHEAD)))


TRIAL_OPTIONS = (
    "tolerance",
    "cores",
    "early_stop",
    "max_late_s",
    "retries",
    "cluster",
    "transport",
    "lanes",
)


@dataclass
class Params:
    """Every option of the methodology verbs, with METHODOLOGY.md's defaults."""

    profile: str
    duration_s: float = 60.0
    search_duration_s: float | None = None  # None: same as duration
    timeout_s: float = 2.0
    settle_s: float = 2.0
    repeats: int = 10
    max_rate: float | None = None  # None: the port's line rate at the frame size
    error: float = 1000.0
    frame_sizes: list[int] | None = None  # None: the profile's
    loss_tolerance: LossTolerance = field(default_factory=LossTolerance)
    direction: str = "forward"
    seed: int | None = None
    tolerance: float = 1e-3
    cores: list[int] | None = None
    early_stop: bool = True
    max_late_s: float = 0.010
    retries: int = 2
    quick: bool = False
    # latency / pdv
    rate: float | None = None  # None: measure the throughput first
    delay_s: float = 60.0
    step_pct: float = 10.0
    # stateful (RFC 9693)
    n: int | None = None  # None: the Initiator's unique port space
    m: int | None = None
    r: float | None = None
    t_ms: float = 500.0
    d_ms: float | None = None
    alpha: float = 1.0
    beta: float = 0.2
    gamma: float = 0.4
    e: int = 1000
    c0: int = 1_000_000
    phase2: str = "final"  # off | final (after each search, at l) | every (each trial)
    responder_order: str = "random"
    proto: str = "udp"  # udp | tcp: RFC 9693 connections as TCP handshakes (methodology.tcpflow)
    tcp_teardown: str = "fin"  # tcp: fin | rst | none after the handshake of each trial
    dut_netns: str | None = None
    dut_ssh: str | None = None
    dut_reset: str | None = None
    cluster: str | None = None  # Ray head: ports that name a host run there (as tgen run)
    transport: object = None  # EngineOptions.transport for --cluster (commands passes it in)
    hooks: object = None  # dut/hooks.py Hooks: before_trial/after_trial run by every trial
    lanes: int | None = None  # sender lanes of every port (None: the profile's); scaleup --lanes

    def trial_options(self) -> dict:
        """The options every TrialRunner of a test shares: validity, cores, early stop, re-runs."""
        return {k: getattr(self, k) for k in TRIAL_OPTIONS}

    @property
    def search_d(self) -> float:
        return self.search_duration_s if self.search_duration_s is not None else self.duration_s


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

    def trial_done(self, t: TrialResult, **ctx) -> None:
        for s in (t.extra.get("streams") or {}).values():
            if (s.get("latency_ns") or {}).get("p50") is not None and s.get("latency_source"):
                self.latency_sources.add(s["latency_source"])
        if self.progress:
            self.progress.trial(t, **ctx)

    def note(self, text: str) -> None:
        if self.progress:
            self.progress.note(text)


# ---------------------------------------------------------------------------- setup


def load(params: Params):
    """The profile with the run's seed; returns (profile, profile_doc)."""
    from tgen_tui.profiles.loader import load_profile

    return with_seed(load_profile(params.profile), params.seed)


def profile_sizes(prof) -> list[int]:
    from tgen_tui.profiles import models as m

    out = []
    for s in prof.streams:
        lo, hi, mean = m.size_bounds(s.size)
        out.append(int(lo) if lo == hi else int(round(mean)))
    return sorted(set(out))


def make_runner(params: Params, prof, size: int | None) -> tuple[TrialRunner, object]:
    from tgen_tui.packets.compile import compile_profile

    p = with_frame_size(prof, size) if size is not None else prof
    compiled = compile_profile(p)
    dut = dut_control(params, compiled)
    try:
        runner = TrialRunner(
            compiled,
            direction=params.direction,
            duration_s=params.duration_s,
            search_duration_s=params.search_d,
            timeout_s=params.timeout_s,
            settle_s=params.settle_s,
            loss_tolerance=params.loss_tolerance,
            dut=dut,
            hooks=params.hooks,
            **params.trial_options(),
        )
    except ValueError as e:
        raise BadInput(f"{params.profile}: {e}") from None
    return runner, compiled


def dut_control(params: Params, compiled) -> DutControl | None:
    netns, ssh = pick_dut(params.dut_netns, params.dut_ssh, compiled.dut_netns, compiled.dut_ssh)
    if not (netns or ssh or params.dut_reset):
        return None
    return DutControl(netns=netns, ssh=ssh, reset_cmd=params.dut_reset)


def max_rate_for(params: Params, compiled, size: int) -> float:
    if params.max_rate:
        return float(params.max_rate)
    groups = select_streams(compiled, params.direction)
    port = next(iter(groups.values()))[0].port
    return float(line_rate_fps(compiled.ports[port].speed_bps, size))


def describe_profile(params: Params, prof, compiled) -> dict:
    """Profile, hash, seed, every stream's addresses and port ranges and how they vary."""
    d = prof.model_dump(mode="json", exclude_none=True)
    return {
        "path": params.profile,
        "name": prof.name,
        "hash": compiled.profile_hash,
        "seed": prof.seed,
        "streams": d["streams"],
    }


def preflight(state: RunState, prof, compiled, test_seconds: float) -> None:
    """Environment check, DUT settings and timeout warnings, deviations from the RFCs."""
    from tgen_tui.engine.cli_options import check_environment

    p = state.params
    check_environment(compiled, p.cluster)
    dut = dut_control(p, compiled)
    state.dut_settings = dut.settings() if dut else {"source": "none"}
    state.warnings += timeout_warnings(state.dut_settings, test_seconds)
    state.profile_doc = describe_profile(p, prof, compiled)
    if not p.loss_tolerance.is_zero:
        state.deviations.append(
            f"loss tolerance {p.loss_tolerance.text()} (RFC 2544 throughput allows no loss)"
        )
    if p.quick:
        from tgen_tui.methodology.registry import procedure

        what = (
            "trials of N frames" if procedure(state.test).stateful else f"{p.duration_s:g} s trials"
        )
        state.deviations.append(
            f"--quick: {what}, {p.repeats} repeats, {p.timeout_s:g} s timeout and "
            f"{p.settle_s:g} s settle (not RFC-length)"
        )
    elif p.search_d < p.duration_s:
        state.deviations.append(
            f"search trials of {p.search_d:g} s; confirmation trials of {p.duration_s:g} s"
        )
    if p.tolerance != 1e-5:
        state.deviations.append(
            f"validity tolerance {p.tolerance:g} (siitperf uses 1e-5; a Python sender's "
            "wake-up granularity needs a looser one)"
        )


def frame_sizes_of(params: Params, prof) -> list[int]:
    return params.frame_sizes or profile_sizes(prof)


def search_trials_estimate(max_rate: float, error: float) -> int:
    return 2 + max(0, math.ceil(math.log2(max(max_rate / error, 1))))


def _per_size(state: RunState, prof, sizes: list[int]):
    """For each frame size in turn: (size, runner, max rate); the environment check and
    preflight run once, with the first size's profile."""
    p = state.params
    for k, size in enumerate(sizes):
        runner, compiled = make_runner(p, prof, size)
        if k == 0:
            preflight(state, prof, compiled, p.duration_s + p.timeout_s)
        yield size, runner, max_rate_for(p, compiled, size)


# ---------------------------------------------------------------------------- RFC 2544


async def run_throughput(state: RunState) -> None:
    p = state.params
    prof = load(p)
    sizes = frame_sizes_of(p, prof)
    by_size: list[dict] = []
    state.body["frame_sizes"] = by_size
    for size, runner, mr in _per_size(state, prof, sizes):
        rec = RepeatedSearch("throughput", "fps")
        entry = {"frame_size": size, "max_rate": mr, "record": rec, "streams": runner.stream_names}
        by_size.append(entry)
        if state.progress:
            state.progress.expected = len(sizes) * p.repeats * search_trials_estimate(mr, p.error)
        for i in range(p.repeats):
            s = SearchResult(max_rate=mr, error=p.error)
            rec.searches.append(s)
            await binary_search(
                runner.throughput_trial,
                mr,
                p.error,
                result=s,
                on_trial=lambda s_, t, size=size, i=i: state.trial_done(
                    t, l_pps=s_.l_pps, h_pps=s_.h_pps, size=f"{size}B", search=i + 1
                ),
            )
            state.note(
                f"{size} B search {i + 1}/{p.repeats}: l {s.l_pps:,.0f} h "
                f"{'-' if s.h_pps is None else f'{s.h_pps:,.0f}'} fps ({s.status}, "
                f"{s.search_trials} halving trials, confirmed: {s.confirmed})"
            )


async def run_loss(state: RunState) -> None:
    p = state.params
    prof = load(p)
    sizes = frame_sizes_of(p, prof)
    curves: list[dict] = []
    state.body["frame_sizes"] = curves
    for size, runner, mr in _per_size(state, prof, sizes):
        pts: list[LossPoint] = []
        curves.append({"frame_size": size, "max_rate": mr, "points": pts})
        if state.progress:
            state.progress.expected = len(sizes) * int(100 / p.step_pct)

        async def trial(rate: float, kind: str, runner=runner, size=size) -> TrialResult:
            t = await runner.with_retries(
                lambda: runner.run(rate, kind, duration_s=p.duration_s, early_stop=False)
            )
            state.trial_done(t, size=f"{size}B", flr=f"{t.loss_pct:.3f}%")
            return t

        await frame_loss(trial, mr, step_pct=p.step_pct, points=pts)


async def _rate_for(state: RunState, runner: TrialRunner, mr: float, size: int) -> float:
    """The rate a latency/PDV run uses: --rate, or a throughput search's l first."""
    p = state.params
    if p.rate:
        return float(p.rate)
    s = SearchResult(max_rate=mr, error=p.error)
    state.body.setdefault("throughput_searches", []).append({"frame_size": size, "search": s})
    await binary_search(
        runner.throughput_trial,
        mr,
        p.error,
        result=s,
        on_trial=lambda s_, t: state.trial_done(t, l_pps=s_.l_pps, h_pps=s_.h_pps, phase="rate"),
    )
    state.note(f"{size} B: throughput l = {s.l_pps:,.0f} fps; latency trials run at it")
    if s.l_pps <= 0:
        raise BadInput("no passing rate: give --rate, or a --max-rate the DUT can forward")
    return float(s.l_pps)


def _lat_figures(t: TrialResult, p: Params, tagged_after: float) -> dict:
    streams = t.extra.get("streams", {})
    pen = penalty_ns(p.duration_s, tagged_after, p.timeout_s)
    per = {}
    for name, s in streams.items():
        lat = s["latency_ns"]
        per[name] = tl_wcl_from_percentiles(
            lat.get("p50"), lat.get("p999"), s["rx_frames"], s["lost"], pen
        ) | {"min_ns": lat.get("min"), "max_ns": lat.get("max")}
    tl = [v["tl_ns"] for v in per.values() if v["tl_ns"] is not None]
    wcl = [v["wcl_ns"] for v in per.values() if v["wcl_ns"] is not None]
    return {
        "tl_ns": max(tl) if tl else None,
        "wcl_ns": max(wcl) if wcl else None,
        "tagged": sum(v["tagged"] for v in per.values()),
        "lost_tagged": sum(v["lost_tagged"] for v in per.values()),
        "penalty_ns": pen,
        "streams": per,
    }


async def run_latency(state: RunState, *, pdv: bool = False) -> None:
    p = state.params
    prof = load(p)
    sizes = frame_sizes_of(p, prof)
    out: list[dict] = []
    state.body["frame_sizes"] = out
    delay = 0.0 if pdv else min(p.delay_s, p.duration_s)
    for k, (size, runner, mr) in enumerate(_per_size(state, prof, sizes)):
        rate = await _rate_for(state, runner, mr, size)
        trials: list[dict] = []
        out.append({"frame_size": size, "rate_pps": rate, "delay_s": delay, "trials": trials})
        if state.progress:
            state.progress.expected = state.progress.done + p.repeats * (len(sizes) - k)
        for i in range(p.repeats):
            t = await runner.run(
                rate,
                "pdv" if pdv else "latency",
                duration_s=p.duration_s,
                clear_at_s=delay if delay > 0 else None,
                early_stop=False,
            )
            if pdv:
                fig = _pdv_figures(t)
            else:
                fig = _lat_figures(t, p, delay)
                if fig["tagged"] < 500:
                    state.warnings.append(
                        f"{size} B trial {i + 1}: only {fig['tagged']} tagged frames (RFC 8219 "
                        "asks for at least 500): raise the rate or the duration"
                    )
            trials.append({"repeat": i, "figures": fig, "trial": t})
            state.trial_done(
                t,
                size=f"{size}B",
                **(
                    {"pdv_us": _us(fig["pdv_ns"])}
                    if pdv
                    else {"TL_us": _us(fig["tl_ns"]), "WCL_us": _us(fig["wcl_ns"])}
                ),
            )


async def run_pdv(state: RunState) -> None:
    await run_latency(state, pdv=True)


def _pdv_figures(t: TrialResult) -> dict:
    per = {}
    for name, s in t.extra.get("streams", {}).items():
        lat = s["latency_ns"]
        per[name] = pdv_ns(lat.get("min"), lat.get("p999")) | {
            "min_ns": lat.get("min"),
            "p999_ns": lat.get("p999"),
            "frames": s["rx_frames"],
        }
    vals = [v["pdv_ns"] for v in per.values() if v["pdv_ns"] is not None]
    return {"pdv_ns": max(vals) if vals else None, "streams": per}


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"
