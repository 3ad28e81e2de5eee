"""The Main screen's gateway row (issue 19): the resolved MACs of a port's gateways."""

from __future__ import annotations

from tgen_tui.engine.snapshot import PortStats
from tgen_tui.ui.screens.main import _gateway

DUT = "02:74:67:00:00:fe"


def test_the_console_shows_the_resolved_gateway_macs():
    p = PortStats("p0", "p0", None, "running", gateway_mac=DUT, gateway6_mac=DUT)
    assert _gateway(p) == "…" + DUT[-8:]  # a 17-character MAC does not fit the column
    p = PortStats("p0", "p0", None, "running", gateway_mac=DUT, gateway6_mac="02:74:67:00:00:fd")
    assert _gateway(p) == f"…{DUT[-5:]}/…00:fd"
    assert len(_gateway(p)) <= 13
    assert _gateway(PortStats("p1", "p1", None, "idle")) == "-"
