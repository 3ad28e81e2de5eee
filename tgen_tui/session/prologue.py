"""The steps of a run before and after its engine: checks of the options against the
profile, preflight, the DUT flush, and the TCP connections of a ``tcp.handshake`` stream.

Each is a small function the run owner (:mod:`tgen_tui.session.owner`) calls in order;
none renders anything (the front end is told through the owner's callbacks).
"""

from __future__ import annotations

from typing import Any

from tgen_tui.diagnostics import BadInput
from tgen_tui.dut.channel import DutChannel
from tgen_tui.engine.dut_events import DutEvent
from tgen_tui.engine.options import EngineOptions
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.session import tcprun


def tcp_plan_of(profile: Any) -> tcprun.TcpPlan | None:
    """The profile's ``tcp.handshake`` plan, with the profile the run itself sends (its
    TCP streams carrying data inside the connections' windows) as ``data_profile``."""
    plan = tcprun.tcp_plan(profile)
    if plan is not None:
        plan.data_profile = tcprun.data_profile(plan)
    return plan


def check_ports(compiled: CompiledProfile, ports: tuple[str, ...] | None) -> None:
    """BadInput naming the ports of ``--ports`` the profile does not have."""
    unknown = [p for p in ports or () if p not in compiled.ports]
    if unknown:
        raise BadInput(
            f"--ports: unknown port(s) {', '.join(unknown)} "
            f"(profile has: {', '.join(compiled.ports)})"
        )


def check_dut_events(events: tuple[DutEvent, ...], duration_s: float | None) -> None:
    """BadInput for a DUT event at or past the run's end (it would never run)."""
    for ev in events:
        if duration_s is not None and ev.at_s >= duration_s:
            raise BadInput(
                f"--dut-event '{ev.at_s:g}s: {ev.command}': at {ev.at_s:g} s, but the run "
                f"sends for {duration_s:g} s"
            )


async def preflight(compiled: CompiledProfile, options: EngineOptions) -> list:
    """tgen preflight's checks (links, MTU, gateways, the DUT channel, a burst per stream)."""
    from tgen_tui.engine.preflight import preflight as checks_of

    return await checks_of(compiled, options, True)


def raise_failed(checks: list) -> None:
    """PreflightFailed (exit 1, one line per failed check) when a check failed."""
    from tgen_tui.engine.cli_options import PreflightFailed

    bad = [c for c in checks if not c.ok]
    if bad:
        raise PreflightFailed(bad)


def flush_dut(dut: tuple[str | None, str | None]) -> None:
    """Empty the DUT's conntrack table, so the run's conntrack rise counts only its flows."""
    from tgen_tui.dut.conntrack import flush

    channel = DutChannel.of(*dut)
    assert channel is not None  # the owner refused a flush without a DUT
    flush(channel, timeout=15)


async def handshake(
    plan: tcprun.TcpPlan, options: EngineOptions, dut: tuple[str | None, str | None]
) -> dict:
    """Open the connections (SYN, SYN-ACK, ACK batches); the plan's report so far."""
    channel = DutChannel.of(*dut)
    await tcprun.handshake(plan, options, channel)
    return plan.report


async def teardown(
    plan: tcprun.TcpPlan, options: EngineOptions, dut: tuple[str | None, str | None]
) -> None:
    """Close them (FIN or RST batches) and read the DUT's TCP states again."""
    await tcprun.teardown(plan, options, DutChannel.of(*dut))


__all__ = [
    "check_dut_events",
    "check_ports",
    "flush_dut",
    "handshake",
    "preflight",
    "raise_failed",
    "tcp_plan_of",
    "teardown",
]
