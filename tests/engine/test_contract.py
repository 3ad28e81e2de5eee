"""One contract, two engines: the same scenario (start, a rate change in units the profiles
accept, stop, clear, restart) through the console's fake engine and through the real
engine in a lab, compared field by field.

The fake half runs everywhere (the fake needs no root, and runs on asyncio as in the
console); the comparison needs a lab (root). What must agree: the snapshot fields that
are present, the port states at each step, the requested rates after the change (the
same rate code resolves ``2Mbit L1`` and ``0.025%``), zero counters after the clear,
growing counters after the restart, no loss, and the events (kind and every field but
the times).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from tgen_tui.engine.api import EngineAPI, EngineDescription, EngineEvent
from tgen_tui.engine.assignment import default_cores
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.packets.compile import CompiledProfile, compile_profile
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.ui.fake import FakeEngine

from .engine_helpers import profile_yaml, stream_yaml

# the rate change: a bit rate with an explicit layer on a stream, a share of line rate on
# a port (the old fake parsed neither as the engine does)
STREAM_RATE = ("up", "2Mbit L1")  # 2e6 / (8 × (64 + 20)) = 2,976.19 fps
PORT_RATE = ("p1", "0.025%")  # 0.025 % of 10 Gbit/s at 84 B per frame on the wire = 3,720.24 fps
EXPECTED_PPS = (2e6 / (8 * 84), 10e9 * 0.00025 / (8 * 84))
STEPS = ("started", "rated", "stopped", "cleared", "restarted", "later", "resumed", "final")
STATES = {
    "started": "running",
    "rated": "running",
    "stopped": "stopped",
    "cleared": "stopped",
    "restarted": "running",
    "later": "running",
    "resumed": "running",
    "final": "stopped",
}
COUNTERS = ("tx_frames", "rx_frames", "tx_bytes", "rx_bytes")
PAUSED_RATE = 1000.0  # fps, set on a paused stream


def _profile(prefix: str) -> CompiledProfile:
    """Up through the lab's NAT44 DUT, and the replies (after 300 ms: the mappings exist)."""
    up = stream_yaml("up", "p0", rx_port="p1")
    down = stream_yaml(
        "down", "p1", rx_port="p0", src_ports="7", extra="    schedule: {start: 300ms}\n"
    ).replace("dst_port: 7", "dst_port: {min: 10000, max: 10063, mode: inc}")
    return compile_profile(load_profile_text(profile_yaml(prefix, up + down)))


@dataclass
class Run:
    """What one engine did in the scenario."""

    snaps: dict[str, StatsSnapshot]
    rates: tuple[float, float]  # what the two set_rate calls returned
    events: list[EngineEvent]  # from the first command on
    desc: EngineDescription  # after the rate change


async def scenario(eng: EngineAPI, wait: Callable[[float], Awaitable[None]]) -> Run:
    """Start, rate change, stop, clear, restart, a rate set while paused, stop; a snapshot
    after each step."""
    snaps: dict[str, StatsSnapshot] = {}

    async def step(name: str, seconds: float) -> None:
        await wait(seconds)
        snap = eng.latest_snapshot()
        assert snap is not None
        snaps[name] = snap

    cursor, _ = eng.events_since(0)
    await eng.start()
    await step("started", 0.6)
    r1 = await eng.set_rate(*STREAM_RATE)
    r2 = await eng.set_rate(*PORT_RATE)
    desc = eng.describe()
    await step("rated", 0.6)
    await eng.stop()
    await step("stopped", 0.3)
    await eng.clear()
    await step("cleared", 0.3)
    await eng.start()
    await step("restarted", 0.6)
    await step("later", 0.5)
    await eng.pause("up")
    await eng.set_rate("up", PAUSED_RATE)  # the pacer must keep it for the resume
    await eng.resume("up")
    await step("resumed", 0.6)
    await eng.stop()
    await step("final", 0.3)
    _, events = eng.events_since(cursor)
    return Run(snaps, (r1, r2), events, desc)


def on_fake(compiled: CompiledProfile, play):
    """``play(engine, wait)`` on the fake, on asyncio (as in the console), on simulated time."""
    clock = [1000.0]

    async def wait(seconds: float) -> None:
        clock[0] += seconds

    eng = FakeEngine(compiled, clock=lambda: clock[0], cores=default_cores())
    return asyncio.run(play(eng, wait))


def on_real(compiled: CompiledProfile, play):
    """``play(engine, trio.sleep)`` on the real engine (workers, the lab's kernel path)."""
    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions

    async def main():
        opts = EngineOptions(cores=default_cores(), interval=0.05, drain_ms=200)
        async with open_engine(compiled, opts) as eng:
            return await play(eng, trio.sleep)

    return trio.run(main)


def run_fake(compiled: CompiledProfile) -> Run:
    return on_fake(compiled, scenario)


def run_real(compiled: CompiledProfile) -> Run:
    return on_real(compiled, scenario)


# ---------------------------------------------------------------------- checks of one run
def check_run(run: Run) -> None:
    """What the scenario must show on any engine."""
    assert run.rates == pytest.approx(EXPECTED_PPS, rel=1e-12)
    for name, state in STATES.items():
        assert {p.state for p in run.snaps[name].ports} == {state}, name
    rated = run.snaps["rated"]
    assert rated.stream("up").requested_pps == pytest.approx(EXPECTED_PPS[0], rel=1e-12)
    assert rated.port("p1").requested_pps == pytest.approx(EXPECTED_PPS[1], rel=1e-12)
    cleared = run.snaps["cleared"]
    for x in (*cleared.ports, *cleared.streams):
        assert all(getattr(x, k) == 0 for k in COUNTERS), x
        assert getattr(x, "lost", 0) == 0
    before, after = run.snaps["restarted"], run.snaps["later"]
    for x in (*before.ports, *before.streams):
        y = next(z for z in (*after.ports, *after.streams) if z.name == x.name)
        assert 0 < x.tx_frames < y.tx_frames and 0 < x.rx_frames < y.rx_frames, x.name
    up = run.snaps["resumed"].stream("up")
    assert up.requested_pps == PAUSED_RATE
    assert up.tx_pps == pytest.approx(PAUSED_RATE, rel=0.2)  # not the rate before the pause
    for s in run.snaps["final"].streams:
        assert s.tx_frames > 0 and s.lost == 0 and s.rx_frames == s.tx_frames, s


def _shape(obj: Any, prefix: str = "") -> dict[str, bool]:
    """Field path -> is it set (not None), through nested dataclasses."""
    out: dict[str, bool] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            out.update(_shape(v, f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = v is not None
    return out


def shape(snap: StatsSnapshot) -> dict[str, Any]:
    return {
        "snapshot": _shape(snap),
        "ports": {p.name: _shape(p) for p in snap.ports},
        "flows": {f.name: _shape(f) for f in snap.flows},
        "streams": {s.name: _shape(s) for s in snap.streams},
        "workers": {w.id: _shape(w) for w in snap.workers},
        "dut": _shape(snap.dut) if snap.dut is not None else None,
        "warnings": snap.warnings,
    }


def event_keys(events: list[EngineEvent]) -> list[dict[str, Any]]:
    """Every field of every event but its times."""
    return [{k: v for k, v in ev.to_dict().items() if k not in ("t", "wall")} for ev in events]


# ---------------------------------------------------------------------- the tests
def test_the_fake_runs_the_contract_scenario() -> None:
    run = run_fake(_profile("tgen"))
    check_run(run)
    again = run_fake(_profile("tgen"))  # simulated time: the same numbers every time
    assert again.snaps == run.snaps and again.rates == run.rates
    kinds = [(e["event"], e.get("port"), e.get("new")) for e in event_keys(run.events)]
    assert kinds[:4] == [
        ("port_state", "p0", "starting"),
        ("port_state", "p0", "running"),
        ("port_state", "p1", "starting"),
        ("port_state", "p1", "running"),
    ]


def test_fake_and_real_engine_agree(nat_lab) -> None:
    compiled = _profile(nat_lab)
    fake, real = run_fake(compiled), run_real(compiled)
    check_run(real)
    assert fake.rates == real.rates
    assert event_keys(fake.events) == event_keys(real.events)
    for name in STEPS:
        assert shape(fake.snaps[name]) == shape(real.snaps[name]), name
        f, r = fake.snaps[name], real.snaps[name]
        assert [p.state for p in f.ports] == [p.state for p in r.ports], name
        assert [s.requested_pps for s in f.streams] == [s.requested_pps for s in r.streams]
        assert [p.requested_pps for p in f.ports] == [p.requested_pps for p in r.ports]
    assert fake.desc.ports == real.desc.ports
    assert fake.desc.streams == real.desc.streams
    assert [(w.id, w.core, w.ports, w.streams) for w in fake.desc.workers] == [
        (w.id, w.core, w.ports, w.streams) for w in real.desc.workers
    ]
    check_run(fake)


# ---------------------------------------------------------------------- socket flows
# A mixed profile: a frame stream and a TCP flow from p0, a UDP flow from p1 (a port that
# sends no frame stream: a rate on it scales its UDP flows), through the lab's DUT between
# its transport hosts. The same scenario's steps, with the rate changes of flows.
FLOW_RATES = (("back", "1M"), ("p1", "1.5M"))  # bit/s: a UDP flow, then its port
FLOW_EXPECTED = (1e6, 1.5e6)
FLOW_STEPS = ("started", "rated", "stopped", "cleared", "restarted", "later", "final")
RUNNING_STEPS = ("started", "rated", "restarted", "later")


def _flow_profile(prefix: str) -> CompiledProfile:
    from tgen_tui.lab import hosts

    text = (
        profile_yaml(prefix, stream_yaml("up", "p0", rx_port="p1"))
        + f"""
hosts:
  p0: {{netns: {prefix}-h0, ipv4: {hosts.H0_IP}}}
  p1: {{netns: {prefix}-h1, ipv4: {hosts.H1_IP}}}
transport:
  - {{name: bulk, port: p0, rx_port: p1, protocol: tcp, cc: cubic}}
  - {{name: back, port: p1, rx_port: p0, protocol: udp, rate: 2M, message: 1000}}
"""
    )
    return compile_profile(load_profile_text(text))


@dataclass
class FlowRun:
    snaps: dict[str, StatsSnapshot]
    rates: tuple[float, ...]
    refusal: str  # what set_rate of the TCP flow raised
    events: list[EngineEvent]
    desc: EngineDescription


async def flow_scenario(eng: EngineAPI, wait: Callable[[float], Awaitable[None]]) -> FlowRun:
    """Start, the UDP flow's and its port's rate, a TCP flow's rate (refused), stop,
    clear, restart, stop; a snapshot after each step."""
    from tgen_tui.engine.api import RateError

    snaps: dict[str, StatsSnapshot] = {}

    async def step(name: str, seconds: float) -> None:
        await wait(seconds)
        snap = eng.latest_snapshot()
        assert snap is not None
        snaps[name] = snap

    cursor, _ = eng.events_since(0)
    await eng.start()
    await step("started", 0.8)
    rates = tuple([await eng.set_rate(t, r) for t, r in FLOW_RATES])
    with pytest.raises(RateError) as refused:
        await eng.set_rate("bulk", "1M")
    desc = eng.describe()
    await step("rated", 0.6)
    await eng.stop()
    await step("stopped", 0.3)
    await eng.clear()
    await step("cleared", 0.3)
    await eng.start()
    await step("restarted", 0.8)
    await step("later", 0.5)
    await eng.stop()
    await step("final", 0.3)
    _, events = eng.events_since(cursor)
    return FlowRun(snaps, rates, str(refused.value), events, desc)


def run_fake_flows(compiled: CompiledProfile) -> FlowRun:
    return on_fake(compiled, flow_scenario)


def run_real_flows(compiled: CompiledProfile) -> FlowRun:
    return on_real(compiled, flow_scenario)


def check_flow_run(run: FlowRun) -> None:
    """What the flow scenario must show on any engine."""
    assert run.rates == pytest.approx(FLOW_EXPECTED, rel=1e-12)
    assert "congestion control" in run.refusal
    assert run.desc.flow("back").rate_bps == FLOW_EXPECTED[1]
    for name in FLOW_STEPS:
        snap = run.snaps[name]
        running = name in RUNNING_STEPS
        assert {p.state for p in snap.ports} == {"running" if running else "stopped"}, name
        assert [f.state for f in snap.flows] == ["sending" if running else "stopped"] * 2, name
    assert run.snaps["rated"].flow("back").requested_bps == FLOW_EXPECTED[1]
    for f in run.snaps["cleared"].flows:
        assert (f.tx_bytes, f.rx_bytes, f.goodput_run_bps, f.active_s) == (0, 0, None, 0.0), f
    before, after = run.snaps["restarted"], run.snaps["later"]
    for f in before.flows:
        g = after.flow(f.name)
        assert 0 < f.rx_bytes < g.rx_bytes and (g.goodput_run_bps or 0) > 0, f.name
    bulk = after.flow("bulk")
    assert bulk.rtt_ms and bulk.min_rtt_ms and bulk.cwnd and bulk.retransmits is not None
    assert after.fairness_jain is not None
    final = run.snaps["final"]
    assert final.flow("bulk").connections == 1  # counted since the clear: the restart's
    back = final.flow("back")
    assert back.lost == 0 and back.rx_packets == back.tx_packets > 0, back
    assert all(f.goodput_bps == 0 for f in final.flows)  # stopped: nothing read since


def test_the_fake_runs_the_flow_scenario() -> None:
    run = run_fake_flows(_flow_profile("tgen"))
    check_flow_run(run)
    assert all(f.goodput_bps > 0 for f in run.snaps["later"].flows)  # live, on simulated time
    again = run_fake_flows(_flow_profile("tgen"))
    assert again.snaps == run.snaps
    kinds = [(e["event"], e.get("flow"), e.get("new_bps")) for e in event_keys(run.events)]
    assert ("flow_rate", "back", 1e6) in kinds and ("flow_rate", "back", 1.5e6) in kinds


@pytest.fixture(scope="module")
def flow_lab(make_lab):
    with make_lab("nat", "c", transport_hosts=True) as prefix:
        yield prefix


def test_fake_and_real_engine_agree_on_flows(flow_lab) -> None:
    compiled = _flow_profile(flow_lab)
    fake, real = run_fake_flows(compiled), run_real_flows(compiled)
    check_flow_run(real)
    assert fake.rates == real.rates and fake.refusal == real.refusal
    assert event_keys(fake.events) == event_keys(real.events)
    for name in FLOW_STEPS:
        assert shape(fake.snaps[name]) == shape(real.snaps[name]), name
        f, r = fake.snaps[name], real.snaps[name]
        assert [x.state for x in f.flows] == [x.state for x in r.flows], name
        assert [x.requested_bps for x in f.flows] == [x.requested_bps for x in r.flows], name
    assert fake.desc.flows == real.desc.flows
    assert [(w.id, w.core, w.ports, w.streams, w.kind) for w in fake.desc.workers] == [
        (w.id, w.core, w.ports, w.streams, w.kind) for w in real.desc.workers
    ]
    check_flow_run(fake)
