"""What a port's pacing becomes (tgen_tui.calibrate.pacing) and what a profile may ask."""

from __future__ import annotations

import pytest

from tgen_tui.calibrate.pacing import resolve_pacing
from tgen_tui.diagnostics import BadInput as ProfileError
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile_text

LIMITS = (20_000.0, 10_000.0, "default")


def _profile(rate: int = 10000, extra: str = "", port: str = "") -> str:
    return f"""
name: t
ports:
  p0: {{interface: p0{port}}}
  p1: {{interface: p1}}
streams:
  - name: up
    port: p0
    rx_port: p1
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp: {{src_port: 1000, dst_port: 7}}
    rate: {{pps: {rate}}}
{extra}"""


def _progs(text: str):
    return list(compile_profile(load_profile_text(text, "t.yaml")).streams)


def test_auto_spaces_a_constant_rate_with_the_qdisc_up_to_the_ceiling():
    c = resolve_pacing("auto", _progs(_profile(10000)), "sendmmsg", limits=LIMITS)
    assert c.method == "qdisc" and "10 kpps <= 20 kpps" in c.why


def test_auto_above_the_ceiling_says_so_with_the_figures():
    c = resolve_pacing(None, _progs(_profile(100000)), "sendmmsg", limits=LIMITS)
    assert c.method == "burst"
    assert "100 kpps is above the 20 kpps" in c.why and "tgen calibrate" in c.why


def test_auto_releases_drawn_gaps_with_the_timer():
    progs = _progs(_profile(5000, "    idt: {dist: exponential}\n"))
    assert resolve_pacing("auto", progs, "sendmmsg", limits=LIMITS).method == "timer"
    progs = _progs(_profile(50000, "    idt: {dist: exponential}\n"))
    assert resolve_pacing("auto", progs, "sendmmsg", limits=LIMITS).method == "burst"


def test_auto_never_puts_a_qdisc_where_it_cannot_pace():
    progs = _progs(_profile(5000))
    assert resolve_pacing("auto", progs, "af_xdp", limits=LIMITS).method == "timer"
    assert (
        resolve_pacing("auto", progs, "sendmmsg", has_flows=True, limits=LIMITS).method == "timer"
    )
    assert resolve_pacing("auto", progs, "sendmmsg", lanes=2, limits=LIMITS).method == "burst"


def test_the_profiles_choice_is_kept_and_a_wrong_one_refused():
    progs = _progs(_profile(100000))
    assert resolve_pacing("qdisc", progs, "sendmmsg", limits=LIMITS).method == "qdisc"
    assert resolve_pacing("burst", progs, "sendmmsg", limits=LIMITS).source == "profile"
    with pytest.raises(ValueError, match="af_xdp bypasses"):
        resolve_pacing("qdisc", progs, "af_xdp", limits=LIMITS)
    with pytest.raises(ValueError, match="unknown pacing"):
        resolve_pacing("fast", progs, "sendmmsg", limits=LIMITS)


def test_a_profile_that_asks_the_impossible_gets_one_line():
    for port, words in (
        (", pacing: qdisc, tx_path: af_xdp", "pacing: qdisc needs tx_path sendmmsg or tx_ring"),
        (", pacing: fast", "pacing"),
    ):
        with pytest.raises(ProfileError) as e:
            load_profile_text(_profile(port=port), "t.yaml")
        (line,) = e.value.lines()
        assert line.startswith("t.yaml:4:") and words in line, line
