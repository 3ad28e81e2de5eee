"""The console's fake engine: deterministic, and blind to this machine."""

from __future__ import annotations

import pytest

from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile
from tgen_tui.ui.fake import FakeEngine

from .conftest import PROFILES


def test_the_fake_reads_no_interface_of_this_machine(monkeypatch) -> None:
    """Setup reads a port's interface MAC when ARP/ND gave none; a lab that is up would
    then change what the fake shows (the port page's MAC, the snapshot SVGs)."""
    from tgen_tui.engine import portsetup

    def read(netns, interface):  # what the real Setup would call
        raise AssertionError(f"the fake read {interface} in {netns}")

    monkeypatch.setattr(portsetup, "interface_mac", read)
    eng = FakeEngine(compile_profile(load_profile(PROFILES / "lab.yaml")), clock=lambda: 1.0)
    # the simulated interfaces' MACs: the source MACs of their streams
    assert [p.mac for p in eng.latest_snapshot().ports] == [
        "02:74:67:00:00:01",
        "02:74:67:00:01:01",
    ]


@pytest.mark.parametrize("name", ["lab.yaml", "tcp-under-load.yaml", "cc-regression.yaml"])
def test_the_fake_describes_every_profile_the_same_way_twice(name: str) -> None:
    compiled = compile_profile(load_profile(PROFILES / name))
    a = FakeEngine(compiled, clock=lambda: 5.0, wall=lambda: 0.0)
    b = FakeEngine(compiled, clock=lambda: 5.0, wall=lambda: 0.0)
    assert a.describe() == b.describe()
    assert a.latest_snapshot() == b.latest_snapshot()
