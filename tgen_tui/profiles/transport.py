"""Transport streams: kernel TCP/UDP flows between the tester sides, through the DUT.

A profile's ``hosts:`` gives each tester port an address for its kernel sockets (the lab
makes one namespace per side: ``tgen lab status`` lists them as transport hosts), and
``transport:`` lists the flows::

    hosts:
      p0: {netns: tgen-h0, ipv4: 198.18.100.2}
      p1: {netns: tgen-h1, ipv4: 198.19.100.2}
    transport:
      - {name: bulk, port: p0, rx_port: p1, protocol: tcp, cc: cubic, parallel: 2}
      - {name: bg, port: p0, rx_port: p1, protocol: udp, rate: 2M, schedule: {on: 2s, off: 3s}}
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from tgen_tui.profiles.appflow import App, Clients, Load, check_app
from tgen_tui.profiles.base import NetnsName, Schedule, Strict
from tgen_tui.profiles.units import parse_bitrate

BitRate = Annotated[float, BeforeValidator(parse_bitrate), Field(ge=1.0)]

_CC = re.compile(r"^[a-z0-9_]{1,15}$")
FIRST_PORT = 5201
MAX_MESSAGE = 1 << 20


class TransportHost(Strict):
    """Where a tester port's kernel sockets live, and their address."""

    netns: NetnsName | None = Field(
        None, description="Namespace of the sockets (the lab's: tgen-h0)"
    )
    ipv4: str = Field(description="Address to bind, e.g. 198.18.100.2")

    @field_validator("ipv4")
    @classmethod
    def _addr(cls, v: str) -> str:
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 address") from None
        return v


class TransportStream(Strict):
    """Kernel socket flows from ``port``'s host to ``rx_port``'s host."""

    name: str = Field(min_length=1, max_length=64)
    port: str = Field(description="Sending side (a key of ports: and hosts:)")
    rx_port: str = Field(description="Receiving side (a key of ports: and hosts:)")
    enabled: bool = True
    protocol: Literal["tcp", "udp"] = "tcp"
    cc: str = Field(
        "cubic", description="TCP congestion control (reno, cubic, bbr: what the kernel has)"
    )
    parallel: int = Field(1, ge=1, le=64, description="Parallel flows (each its own socket)")
    message: int | None = Field(
        None,
        ge=16,
        le=MAX_MESSAGE,
        description="Bytes per send call: TCP write size (default 128 KiB), UDP payload "
        "(default 1400)",
    )
    rate: BitRate | None = Field(None, description="UDP payload rate per flow, e.g. 2M")
    schedule: Schedule = Field(default_factory=Schedule)
    dst_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="First receiving port (default: 5201 + flow number; app http 80, dns 53)",
    )
    app: App | None = Field(
        None, description="Request/response connections instead of a bulk flow (see appflow)"
    )
    load: Load | None = Field(None, description="An app flow's load target")
    clients: Clients | None = Field(None, description="An app flow's client addresses")

    @model_validator(mode="after")
    def _rules(self):
        if not _CC.match(self.cc):
            raise ValueError(f"cc: {self.cc!r} is not a congestion control name")
        if self.protocol == "tcp":
            offered = kernel_congestion_controls()
            if offered and self.cc not in offered and not _cc_module_exists(self.cc):
                raise ValueError(
                    f"cc: {self.cc!r} is not offered by this kernel (it has: "
                    f"{', '.join(offered)}; no tcp_{self.cc} module to load)"
                )
        if (
            self.app is None
            and self.dst_port is not None
            and self.dst_port + self.parallel - 1 > 65535
        ):
            raise ValueError(
                f"dst_port: {self.parallel} parallel flows from {self.dst_port} run past 65535 "
                f"(flow k uses dst_port + k): give dst_port ≤ {65536 - self.parallel}"
            )
        for problem in check_app(self):
            raise ValueError(problem)
        if self.app is not None and self.rate is not None:
            raise ValueError("rate: an app flow's load: sets its pace")
        if self.protocol == "udp" and self.rate is None and self.app is None:
            raise ValueError("rate: a UDP transport stream needs a rate, e.g. rate: 2M")
        if self.protocol == "tcp" and self.rate is not None:
            raise ValueError("rate: TCP sends as fast as its congestion control allows")
        return self

    @property
    def message_bytes(self) -> int:
        return self.message or (131072 if self.protocol == "tcp" else 1400)


CC_AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"


@functools.lru_cache(maxsize=1)
def kernel_congestion_controls() -> tuple[str, ...]:
    """The congestion controls this kernel has loaded (empty where it cannot be read)."""
    try:
        with open(CC_AVAILABLE, encoding="ascii") as f:
            return tuple(f.read().split())
    except OSError:
        return ()


@functools.lru_cache(maxsize=16)
def _cc_module_exists(name: str) -> bool:
    """True when the kernel could load ``tcp_NAME`` on demand (a module of this release)."""
    base = Path("/lib/modules") / os.uname().release / "kernel" / "net" / "ipv4"
    try:
        return any(base.glob(f"tcp_{name}.ko*"))
    except OSError:
        return False


def check_transport(profile) -> list[str]:
    """Cross-field problems of ``hosts:``/``transport:`` as "path: message" lines."""
    problems: list[str] = []
    for h in profile.hosts:
        if h not in profile.ports:
            problems.append(f"hosts.{h}: unknown port {h!r} (ports: {', '.join(profile.ports)})")
    names = {s.name for s in profile.streams}
    for i, t in enumerate(profile.transport):
        where = f"transport[{i}]"
        if t.name in names:
            problems.append(f"{where}.name: duplicate stream name {t.name!r}")
        names.add(t.name)
        for key in ("port", "rx_port"):
            p = getattr(t, key)
            if p not in profile.ports:
                problems.append(
                    f"{where}.{key}: unknown port {p!r} (ports: {', '.join(profile.ports)})"
                )
            elif p not in profile.hosts:
                problems.append(f"{where}.{key}: port {p!r} has no address: add it under hosts:")
        if t.port == t.rx_port:
            problems.append(f"{where}.rx_port: must differ from port")
    return problems
