"""Socket flows as plain data: what a flow worker needs to open and drive one kernel TCP
or UDP flow between two transport hosts (the profile's ``transport:`` entries).

A ``transport:`` entry with ``parallel: N`` becomes N flows, named ``NAME`` (N = 1) or
``NAME.1`` … ``NAME.N``, numbered in profile order (:func:`tgen_tui.packets.compile.compile_flows`). A flow belongs to its sending port
(``port``): it starts and stops with it. Its :class:`~tgen_tui.packets.program.Schedule`
is the entry's start/stop/on-off, with ``pps`` the UDP datagram rate (0 for TCP, which
sends as fast as its congestion control allows), so the flow worker paces and switches
flows with :mod:`tgen_tui.packets.schedule`, like a frame stream's pacer.

Import-light (the standard library): the flow worker reads these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from tgen_tui.packets.appprogram import AppProgram, app_from_dict
from tgen_tui.packets.program import Schedule, schedule_from_dict

FIRST_PORT = 5201  # the receiving port of flow 0 when an entry gives no dst_port
TCP_MESSAGE = 131072  # bytes per send call of a TCP flow (its default write size)
UDP_MESSAGE = 1400  # bytes of a UDP flow's datagram payload by default


@dataclass(frozen=True)
class FlowProgram:
    """One kernel socket flow (see the module docstring)."""

    id: int  # flow number in the profile (0, 1, ...)
    name: str
    stream: str  # the transport: entry it comes from
    port: str  # sending side: the flow starts and stops with this port
    rx_port: str
    protocol: str  # tcp | udp
    cc: str | None  # TCP congestion control (None for UDP)
    dst_port: int  # the receiving socket's port
    message: int  # bytes per send call: TCP write size, UDP payload
    rate_bps: float | None  # UDP payload bit/s (None: TCP)
    src_netns: str | None
    dst_netns: str | None
    src_ip: str
    dst_ip: str
    schedule: Schedule  # start/stop/on-off; pps = UDP datagrams/s (0 for TCP)
    app: AppProgram | None = None  # request/response connections (None: a bulk flow)

    @property
    def is_app(self) -> bool:
        return self.app is not None

    @property
    def is_udp(self) -> bool:
        return self.protocol == "udp"

    def with_rate(self, bps: float) -> FlowProgram:
        """The flow at another UDP payload rate (its datagram rate follows)."""
        return replace(
            self,
            rate_bps=float(bps),
            schedule=replace(self.schedule, pps=udp_pps(bps, self.message)),
        )


def udp_pps(bps: float | None, message: int) -> float:
    """Datagrams per second that carry ``bps`` of payload in ``message``-byte datagrams."""
    return float(bps) / (8.0 * message) if bps else 0.0


def flow_to_dict(f: FlowProgram) -> dict:
    """Plain data for the flow worker's configure command."""
    return asdict(f)


def flow_from_dict(d: dict) -> FlowProgram:
    sc = schedule_from_dict(d["schedule"])
    return FlowProgram(**{**d, "schedule": sc, "app": app_from_dict(d.get("app"))})


__all__ = [
    "FIRST_PORT",
    "FlowProgram",
    "flow_from_dict",
    "flow_to_dict",
    "udp_pps",
]
