"""Flows in blocks (``blocks: N``, issue 32): each flow sends N frames in a row, then the
next flow's; the signature's sequence and RTP's own fields still count frame by frame;
one lane only. Frames decoded by scapy and by tgen's own decoder."""

from __future__ import annotations

import struct

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.layers.rtp import RTP

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.options import EngineOptions
from tgen_tui.engine.setup import Setup
from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.flowsplit import flow_period
from tgen_tui.packets.program import SIG_LEN, SIG_MAGIC
from tgen_tui.profiles.loader import load_profile_text

PROFILE = """
ports: {p0: {interface: veth0}}
streams:
  - name: a
    port: p0
    blocks: BLOCKS
    ipv4: {src: {min: 198.18.0.1, max: 198.18.0.5, mode: unique}, dst: 198.19.0.2}
    udp: {src_port: {min: 1000, max: 1003, mode: inc}, dst_port: {min: 1, max: 9, mode: random}}
"""


def _prog(blocks: int, text: str = PROFILE):
    return compile_profile(
        load_profile_text(text.replace("BLOCKS", str(blocks)), "b.yaml")
    ).streams[0]


def _tuples(prog, start: int, n: int) -> list[tuple]:
    out = []
    for raw in BatchBuilder(prog).frames(start, n):
        p = Ether(raw)
        out.append((p[IP].src, p[UDP].sport, p[UDP].dport))
    return out


def test_each_flow_sends_its_block_then_the_next_flows():
    plain, held = _prog(1), _prog(3)
    flows = _tuples(plain, 0, 12)
    frames = _tuples(held, 0, 36)
    assert frames == [t for t in flows for _ in range(3)]  # the same flows, 3 frames each
    assert len(set(flows)) == 12
    # a batch that starts inside a block: the same frames as one long batch
    assert _tuples(held, 7, 10) == frames[7:17]
    assert flow_period(held) is None  # a random field: no period, with or without blocks


def test_the_signature_still_counts_every_frame():
    held = _prog(4)
    sigs = [struct.unpack("<HHII", raw[-SIG_LEN:]) for raw in BatchBuilder(held).frames(0, 12)]
    assert [s[0] for s in sigs] == [SIG_MAGIC] * 12 and [s[2] for s in sigs] == list(range(12))


def test_the_flow_period_grows_by_the_block():
    text = PROFILE.replace(", dst_port: {min: 1, max: 9, mode: random}", "").replace(
        "mode: unique", "mode: inc"
    )
    assert flow_period(_prog(1, text)) == 20 and flow_period(_prog(1000, text)) == 20_000


def test_rtp_fields_are_the_frames_own():
    text = """
ports: {p0: {interface: veth0}}
streams:
  - {name: v, port: p0, preset: g711, blocks: 5, udp: {src_port: {min: 5004, max: 5005, mode: inc}, dst_port: 5004}}
"""
    frames = BatchBuilder(_prog(1, text)).frames(0, 10)
    assert [RTP(bytes(Ether(f)[UDP].payload)).sequence for f in frames] == list(range(10))
    assert [Ether(f)[UDP].sport for f in frames] == [5004] * 5 + [5005] * 5


def test_a_blocked_stream_keeps_one_lane():
    text = PROFILE.replace("BLOCKS", "3").replace(
        "{interface: veth0}", "{interface: veth0, lanes: 2}"
    )
    with pytest.raises(BadInput) as e:
        compile_profile(load_profile_text(text, "b.yaml"))
    (p,) = e.value.problems
    assert p.field == "streams[0].blocks" and "port p0 has lanes: 2" in p.message
    s = Setup.build(compile_profile(load_profile_text(PROFILE.replace("BLOCKS", "3"), "b.yaml")),
                    EngineOptions(cores=[0, 1], lanes=2))  # fmt: skip
    assert s.ports["p0"].lanes == 1 and any("sends flows in blocks" in w for w in s.warnings)
