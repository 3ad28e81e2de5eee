"""Profile rules of issue 36: values that validated but could not work are refused with
their position, and traps that do work but not as they seem are positioned warnings."""

from __future__ import annotations

import pytest

from tgen_tui.diagnostics import BadInput
from tgen_tui.profiles import transport
from tgen_tui.profiles.loader import load_profile_checked, load_profile_text

BASE = """\
name: checks
ports:
  p0: {interface: p0, netns: tgen-nofuzz, speed: 10G}
  p1: {interface: p1, netns: tgen-nofuzz, speed: 10G}
streams:
  - name: up
    port: p0
    rx_port: p1
    ipv4: {src: 198.18.0.2, dst: 198.19.0.2}
    udp:
      src_port: {min: 10000, max: 10399, mode: inc}
      dst_port: 7
    size: 70
    rate: {pps: 1000}
"""
TRANSPORT = """\
name: flows
ports:
  p0: {interface: p0, speed: 10G}
  p1: {interface: p1, speed: 10G}
hosts:
  p0: {ipv4: 198.18.100.2}
  p1: {ipv4: 198.19.100.2}
streams: []
transport:
  - {name: bulk, port: p0, rx_port: p1, protocol: tcp, cc: cubic}
"""
P0 = "  p0: {interface: p0, netns: tgen-nofuzz, speed: 10G}"


@pytest.mark.parametrize(
    ("base", "old", "new", "where", "words"),
    [
        (BASE, "mode: inc}", "mode: inc, step: 99999999999999999999999}", "11:53",
         "streams[0].udp.src_port.step: 99999999999999999999999 is larger than the range"),
        (BASE, "size: 70", "size: {min: 70, max: 80, mode: inc, step: 1000}", "13:41",
         "streams[0].size.step: 1000 is larger than the range 70..80"),
        (BASE, "interface: p0,", "interface: ЖЖЖЖЖЖЖЖЖЖЖЖЖЖ,", "3:8",
         "is 28 bytes; Linux interface names are at most 15 bytes"),
        (BASE, "interface: p0,", "interface: 'a/b',", "3:8", "may not contain '/'"),
        (BASE, "interface: p0,", "interface: 'p 0',", "3:8", "may not contain ' '"),
        (BASE, "p0, netns: tgen-nofuzz,", "p0, netns: a/b,", "3:23",
         "is not a network namespace name"),
        (BASE, P0, P0[:-1] + ", ipv4: 198.18.0.2/24, gateway: 198.18.0.0}", "3:76",
         "gateway: 198.18.0.0 is the network address of 198.18.0.0/24"),
        (BASE, P0, P0[:-1] + ", ipv4: 198.18.0.2/24, gateway: 198.18.0.255}", "3:76",
         "gateway: 198.18.0.255 is the broadcast address"),
        (BASE, P0, P0[:-1] + ", ipv4: 198.18.0.0/24, gateway: 198.18.0.1}", "3:55",
         "ipv4: 198.18.0.0/24 is the network address of 198.18.0.0/24: give the port a host"),
        (BASE, "size: 70", "size: {imix: nonsense}", "13:12",
         "streams[0].size.imix: 'nonsense' is not an IMIX preset"),
        (TRANSPORT, "cc: cubic", "cc: cubic, dst_port: 65535, parallel: 8", "10:67",
         "dst_port: 8 parallel flows from 65535 run past 65535"),
    ],
)  # fmt: skip
def test_refused_with_its_position(base, old, new, where, words):
    assert base.count(old) == 1
    with pytest.raises(BadInput) as e:
        load_profile_text(base.replace(old, new), "p.yaml")
    lines = e.value.lines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"p.yaml:{where}: ") and words in lines[0], lines[0]


def test_a_congestion_control_the_kernel_does_not_offer(monkeypatch):
    monkeypatch.setattr(transport, "kernel_congestion_controls", lambda: ("reno", "cubic"))
    with pytest.raises(BadInput) as e:
        load_profile_text(TRANSPORT.replace("cc: cubic", "cc: warpdrive"), "t.yaml")
    (line,) = e.value.lines()
    assert line.startswith("t.yaml:10:56: transport[0].cc: 'warpdrive' is not offered by this")
    assert "reno, cubic" in line
    monkeypatch.setattr(transport, "kernel_congestion_controls", lambda: ())  # unreadable
    assert load_profile_text(TRANSPORT.replace("cc: cubic", "cc: warpdrive"), "t.yaml")


def _warnings(tmp_path, text: str) -> list[str]:
    path = tmp_path / "w.yaml"
    path.write_text(text, encoding="utf-8")
    _, found = load_profile_checked(path)
    return [w.render().replace(f"{path}:", "") for w in found]


def test_a_step_that_collapses_the_range_counts_the_flows_it_sends(tmp_path):
    text = BASE.replace("max: 10399, mode: inc}", "max: 10255, mode: inc, step: 256}")
    prof = load_profile_text(text)
    assert prof.streams[0].distinct_flows() == 1  # 256 flows written, 1 sent
    (w,) = _warnings(tmp_path, text)
    assert w.startswith("11:53: streams[0].udp.src_port.step: warning: step 256 over 256")
    assert "sends 1 flow," in w
    half = BASE.replace("mode: inc}", "mode: inc, step: 4}")  # gcd(4, 400) = 4
    assert load_profile_text(half).streams[0].distinct_flows() == 100
    assert (
        load_profile_text(BASE.replace("mode: inc}", "mode: inc, step: 3}"))
        .streams[0]
        .distinct_flows()
        == 400
    )
    assert _warnings(tmp_path, BASE) == []


def test_two_inc_fields_count_the_lcm_of_their_periods():
    text = BASE.replace("dst_port: 7", "dst_port: {min: 1, max: 10, mode: inc}")
    assert load_profile_text(text).streams[0].distinct_flows() == 400  # lcm(400, 10)


def test_a_handshake_without_a_reply_stream_is_a_warning(tmp_path):
    text = BASE.replace("    udp:\n", "    tcp:\n      handshake: true\n")
    (w,) = _warnings(tmp_path, text)
    assert w.startswith("11:7: streams[0].tcp.handshake: warning: no reply stream"), w
    reply = (
        "  - {name: back, port: p1, rx_port: p0, learn: true, size: 70,"
        " ipv4: {src: 198.19.0.2, dst: 198.19.0.1}, tcp: {src_port: 7, dst_port: 10000}}\n"
    )
    assert _warnings(tmp_path, text + reply) == []


def test_a_learner_that_no_stream_reaches_is_a_warning(tmp_path):
    reply = (
        "  - {name: back, port: p0, rx_port: p1, learn: true, size: 70,"
        " ipv4: {src: 198.19.0.2, dst: 198.19.0.1}, udp: {src_port: 7, dst_port: 10000}}\n"
    )
    (w,) = _warnings(tmp_path, BASE + reply)
    assert w.startswith("15:41: streams[1].learn: warning: no stream arrives at port p0"), w
