"""D-ITG's application presets (``preset: dns|quake3``): the frames scapy decodes, the
payload sizes and the gaps of D-ITG's models (ITGSend/traffic.cpp, D-ITG 2.8.1), drawn
over many frames and compared with the models' own figures."""

from __future__ import annotations

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from tgen_tui.engine.laws import law_cdf
from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.schedule import DueTimes
from tgen_tui.profiles.loader import load_profile_text

PROFILE = """
ports: {p0: {interface: veth0}}
streams:
  - {name: a, port: p0, preset: PRESET, ipv4: {src: 198.18.0.2, dst: 198.19.0.2}}
"""
HDR = 14 + 20 + 8  # Ethernet, IPv4, UDP in front of D-ITG's payload (the frame has no FCS)


def _prog(preset: str):
    return compile_profile(load_profile_text(PROFILE.replace("PRESET", preset), "a.yaml")).streams[
        0
    ]


def _payloads(prog, n: int) -> np.ndarray:
    frames = BatchBuilder(prog).frames(0, n)
    for raw in frames[:: max(1, n // 50)]:  # scapy decodes a sample: the headers are right
        pkt = Ether(raw)
        assert pkt[IP].src == "198.18.0.2" and len(bytes(pkt[UDP].payload)) == len(raw) - HDR
    return np.array([len(f) - HDR for f in frames])


def test_dns_queries_to_port_53_with_uniform_payloads():
    prog = _prog("dns")
    assert prog.schedule.pps == pytest.approx(0.56) and prog.schedule.idt == "constant"
    pkt = Ether(BatchBuilder(prog).frames(0, 1)[0])
    assert pkt[UDP].dport == 53
    sizes = _payloads(prog, 20_000)
    assert sizes.min() >= 100 and sizes.max() <= 320
    assert abs(sizes.mean() - 210) < 3  # uniform on 100..320
    counts = np.bincount(sizes - 100, minlength=221)
    assert counts.min() > 0.5 * counts.mean()  # every size drawn, none favoured


def test_quake3_payloads_are_normal_64_2_sd_3_2():
    prog = _prog("quake3")
    assert Ether(BatchBuilder(prog).frames(0, 1)[0])[UDP].dport == 27960
    sizes = _payloads(prog, 16_384)
    assert abs(sizes.mean() - 64.15) < 0.3 and abs(sizes.std() - 3.2) < 0.3


def test_quake3_gaps_follow_the_ditg_mixture():
    prog = _prog("quake3")
    s = prog.schedule
    assert s.idt == "quake3" and s.pps == pytest.approx(1000 / 6.874)
    due = DueTimes(s).due(0, 200_001)
    gaps = np.diff(due) * 1e3  # ms
    assert abs(gaps.mean() - 6.874) < 0.01 * 6.874  # D-ITG's mean gap (the mean rate)
    const = np.abs(gaps - 10.75) < 0.25  # the constant part, within the mean-held scale
    assert abs(const.mean() - 0.4) < 0.01
    # the rest is exponential of mean 4.29 ms (less the few that fall in the constant's band)
    x = np.sort(gaps[~const])
    cdf = 1.0 - np.exp(-x / 4.29)
    n = len(x)
    ks = np.max(np.maximum(np.arange(1, n + 1) / n - cdf, cdf - np.arange(n) / n))
    assert ks < 0.02
    # the law's CDF (the spacing figure's) is the mixture: below the constant, 0.6 x exp
    assert law_cdf("quake3", (), 6.874, np.array([4.29]))[0] == pytest.approx(
        0.6 * (1 - np.exp(-1))
    )
    assert law_cdf("quake3", (), 6.874, np.array([10.75]))[0] == pytest.approx(
        0.6 * (1 - np.exp(-10.75 / 4.29)) + 0.4
    )
    assert np.array_equal(DueTimes(s).due(0, 1000), due[:1000])  # the seed repeats
