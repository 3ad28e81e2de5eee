"""The methodology verbs as plain async procedures: parameters in, a result document out.

The command line (``tgen_tui.commands.methodology_cmds``) parses options into
:class:`Params`, calls one of the ``run_*`` coroutines under trio with a
:class:`Session`, and writes what the session holds, so an interrupted run still
reports every trial so far (marked partial).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass, field

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology import procedures as P
from tgen_tui.methodology.dut import DutControl, timeout_warnings
from tgen_tui.methodology.progress import Progress
from tgen_tui.methodology.search import (
    LossTolerance,
    RepeatedSearch,
    SearchResult,
    TrialResult,
    binary_search,
)
from tgen_tui.methodology.stats import summary
from tgen_tui.methodology.trial import TrialRunner, select_streams

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
    dut_netns: str | None = None
    dut_ssh: str | None = None
    dut_reset: str | None = None
    cluster: str | None = None  # Ray head: ports that name a host run there (as tgen run)
    transport: object = None  # EngineOptions.transport for --cluster (commands passes it in)

    def trial_options(self) -> dict:
        """The options every TrialRunner of a test shares: validity, cores, early stop, re-runs."""
        return {k: getattr(self, k) for k in TRIAL_OPTIONS}

    @property
    def search_d(self) -> float:
        return self.search_duration_s if self.search_duration_s is not None else self.duration_s


@dataclass
class Session:
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

    prof = load_profile(params.profile)
    if params.seed is not None:
        prof = _revalidate(prof, lambda d: d.__setitem__("seed", params.seed))
    return prof


def _revalidate(prof, change):
    from pydantic import ValidationError

    from tgen_tui.profiles import models as m

    d = prof.model_dump(mode="json", exclude_none=True)
    change(d)
    try:
        return m.Profile.model_validate(d)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise BadInput(f"{where}: {first.get('msg')}") from None


def with_frame_size(prof, size: int):
    def change(d: dict) -> None:
        for s in d["streams"]:
            s["size"] = size

    return _revalidate(prof, change)


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
            **params.trial_options(),
        )
    except ValueError as e:
        raise BadInput(f"{params.profile}: {e}") from None
    return runner, compiled


def dut_control(params: Params, compiled) -> DutControl | None:
    netns = params.dut_netns or compiled.dut_netns
    ssh = params.dut_ssh or compiled.dut_ssh
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


def preflight(session: Session, prof, compiled, test_seconds: float) -> None:
    """Environment check, DUT settings and timeout warnings, deviations from the RFCs."""
    from tgen_tui.engine.cli_options import check_environment

    p = session.params
    check_environment(compiled, p.cluster)
    dut = dut_control(p, compiled)
    session.dut_settings = dut.settings() if dut else {"source": "none"}
    session.warnings += timeout_warnings(session.dut_settings, test_seconds)
    session.profile_doc = describe_profile(p, prof, compiled)
    if not p.loss_tolerance.is_zero:
        session.deviations.append(
            f"loss tolerance {p.loss_tolerance.text()} (RFC 2544 throughput allows no loss)"
        )
    if p.quick:
        what = (
            "trials of N frames"
            if session.test.startswith("rfc9693")
            else f"{p.duration_s:g} s trials"
        )
        session.deviations.append(
            f"--quick: {what}, {p.repeats} repeats, {p.timeout_s:g} s timeout and "
            f"{p.settle_s:g} s settle (not RFC-length)"
        )
    elif p.search_d < p.duration_s:
        session.deviations.append(
            f"search trials of {p.search_d:g} s; confirmation trials of {p.duration_s:g} s"
        )
    if p.tolerance != 1e-5:
        session.deviations.append(
            f"validity tolerance {p.tolerance:g} (siitperf uses 1e-5; a Python sender's "
            "wake-up granularity needs a looser one)"
        )


def _sizes(params: Params, prof) -> list[int]:
    return params.frame_sizes or profile_sizes(prof)


def search_trials_estimate(max_rate: float, error: float) -> int:
    return 2 + max(0, math.ceil(math.log2(max(max_rate / error, 1))))


def _per_size(session: Session, prof, sizes: list[int]):
    """For each frame size in turn: (size, runner, max rate); the environment check and
    preflight run once, with the first size's profile."""
    p = session.params
    for k, size in enumerate(sizes):
        runner, compiled = make_runner(p, prof, size)
        if k == 0:
            preflight(session, prof, compiled, p.duration_s + p.timeout_s)
        yield size, runner, max_rate_for(p, compiled, size)


# ---------------------------------------------------------------------------- RFC 2544


async def run_throughput(session: Session) -> None:
    p = session.params
    prof = load(p)
    sizes = _sizes(p, prof)
    by_size: list[dict] = []
    session.body["frame_sizes"] = by_size
    for size, runner, mr in _per_size(session, prof, sizes):
        rec = RepeatedSearch("throughput", "fps")
        entry = {"frame_size": size, "max_rate": mr, "record": rec, "streams": runner.stream_names}
        by_size.append(entry)
        if session.progress:
            session.progress.expected = len(sizes) * p.repeats * search_trials_estimate(mr, p.error)
        for i in range(p.repeats):
            s = SearchResult(max_rate=mr, error=p.error)
            rec.searches.append(s)
            await binary_search(
                runner.throughput_trial,
                mr,
                p.error,
                result=s,
                on_trial=lambda s_, t, size=size, i=i: session.trial_done(
                    t, l_pps=s_.l_pps, h_pps=s_.h_pps, size=f"{size}B", search=i + 1
                ),
            )
            session.note(
                f"{size} B search {i + 1}/{p.repeats}: l {s.l_pps:,.0f} h "
                f"{'-' if s.h_pps is None else f'{s.h_pps:,.0f}'} fps ({s.status}, "
                f"{s.search_trials} halving trials, confirmed: {s.confirmed})"
            )


async def run_loss(session: Session) -> None:
    p = session.params
    prof = load(p)
    sizes = _sizes(p, prof)
    curves: list[dict] = []
    session.body["frame_sizes"] = curves
    for size, runner, mr in _per_size(session, prof, sizes):
        pts: list[P.LossPoint] = []
        curves.append({"frame_size": size, "max_rate": mr, "points": pts})
        if session.progress:
            session.progress.expected = len(sizes) * int(100 / p.step_pct)

        async def trial(rate: float, kind: str, runner=runner, size=size) -> TrialResult:
            t = await runner.with_retries(
                lambda: runner.run(rate, kind, duration_s=p.duration_s, early_stop=False)
            )
            session.trial_done(t, size=f"{size}B", flr=f"{t.loss_pct:.3f}%")
            return t

        await P.frame_loss(trial, mr, step_pct=p.step_pct, points=pts)


async def _rate_for(session: Session, runner: TrialRunner, mr: float, size: int) -> float:
    """The rate a latency/PDV run uses: --rate, or a throughput search's l first."""
    p = session.params
    if p.rate:
        return float(p.rate)
    s = SearchResult(max_rate=mr, error=p.error)
    session.body.setdefault("throughput_searches", []).append({"frame_size": size, "search": s})
    await binary_search(
        runner.throughput_trial,
        mr,
        p.error,
        result=s,
        on_trial=lambda s_, t: session.trial_done(t, l_pps=s_.l_pps, h_pps=s_.h_pps, phase="rate"),
    )
    session.note(f"{size} B: throughput l = {s.l_pps:,.0f} fps; latency trials run at it")
    if s.l_pps <= 0:
        raise BadInput("no passing rate: give --rate, or a --max-rate the DUT can forward")
    return float(s.l_pps)


def _lat_figures(t: TrialResult, p: Params, tagged_after: float) -> dict:
    streams = t.extra.get("streams", {})
    pen = P.penalty_ns(p.duration_s, tagged_after, p.timeout_s)
    per = {}
    for name, s in streams.items():
        lat = s["latency_ns"]
        per[name] = P.tl_wcl_from_percentiles(
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


async def run_latency(session: Session, *, pdv: bool = False) -> None:
    p = session.params
    prof = load(p)
    sizes = _sizes(p, prof)
    out: list[dict] = []
    session.body["frame_sizes"] = out
    delay = 0.0 if pdv else min(p.delay_s, p.duration_s)
    for k, (size, runner, mr) in enumerate(_per_size(session, prof, sizes)):
        rate = await _rate_for(session, runner, mr, size)
        trials: list[dict] = []
        out.append({"frame_size": size, "rate_pps": rate, "delay_s": delay, "trials": trials})
        if session.progress:
            session.progress.expected = session.progress.done + p.repeats * (len(sizes) - k)
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
                    session.warnings.append(
                        f"{size} B trial {i + 1}: only {fig['tagged']} tagged frames (RFC 8219 "
                        "asks for at least 500): raise the rate or the duration"
                    )
            trials.append({"repeat": i, "figures": fig, "trial": t})
            session.trial_done(
                t,
                size=f"{size}B",
                **(
                    {"pdv_us": _us(fig["pdv_ns"])}
                    if pdv
                    else {"TL_us": _us(fig["tl_ns"]), "WCL_us": _us(fig["wcl_ns"])}
                ),
            )


async def run_pdv(session: Session) -> None:
    await run_latency(session, pdv=True)


def _pdv_figures(t: TrialResult) -> dict:
    per = {}
    for name, s in t.extra.get("streams", {}).items():
        lat = s["latency_ns"]
        per[name] = P.pdv_ns(lat.get("min"), lat.get("p999")) | {
            "min_ns": lat.get("min"),
            "p999_ns": lat.get("p999"),
            "frames": s["rx_frames"],
        }
    vals = [v["pdv_ns"] for v in per.values() if v["pdv_ns"] is not None]
    return {"pdv_ns": max(vals) if vals else None, "streams": per}


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"


# ---------------------------------------------------------------------------- RFC 9693


def unique_space(runner: TrialRunner) -> int:
    progs = [q for ps in runner.groups.values() for q in ps]
    return min((q.unique_space for q in progs), default=1)


def _stateful_setup(session: Session):
    p = session.params
    prof = load(p)
    size = _sizes(p, prof)[0]
    runner, compiled = make_runner(p, prof, None)
    if runner.dut is None:
        raise BadInput(
            "RFC 9693 tests reset the DUT before each trial: give dut.netns in the profile, "
            "--dut-netns, or --dut-reset 'COMMAND'"
        )
    space = unique_space(runner)
    if space <= 1:
        raise BadInput(
            f"{p.profile}: the Initiator stream needs `mode: unique` port fields "
            "(see profiles/nat44-stateful.yaml)"
        )
    n = p.n or space
    if n > space:
        raise BadInput(
            f"-N {n:,} is more than the profile's unique port combinations ({space:,}): "
            "widen the port ranges"
        )
    if p.m is not None and p.m > n:
        raise BadInput(
            f"-M {p.m:,} is more than -N {n:,}: the Responder's table could never fill "
            "(RFC 9693 fails such a trial)"
        )
    preflight(session, prof, compiled, p.duration_s)
    session.body["phase2_runner"] = _phase2_runner(session, prof, runner, n, space)
    return prof, runner, compiled, size, n, space


def _phase2_runner(session: Session, prof, runner: TrialRunner, n: int, space: int):
    """The Responder's runner (see :mod:`tgen_tui.methodology.phase2`), or None with the
    reason recorded: it needs a second port and the Responder's MACs (from a stream the
    profile sends from that port, else the lab's). Sets
    ``session.body["learn"]``: the port that learns in phase 1, its table file and M."""
    from tgen_tui.methodology.phase2 import (
        ResponderSpec,
        lab_responder,
        learn_options,
        new_table_path,
        responder_profile,
        responder_program,
    )
    from tgen_tui.packets.compile import compile_profile

    p = session.params
    if p.phase2 == "off":
        return None
    if len(runner.compiled.ports) < 2:
        session.warnings.append("phase 2 not run: the profile has no second (Responder) port")
        return None
    first = _first_port(runner)
    other = [q for q in runner.compiled.ports if q != first]
    initiators = [q for ps in runner.groups.values() for q in ps]
    responder = next((q.rx_port for q in initiators if q.rx_port in other), other[0])
    # the Responder's MACs: a stream the profile sends from that port, else the lab's
    own = next((s for s in prof.streams if s.port == responder), None)
    lab = bool(runner.dut and runner.dut.netns and runner.dut.netns.endswith("-dut"))
    if own is None and not lab:
        session.warnings.append(
            f"phase 2 not run: it needs the Responder's MACs: add a stream sent from port "
            f"{responder} (its eth src and dst are used), or run against the lab DUT"
        )
        return None
    path = new_table_path()
    m = p.m or n
    session.body["learn"] = {
        "path": path,
        "port": responder,
        "initiator_port": first,
        "max": m,
        "options": learn_options(responder, path, [q.index for q in initiators], m),
    }
    spec = (
        ResponderSpec(responder, own.eth.src, own.eth.dst)
        if own is not None and own.eth is not None
        else lab_responder(responder)
    )
    reply = responder_profile(prof, spec)
    compiled = responder_program(compile_profile(reply), path, p.responder_order)
    return TrialRunner(
        compiled,
        direction="reverse",
        timeout_s=p.timeout_s,
        settle_s=0.0,
        dut=runner.dut,
        **p.trial_options(),
    )


def _first_port(runner: TrialRunner) -> str:
    return next(iter(runner.compiled.ports))


async def stateful_trial(
    session: Session, runner: TrialRunner, n: int, rate: float, kind: str, *, phase2=None
) -> TrialResult:
    """Phase 1 at ``rate`` with ``n`` unique tuples, the DUT reset first. Passes when all
    n arrived, the sender kept the rate, and the DUT's conntrack count rose by n. With
    phase 2 (``--phase2 every``, or the final trial), the Responder's port learns the
    translated tuples in phase 1 (at most M; fewer fail the trial), and D ms after phase 1
    began it sends α·rate replies to the learned tuples, all of which must come back
    through the NAT."""
    from tgen_tui.methodology.phase2 import learned_count, remove_table

    p = session.params
    if phase2 is None:
        phase2 = p.phase2 == "every"
    r2 = session.body.get("phase2_runner")
    lrn = session.body.get("learn") if (phase2 and r2 is not None) else None
    try:
        t = await runner.with_retries(
            lambda: runner.run(
                rate, kind, count=n, reset_dut=True, learn=lrn["options"] if lrn else None
            )
        )
        t.extra["connections"] = n
        ct = t.extra.get("conntrack") or {}
        rise = ct.get("rise")
        t.extra["conntrack_rise"] = rise
        if t.passed and rise is not None and rise < n:
            t.passed = False
            t.reason = f"failed to fill the state table: conntrack rose by {rise:,} of {n:,}"
        receive_s = n / rate + p.t_ms / 1000
        t.extra["phase1_s"] = round(receive_s, 3)
        if lrn is None or not t.passed:
            return t
        m = lrn["max"]
        # the worker's own report (the table may be on another host, --cluster), else the file
        rep = (t.extra.pop("learned_report", None) or {}).get(lrn["port"]) or {}
        learned = int(rep["tuples"]) if "tuples" in rep else learned_count(lrn["path"])
        t.extra["learned"] = {"tuples": learned, "max": m, "port": lrn["port"]}
        if learned < m:
            t.passed = False
            t.reason = (
                f"failed to fill the state table: the Responder learned {learned:,} of "
                f"{m:,} tuples (-M)"
            )
            return t
        # D: phase 2 starts at least 1000·N/R + T ms (and -D ms) after phase 1 began
        d_min = 1000 * n / rate + p.t_ms
        d_want = max(d_min, p.d_ms or 0.0)
        wait = t.extra["wall_start"] + d_want / 1000 - time.time()
        if wait > 0:
            import trio

            await trio.sleep(wait)
        started = time.time()
        rate2 = max(1.0, p.alpha * rate)
        t2 = await r2.with_retries(lambda: r2.run(rate2, "phase2", count=n))
        d2 = t2.to_dict()
        d2["extra"].pop("streams", None)
        back = t2.extra.get("ports", {}).get(lrn["initiator_port"], {})
        d2["order"] = p.responder_order
        d2["learned_tuples"] = learned
        d2["table_max"] = m
        d2["replies_back_through_nat"] = t2.rx_frames
        d2["through_nat"] = bool(t2.passed and t2.rx_frames > 0)
        d2["initiator_port_rx"] = back.get("rx_frames")
        d2["d_ms"] = round((started - t.extra["wall_start"]) * 1000)  # D: after phase 1 began
        d2["d_ms_min"] = round(d_min)  # 1000·N/R + T ≤ D
        if p.d_ms is not None and p.d_ms < d_min:
            d2["d_ms_note"] = f"-D {p.d_ms:g} ms is below 1000·N/R + T: waited {d_min:.0f} ms"
        t.extra["phase2"] = d2
        if not t2.passed:
            t.passed = False
            t.reason = f"phase 2: {t2.reason}"
        return t
    finally:
        if lrn is not None:
            remove_table(lrn["path"])


async def run_cps(session: Session) -> None:
    p = session.params
    prof, runner, compiled, size, n, space = _stateful_setup(session)
    mr = max_rate_for(p, compiled, size)
    rec = RepeatedSearch("cps", "conn/s")
    session.body |= {"connections": n, "unique_space": space, "max_rate": mr, "record": rec}
    if session.progress:
        session.progress.expected = p.repeats * search_trials_estimate(mr, p.error)

    async def trial(rate: float, kind: str) -> TrialResult:
        return await stateful_trial(session, runner, n, rate, kind)

    for i in range(p.repeats):
        s = SearchResult(max_rate=mr, error=p.error)
        rec.searches.append(s)
        await binary_search(
            trial,
            mr,
            p.error,
            confirm=False,  # a phase-1 trial is N frames long; l is re-tested by each repeat
            result=s,
            on_trial=lambda s_, t, i=i: session.trial_done(
                t, l_pps=s_.l_pps, h_pps=s_.h_pps, search=i + 1, N=n
            ),
        )
        if p.phase2 == "final" and s.l_pps > 0 and session.body.get("phase2_runner"):
            t = await stateful_trial(session, runner, n, s.l_pps, "confirm", phase2=True)
            s.trials.append(t)
            s.confirmed = t.passed
            session.trial_done(t, l_pps=s.l_pps, h_pps=s.h_pps, search=i + 1, phase="1+2")
        session.note(
            f"cps search {i + 1}/{p.repeats}: l {s.l_pps:,.0f} h "
            f"{'-' if s.h_pps is None else f'{s.h_pps:,.0f}'} conn/s ({s.status})"
        )


async def run_capacity(session: Session) -> None:
    p = session.params
    prof, runner, compiled, size, n, space = _stateful_setup(session)
    mr = max_rate_for(p, compiled, size)
    res = P.CapacityResult(c0=p.c0, beta=p.beta, gamma=p.gamma, error=p.e)
    session.body |= {"unique_space": space, "max_rate": mr, "capacity": res}
    if p.c0 > space:
        raise BadInput(
            f"--c0 {p.c0:,} is more than the profile's unique port combinations ({space:,}): "
            "widen the port ranges (profiles/rfc9693-capacity.yaml has 6.4 M) or lower --c0"
        )
    if session.progress:
        session.progress.expected = search_trials_estimate(mr, p.error) + 12

    async def cps_search(c: int) -> SearchResult:
        if c > space:
            raise BadInput(f"the search needs {c:,} connections; the profile has {space:,}")
        s = SearchResult(max_rate=mr, error=p.error)
        await binary_search(
            lambda r, k: stateful_trial(session, runner, c, r, k),
            mr,
            p.error,
            confirm=False,
            result=s,
            on_trial=lambda s_, t: session.trial_done(
                t, l_pps=s_.l_pps, h_pps=s_.h_pps, phase="R0", C=c
            ),
        )
        session.note(f"R0 search with C = {c:,}: {s.l_pps:,.0f} conn/s ({s.status})")
        return s

    async def cps_trial(c: int, rate: float) -> TrialResult:
        if c > space:
            t = TrialResult(rate_pps=rate, kind="capacity", passed=False)
            t.reason = f"{c:,} connections exceed the profile's {space:,} unique combinations"
            return t
        t = await stateful_trial(session, runner, c, rate, "capacity")
        session.trial_done(t, phase="C", C=c)
        return t

    await P.capacity_search(
        cps_search, cps_trial, c0=p.c0, beta=p.beta, gamma=p.gamma, error=p.e, result=res
    )
    if res.c0_used and res.c0_used != p.c0:
        session.deviations.append(
            f"no rate passed with C0 = {p.c0:,} connections: C0 halved to {res.c0_used:,}"
        )


async def run_teardown(session: Session) -> None:
    """Load N connections, time a full flush, subtract an empty table's flush time."""
    import trio

    p = session.params
    prof, runner, compiled, size, n, space = _stateful_setup(session)
    rate = float(p.r or min(50_000.0, max_rate_for(p, compiled, size)))
    rows: list[dict] = []
    session.body |= {"connections": n, "load_rate": rate, "repeats": rows}
    if session.progress:
        session.progress.expected = p.repeats
    for i in range(p.repeats):
        t = await stateful_trial(session, runner, n, rate, "load")
        session.trial_done(t, repeat=i + 1, N=n)
        loaded = await trio.to_thread.run_sync(runner.dut.count)
        t_n = await trio.to_thread.run_sync(runner.dut.reset)
        after = await trio.to_thread.run_sync(runner.dut.count)
        t_0 = await trio.to_thread.run_sync(runner.dut.reset)
        dt = t_n - t_0
        row = {
            "repeat": i,
            "loaded_entries": loaded,
            "entries_after_flush": after,
            "flush_s": round(t_n, 6),
            "empty_flush_s": round(t_0, 6),
            "rate_per_s": (loaded / dt) if (loaded and dt > 0) else None,
            "load_trial": t,
        }
        if loaded is not None and loaded < n:
            session.warnings.append(
                f"repeat {i + 1}: only {loaded:,} of {n:,} entries were loaded before the flush"
            )
        rows.append(row)
        session.note(
            f"teardown {i + 1}/{p.repeats}: {loaded:,} entries flushed in {t_n * 1000:.1f} ms "
            f"(empty table {t_0 * 1000:.1f} ms): "
            + (f"{row['rate_per_s']:,.0f}/s" if row["rate_per_s"] else "no rate (flush too fast)")
        )


# ---------------------------------------------------------------------------- the document


_HEADLINE = {"throughput": "throughput_fps", "cps": "cps"}


def _trial_list(session: Session) -> list[dict]:
    """Every trial of the run, flat, for the results store. Trials of a binary search carry
    their search index (``search``); each search's outcome is one more entry with a
    ``repeat`` index and its figures under ``metrics`` (l as the headline, h, the number of
    trials), so that ``tgen results compare``/``check`` see the spread of the repeated
    searches, not of the rates a search happened to try."""
    b = session.body
    out: list[dict] = []

    def add(t: TrialResult, **kw) -> None:
        d = t.to_dict()
        d.get("extra", {}).pop("streams", None)
        out.append(d | kw)

    def searches(record, **kw) -> None:
        name = _HEADLINE.get(record.name, f"{record.name}_{record.unit}".replace("/", "_per_"))
        for i, srch in enumerate(record.searches):
            for t in srch.trials:
                add(t, search=i, **kw)
            if srch.status in ("ok", "upper bound not reached"):
                m = {name: srch.l_pps, "trials": len(srch.trials)}
                if srch.h_pps is not None:
                    m[name.replace("_fps", "") + "_h"] = srch.h_pps
                out.append(
                    {"repeat": i, "kind": "search_result", "status": srch.status}
                    | kw
                    | {"metrics": m}
                )

    for fs in b.get("frame_sizes", []):
        if "record" in fs:
            searches(fs["record"], frame_size=fs["frame_size"])
        for pt in fs.get("points", []):
            add(pt.trial, frame_size=fs["frame_size"], load_pct=pt.load_pct)
        for tr in fs.get("trials", []):
            add(tr["trial"], repeat=tr["repeat"], frame_size=fs["frame_size"])
    if "record" in b:
        searches(b["record"])
    if "capacity" in b:
        for st in b["capacity"].steps:
            if st.trial:
                add(st.trial, connections=st.connections, phase=st.phase)
            if st.search:
                for t in st.search.trials:
                    add(t, connections=st.connections, phase=st.phase)
    for row in b.get("repeats", []):
        add(row["load_trial"], repeat=row["repeat"])
    return out


def build_document(session: Session, *, partial: bool, signal_name: str | None = None) -> dict:
    """The JSON report: top level ``searches`` and ``summary`` (or ``capacity``), every
    trial, the parameters, the DUT settings and the seed."""
    from tgen_tui.calibrate.floor import result_fields

    p = session.params
    b = session.body
    params = dataclasses.asdict(p)
    params.pop("transport", None)  # a factory, not a parameter
    params["loss_tolerance"] = p.loss_tolerance.text()
    doc: dict = {
        "test": session.test,
        "tester": f"tgen-tui {_version()}",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(session.started)),
        "duration_s": round(time.time() - session.started, 3),
        "partial": partial,
        "quick": p.quick,
        "profile": session.profile_doc.get("name"),
        "profile_path": p.profile,
        "profile_hash": session.profile_doc.get("hash"),
        "seed": session.profile_doc.get("seed"),
        "direction": p.direction,
        "rate_unit": "frames/s per direction"
        if session.test.startswith("rfc2544")
        else "connections/s",
        "parameters": params,
        "profile_detail": session.profile_doc,
        "dut": session.dut_settings,
        "environment": {"tester": os.uname().nodename, "cpus": os.cpu_count()},
        **result_fields(session.latency_sources),
        "warnings": session.warnings,
        "deviations": session.deviations,
    }
    if signal_name:
        doc["signal"] = signal_name
    metrics: dict = {}
    fss = b.get("frame_sizes", [])
    if fss and "record" in fss[0]:
        per = []
        allsearch = []
        for fs in fss:
            rec: RepeatedSearch = fs["record"]
            sm = rec.summary()
            per.append(
                {
                    "frame_size": fs["frame_size"],
                    "max_rate": fs["max_rate"],
                    "streams": fs["streams"],
                    "summary": sm,
                }
                | rec.to_dict()
            )
            for s in rec.searches:
                allsearch.append({"frame_size": fs["frame_size"]} | s.to_dict())
        doc["searches"] = allsearch
        doc["summary"] = {"frame_size": fss[0]["frame_size"]} | per[0]["summary"]
        doc["by_frame_size"] = per
        metrics["throughput_fps"] = per[0]["summary"].get("median")
    elif fss and "points" in fss[0]:
        doc["frame_loss"] = [
            {
                "frame_size": fs["frame_size"],
                "max_rate": fs["max_rate"],
                "points": [pt.to_dict() for pt in fs["points"]],
            }
            for fs in fss
        ]
    elif fss and "trials" in fss[0]:
        key = "pdv_ns" if session.test.endswith("pdv") else None
        per = []
        for fs in fss:
            figs = [tr["figures"] for tr in fs["trials"]]
            entry = {
                "frame_size": fs["frame_size"],
                "rate_pps": fs["rate_pps"],
                "delay_s": fs["delay_s"],
                "trials": [
                    {
                        "repeat": tr["repeat"],
                        "figures": tr["figures"],
                        "trial": tr["trial"].to_dict(),
                    }
                    for tr in fs["trials"]
                ],
            }
            if key:
                entry["summary"] = {"pdv_ns": summary([f["pdv_ns"] for f in figs])}
            else:
                entry["summary"] = {
                    "tl_ns": summary([f["tl_ns"] for f in figs]),
                    "wcl_ns": summary([f["wcl_ns"] for f in figs]),
                }
            per.append(entry)
        doc["by_frame_size"] = per
        if per:
            doc["summary"] = {"frame_size": per[0]["frame_size"]} | per[0]["summary"]
            if key:
                metrics["pdv_ns"] = per[0]["summary"]["pdv_ns"].get("median")
            else:
                metrics["tl_ns"] = per[0]["summary"]["tl_ns"].get("median")
                metrics["wcl_ns"] = per[0]["summary"]["wcl_ns"].get("median")
        if b.get("throughput_searches"):
            doc["throughput_searches"] = [
                {"frame_size": x["frame_size"]} | x["search"].to_dict()
                for x in b["throughput_searches"]
            ]
    if "record" in b:
        rec = b["record"]
        doc |= {"connections": b["connections"], "unique_space": b["unique_space"]}
        doc |= rec.to_dict()
        metrics["cps"] = doc["summary"].get("median")
    if "capacity" in b:
        cap: P.CapacityResult = b["capacity"]
        doc["capacity"] = cap.to_dict()
        doc["summary"] = {
            "capacity": cap.capacity,
            "h_connections": cap.h_connections,
            "r0": cap.r0,
            "status": cap.status,
        }
        metrics["capacity"] = cap.capacity
    if "repeats" in b:
        rows = b["repeats"]
        doc["connections"] = b["connections"]
        doc["load_rate"] = b["load_rate"]
        doc["teardown"] = [
            {k: v for k, v in r.items() if k != "load_trial"}
            | {"load_trial": r["load_trial"].to_dict()}
            for r in rows
        ]
        doc["summary"] = summary([r["rate_per_s"] for r in rows])
        metrics["teardown_per_s"] = doc["summary"].get("median")
    doc["metrics"] = {k: v for k, v in metrics.items() if v is not None}
    doc["trials_flat_count"] = len(_trial_list(session))
    return doc


def flat_trials(session: Session) -> list[dict]:
    return _trial_list(session)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("tgen-tui")
    except Exception:  # noqa: BLE001
        return "0.1.0"
