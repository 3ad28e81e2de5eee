"""The setup every procedure shares: the profile with the run's seed, a trial runner per
frame size, the DUT control, the maximum rate, and the preflight that fills the report's
environment, DUT settings and deviations from the RFCs."""

from __future__ import annotations

import math

from tgen_tui.diagnostics import BadInput
from tgen_tui.dut.channel import pick_dut
from tgen_tui.methodology.kit.dut import DutControl, timeout_warnings
from tgen_tui.methodology.kit.params import Params
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.trial import TrialRunner, select_streams
from tgen_tui.profiles.revalidate import with_frame_size, with_pacing, with_seed
from tgen_tui.profiles.units import line_rate_fps


def load(params: Params):
    """The profile with the run's seed."""
    from tgen_tui.profiles.loader import load_profile

    return with_pacing(with_seed(load_profile(params.profile), params.seed), params.pacing)


def profile_sizes(prof) -> list[int]:
    """The profile's frame sizes (a range's mean when a stream's size varies)."""
    from tgen_tui.profiles import models as m

    out = []
    for s in prof.streams:
        lo, hi, mean = m.size_bounds(s.size)
        out.append(int(lo) if lo == hi else int(round(mean)))
    return sorted(set(out))


def frame_sizes_of(params: Params, prof) -> list[int]:
    """--frame-sizes, else the profile's."""
    return params.frame_sizes or profile_sizes(prof)


def make_runner(params: Params, prof, size: int | None) -> tuple[TrialRunner, object]:
    """A trial runner of ``prof`` at frame size ``size`` (None: the profile's), and the
    compiled profile."""
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
    """The DUT's control (options first, then the profile's dut:), None without a DUT."""
    netns, ssh = pick_dut(params.dut_netns, params.dut_ssh, compiled.dut_netns, compiled.dut_ssh)
    if not (netns or ssh or params.dut_reset):
        return None
    return DutControl(netns=netns, ssh=ssh, reset_cmd=params.dut_reset)


def max_rate_for(params: Params, compiled, size: int) -> float:
    """--max-rate, else the first sending port's line rate at ``size`` (whole frames/s)."""
    if params.max_rate:
        return float(params.max_rate)
    groups = select_streams(compiled, params.direction)
    port = next(iter(groups.values()))[0].port
    return float(math.floor(line_rate_fps(compiled.ports[port].speed_bps, size)))


def search_trials_estimate(max_rate: float, error: float) -> int:
    """The trials of one binary search: the bound check, the halvings, the confirmation."""
    return 2 + max(0, math.ceil(math.log2(max(max_rate / error, 1))))


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


def preflight(
    state: RunState, prof, compiled, test_seconds: float, *, stateful: bool = False
) -> None:
    """Environment check, DUT settings and timeout warnings, deviations from the RFCs.
    ``stateful``: the test's trials are N frames long (RFC 9693), not seconds."""
    from tgen_tui.engine.cli_options import check_environment

    p = state.params
    check_environment(compiled, p.cluster)
    dut = dut_control(p, compiled)
    state.dut_settings = dut.settings() if dut else {"source": "none"}
    state.warnings += timeout_warnings(state.dut_settings, test_seconds)
    state.profile_doc = describe_profile(p, prof, compiled)
    state.deviations += deviations(p, stateful)
    state.deviations += shape_deviations(prof, p.duration_s)


def shape_deviations(prof, trial_s: float) -> list[str]:
    """Streams whose frames are not at a constant rate: a rate shape (scaled by each
    trial's load, its peak the stream's rate), drawn gaps or bursts; one line each."""
    out = []
    for s in prof.streams:
        if not s.enabled:
            continue
        speed = prof.ports[s.port].speed if s.port in prof.ports else 10e9
        if s.shape is not None:
            line = f"stream {s.name}: rate over time ({s.shape_text(speed)}), scaled by each trial's load"
            if not s.shape.repeat and s.shape.duration_s < trial_s:
                line += f"; it ends after {s.shape.duration_s:g} s of a {trial_s:g} s trial"
            out.append(line)
        if s.idt.dist != "constant":
            out.append(f"stream {s.name}: {s.idt.dist} inter-departure times, not a constant rate")
        if s.burst_text(speed):
            out.append(f"stream {s.name}: bursts of {s.burst_text(speed)}")
    return out


def deviations(p: Params, stateful: bool) -> list[str]:
    """What the parameters change from the RFCs' trials (each a line of the report)."""
    out = []
    if not p.loss_tolerance.is_zero:
        out.append(f"loss tolerance {p.loss_tolerance.text()} (RFC 2544 throughput allows no loss)")
    if p.quick:
        what = "trials of N frames" if stateful else f"{p.duration_s:g} s trials"
        out.append(
            f"--quick: {what}, {p.repeats} repeats, {p.timeout_s:g} s timeout and "
            f"{p.settle_s:g} s settle (not RFC-length)"
        )
    elif p.search_d < p.duration_s:
        out.append(f"search trials of {p.search_d:g} s; confirmation trials of {p.duration_s:g} s")
    if p.tolerance != 1e-5:
        out.append(
            f"validity tolerance {p.tolerance:g} (siitperf uses 1e-5; a Python sender's "
            "wake-up granularity needs a looser one)"
        )
    return out
