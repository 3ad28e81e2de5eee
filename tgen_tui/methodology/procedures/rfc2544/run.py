"""The RFC 2544 procedures (throughput, frame loss) and RFC 8219's (latency, PDV), each an
async ``run(state)`` over the kit's trial runner and binary search."""

from __future__ import annotations

from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.kit.params import Params
from tgen_tui.methodology.kit.search import RepeatedSearch, SearchResult, binary_search
from tgen_tui.methodology.kit.setup import (
    frame_sizes_of,
    load,
    make_runner,
    max_rate_for,
    preflight,
    search_trials_estimate,
)
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.trial import TrialRunner
from tgen_tui.methodology.procedures.rfc2544.latency import (
    pdv_ns,
    penalty_ns,
    tl_wcl_from_percentiles,
)
from tgen_tui.methodology.procedures.rfc2544.loss import LossPoint, frame_loss
from tgen_tui.results.models import LatencyFigures, Trial


def per_size(state: RunState, prof, sizes: list[int]):
    """For each frame size in turn: (size, runner, max rate); the environment check and
    preflight run once, with the first size's profile."""
    p = state.params
    for k, size in enumerate(sizes):
        runner, compiled = make_runner(p, prof, size)
        if k == 0:
            preflight(state, prof, compiled, p.duration_s + p.timeout_s)
        yield size, runner, max_rate_for(p, compiled, size)


async def run_throughput(state: RunState) -> None:
    p = state.params
    prof = load(p)
    sizes = frame_sizes_of(p, prof)
    by_size: list[dict] = []
    state.body["frame_sizes"] = by_size
    for size, runner, mr in per_size(state, prof, sizes):
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
                on_trial=state.on_trial(size=f"{size}B", search=i + 1),
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
    for size, runner, mr in per_size(state, prof, sizes):
        pts: list[LossPoint] = []
        curves.append({"frame_size": size, "max_rate": mr, "points": pts})
        if state.progress:
            state.progress.expected = len(sizes) * int(100 / p.step_pct)

        async def trial(rate: float, kind: str, runner=runner, size=size) -> Trial:
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
        on_trial=state.on_trial(phase="rate"),
    )
    state.note(f"{size} B: throughput l = {s.l_pps:,.0f} fps; latency trials run at it")
    if s.l_pps <= 0:
        raise BadInput("no passing rate: give --rate, or a --max-rate the DUT can forward")
    return float(s.l_pps)


def _lat_figures(t: Trial, p: Params, tagged_after: float) -> LatencyFigures:
    """TL and WCL of the worst stream (RFC 8219: lost tagged frames count as the penalty)."""
    pen = penalty_ns(p.duration_s, tagged_after, p.timeout_s)
    per = {}
    for name, s in (t.extra.streams or {}).items():
        lat = s.latency_ns
        per[name] = tl_wcl_from_percentiles(lat.p50, lat.p999, s.rx_frames, s.lost, pen) | {
            "min_ns": lat.min,
            "max_ns": lat.max,
        }
    tl = [v["tl_ns"] for v in per.values() if v["tl_ns"] is not None]
    wcl = [v["wcl_ns"] for v in per.values() if v["wcl_ns"] is not None]
    return LatencyFigures(
        tl_ns=max(tl) if tl else None,
        wcl_ns=max(wcl) if wcl else None,
        tagged=sum(v["tagged"] for v in per.values()),
        lost_tagged=sum(v["lost_tagged"] for v in per.values()),
        penalty_ns=pen,
        streams=per,
    )


async def run_latency(state: RunState, *, pdv: bool = False) -> None:
    """RFC 8219 latency (TL, WCL) or PDV: ``repeats`` trials per frame size at the
    throughput rate (--rate, else a search's l), tagged after --delay (latency)."""
    p = state.params
    prof = load(p)
    sizes = frame_sizes_of(p, prof)
    out: list[dict] = []
    state.body["frame_sizes"] = out
    delay = 0.0 if pdv else min(p.delay_s, p.duration_s)
    for k, (size, runner, mr) in enumerate(per_size(state, prof, sizes)):
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
            fig = _pdv_figures(t) if pdv else _lat_figures(t, p, delay)
            if not pdv and (fig.tagged or 0) < 500:
                state.warnings.append(
                    f"{size} B trial {i + 1}: only {fig.tagged} tagged frames (RFC 8219 "
                    "asks for at least 500): raise the rate or the duration"
                )
            trials.append({"repeat": i, "figures": fig, "trial": t})
            shown = (
                {"pdv_us": _us(fig.pdv_ns)}
                if pdv
                else {"TL_us": _us(fig.tl_ns), "WCL_us": _us(fig.wcl_ns)}
            )
            state.trial_done(t, size=f"{size}B", **shown)


async def run_pdv(state: RunState) -> None:
    await run_latency(state, pdv=True)


def _pdv_figures(t: Trial) -> LatencyFigures:
    """PDV = D99.9th − Dmin of the worst stream."""
    per = {}
    for name, s in (t.extra.streams or {}).items():
        lat = s.latency_ns
        per[name] = pdv_ns(lat.min, lat.p999) | {
            "min_ns": lat.min,
            "p999_ns": lat.p999,
            "frames": s.rx_frames,
        }
    vals = [v["pdv_ns"] for v in per.values() if v["pdv_ns"] is not None]
    return LatencyFigures(pdv_ns=max(vals) if vals else None, streams=per)


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"
