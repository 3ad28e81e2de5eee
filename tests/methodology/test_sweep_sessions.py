"""tgen sweep's session ladder: the points, and the Initiator narrowed to S tuples."""

from __future__ import annotations

import pytest

from tgen_tui.commands.methodology_cmds import _count
from tgen_tui.diagnostics import BadInput
from tgen_tui.methodology.procedures.sweep.sessions import parse_sessions, with_sessions
from tgen_tui.profiles.loader import load_profile_text

PROFILE = """
name: s
ports:
  p0: {interface: p0}
  p1: {interface: p1}
streams:
  - name: initiator
    port: p0
    rx_port: p1
    udp:
      src_port: {min: 10000, max: 10399, mode: unique}
      dst_port: {min: 80, max: 179, mode: unique}
"""


def test_sessions_are_spaced_geometrically_or_listed():
    assert parse_sessions("sessions=64512..4M", 3, _count) == [64512, 507984, 4000000]
    assert parse_sessions("sessions=1k..16k", 3, _count) == [1000, 4000, 16000]
    assert parse_sessions("sessions=4k,1k,2k", 3, _count) == [1000, 2000, 4000]
    for bad in ("flows=1..2", "sessions=", "sessions=5..5", "sessions=0,1"):
        with pytest.raises(BadInput):
            parse_sessions(bad, 3, _count)


def test_the_initiator_is_narrowed_to_s_unique_tuples():
    prof = load_profile_text(PROFILE, "s.yaml")
    p, s = with_sessions(prof, 4000)
    assert s == 4000 and p.streams[0].distinct_flows() == 4000
    p, s = with_sessions(prof, 4050)  # rounded up to whole source ports x 100 destinations
    assert s == 4100 and p.streams[0].udp.src_port.max == 10040
    with pytest.raises(BadInput):
        with_sessions(prof, 10_000_000)  # more source ports than there are from 10000
