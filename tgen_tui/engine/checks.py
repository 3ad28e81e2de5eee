"""One check of a preflight (:mod:`tgen_tui.engine.preflight`): what was checked, where,
and whether it passed, with the reason in words."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    scope: str  # "port p0", "dut", "stream up", "flow bulk"
    check: str  # link, mtu, gateway, gateway6, channel, conntrack, burst, translation, tcp, udp
    ok: bool
    detail: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


__all__ = ["Check"]
