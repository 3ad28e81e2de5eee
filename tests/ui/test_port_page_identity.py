"""The port page's head (issue 24 with issue 19): the port's own MAC from the engine, its
gateways with their resolved MACs; the streams' source MAC only when the engine gives none."""

from __future__ import annotations

from types import SimpleNamespace

from tgen_tui.engine.snapshot import PortStats
from tgen_tui.ui.screens.port import info_text

DUT = "02:74:67:00:00:fe"


def test_the_page_names_the_ports_mac_and_each_gateway_with_its_mac() -> None:
    p = PortStats(
        "p0", "p0", "t", "idle", mac="02:74:67:00:00:01", gateway="198.18.0.1",
        gateway_mac=DUT, gateway6="2001:2::1", gateway6_mac=None,
    )  # fmt: skip
    lines = info_text(p, 0, None).plain.splitlines()
    assert lines[2:] == [
        " MAC 02:74:67:00:00:01 (interface)",
        f" gateway  198.18.0.1   MAC {DUT}",
        " gateway6 2001:2::1   MAC not resolved",
    ]


def test_without_a_mac_from_the_engine_the_streams_source_mac_is_named() -> None:
    tmpl = bytes.fromhex("02746700fe00027467000001") + bytes(50)
    compiled = SimpleNamespace(streams=[SimpleNamespace(port="p0", template=tmpl)])
    lines = info_text(PortStats("p0", "p0", None, "idle"), 0, compiled).plain.splitlines()
    assert lines[2] == " MAC 02:74:67:00:00:01 (its streams' eth.src)   gateway —   gateway MAC —"
