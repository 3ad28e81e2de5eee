"""Fuzz the profile loader with mutated YAML: it returns a Profile or raises a positioned BadInput.

Mutations start from the example profiles (and one IPv6/QinQ/TCP profile) and delete,
duplicate or replace characters and lines, swap values for random scalars, change
indentation and inject keys. Whatever the input, ``load_profile_text`` must either
return a :class:`Profile` or raise :class:`BadInput` whose problems all carry a line,
a column and a message: never any other exception.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tgen_tui.diagnostics import BadInput
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.profiles.models import Profile

from .tgen_unit_helpers import PROFILES

EXTRA = """\
name: extra
seed: 5
ports:
  p0: {interface: p0, speed: 40G, rate: 50%}
  p1: {interface: p1, netns: ns1, speed: 10G}
dut: {netns: dut, ssh: "ssh root@dut"}
streams:
  - name: v6
    port: p0
    rx_port: p1
    enabled: true
    vlan: [{id: 10, pcp: 3, dei: 1}, {id: 20, tpid: 0x8100}]
    ipv6:
      src: {min: "2001:db8::1", max: "2001:db8::ff", mode: random}
      dst: "2001:db8:1::1"
      hop_limit: 9
      traffic_class: 184
      flow_label: 0x12345
    tcp:
      src_port: {min: 1024, max: 2047, mode: unique}
      dst_port: {min: 80, max: 89, mode: unique}
      flags: SA
      window: 512
    size: {min: 98, max: 300, mode: inc, step: 2}
    rate: 5Mpps
    mode: {type: multi_burst, frames: 10, bursts: 3, gap: 10ms}
    idt: {dist: pareto, shape: 2.5}
    schedule: {start: 1s, stop: 9s, on: 200ms, off: 300ms}
    seed: 77
  - name: icmp
    port: p1
    ipv4: {src: 198.18.0.9, dst: {min: 198.19.0.1, max: 198.19.0.9, mode: dec, step: 2}}
    icmp: {type: 8, code: 0, id: {min: 1, max: 9, mode: inc}}
    size: {imix: [{size: 64, weight: 3}, {size: 1500, weight: 1}]}
    rate: {bps: 100M, layer: L2}
    mode: {type: burst, count: 1000}
    idt: exponential
"""

# (a pcap: profile names its capture relative to its folder, which "fuzz.yaml" is not in)
BASES = [t for p in PROFILES if "pcap:" not in (t := p.read_text(encoding="utf-8"))] + [EXTRA]

CHARS = list(" \t\n:-{}[],#&*!|>'\"%@`?~0123456789abcxyzSAF.\\\u00e9\u2264\x00\ufeff")
SCALARS = [
    "0",
    "-1",
    "1",
    "7",
    "64",
    "65",
    "4095",
    "65535",
    "65536",
    "9216",
    "99999999999999999999999",
    "-99999999999999999999",
    "1e400",
    "-1e400",
    ".inf",
    "-.inf",
    ".nan",
    "0.5",
    "1.5e3",
    "0x1F",
    "0o17",
    "0b101",
    "null",
    "~",
    "true",
    "false",
    "no",
    "yes",
    "[]",
    "{}",
    "[1, 2]",
    "{min: 5, max: 1}",
    "{min: 1, max: 9, mode: random}",
    "{fixed: 70}",
    "{imix: classic}",
    "{imix: []}",
    "{pps: 0}",
    "{bps: 1G}",
    "{percent: 101}",
    "''",
    '""',
    "'quoted'",
    "abc",
    "&a 5",
    "*a",
    "*nope",
    "!!int x",
    "!!binary AAAA",
    "!!python/object:os.system x",
    "2001:db8::1",
    "198.18.0.1",
    "198.18.0.256",
    "::",
    "02:00:00:00:00:01",
    "10G",
    "5Mpps",
    "50%",
    "100 Mbit/s",
    "500ms",
    "-5s",
    "2min",
    "1:2",
    "- a",
    "? x",
    "|",
    ">",
    "%",
    "@",
    "`",
    "\u2264",
    "continuous",
    "burst",
    "multi_burst",
    "exponential",
    "classic",
    "SA",
    "Z",
]
KEYS = [
    "name",
    "seed",
    "ports",
    "streams",
    "port",
    "rx_port",
    "enabled",
    "eth",
    "vlan",
    "ipv4",
    "ipv6",
    "udp",
    "tcp",
    "icmp",
    "size",
    "rate",
    "mode",
    "schedule",
    "idt",
    "src",
    "dst",
    "src_port",
    "dst_port",
    "min",
    "max",
    "step",
    "id",
    "pcp",
    "dei",
    "tpid",
    "interface",
    "speed",
    "netns",
    "dut",
    "duration",
    "bogus",
    "1",
    "[x]",
    "a.b",
    "streams[0]",
    "<<",
]
_VALUE = re.compile(r"(:[ \t]+|-[ \t]+)([^,{}\[\]\n#]+)")
OPS = ("del_char", "dup_char", "rep_char", "del_line", "dup_line", "swap_lines", "scalar",
       "indent", "inject")  # fmt: skip


def mutate(text: str, ops: list[tuple]) -> str:
    """Apply mutation ops; positions are taken modulo the current text/line count."""
    for kind, a, b, pick in ops:
        lines = text.split("\n")
        nl = len(lines)
        if kind == "del_char" and text:
            i = a % len(text)
            text = text[:i] + text[i + 1 :]
        elif kind == "dup_char" and text:
            i = a % len(text)
            text = text[:i] + text[i] + text[i:]
        elif kind == "rep_char" and text:
            i = a % len(text)
            text = text[:i] + CHARS[pick % len(CHARS)] + text[i + 1 :]
        elif kind == "del_line":
            del lines[a % nl]
            text = "\n".join(lines)
        elif kind == "dup_line":
            i = a % nl
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif kind == "swap_lines":
            i, j = a % nl, b % nl
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif kind == "scalar":
            i = a % nl
            hits = list(_VALUE.finditer(lines[i]))
            if hits:
                m = hits[b % len(hits)]
                val = SCALARS[pick % len(SCALARS)]
                lines[i] = lines[i][: m.start(2)] + val + lines[i][m.end(2) :]
                text = "\n".join(lines)
        elif kind == "indent":
            i = a % nl
            delta = b % 9 - 4
            line = lines[i]
            lines[i] = " " * delta + line if delta >= 0 else line[min(-delta, len(line)) :]
            text = "\n".join(lines)
        elif kind == "inject":
            i = a % (nl + 1)
            key = KEYS[pick % len(KEYS)]
            val = SCALARS[(pick // len(KEYS)) % len(SCALARS)]
            lines.insert(i, " " * (b % 9) + f"{key}: {val}")
            text = "\n".join(lines)
    return text


def check(text: str) -> str:
    """The property: a Profile, or a BadInput with positioned problems. Returns the outcome."""
    try:
        prof = load_profile_text(text, "fuzz.yaml")
    except BadInput as e:
        assert e.problems, f"BadInput without problems: {e}"
        nlines = text.count("\n") + 1
        for p in e.problems:
            assert p.file == "fuzz.yaml"
            assert isinstance(p.line, int) and 1 <= p.line <= nlines + 1, p
            assert isinstance(p.col, int) and p.col >= 1, p
            assert isinstance(p.message, str) and p.message.strip(), p
            assert p.render().startswith(f"fuzz.yaml:{p.line}:{p.col}: ")
        return "bad"
    assert isinstance(prof, Profile)
    return "ok"


def test_bases_are_valid():
    assert len(BASES) >= 8
    for text in BASES:
        assert check(text) == "ok"


op_strategy = st.tuples(
    st.sampled_from(OPS),
    st.integers(min_value=0, max_value=1 << 20),
    st.integers(min_value=0, max_value=1 << 20),
    st.integers(min_value=0, max_value=1 << 20),
)


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(base=st.sampled_from(BASES), ops=st.lists(op_strategy, min_size=1, max_size=5))
def test_mutated_profiles_load_or_fail_with_positions(base, ops):
    check(mutate(base, ops))


@pytest.mark.parametrize("seed", [1, 2])
def test_seeded_mutations_give_both_outcomes(seed):
    """A fixed-seed run of the same mutations: the property holds and is not vacuous."""
    rnd = random.Random(seed)
    outcomes = {"ok": 0, "bad": 0}
    for _ in range(250):
        ops = [
            (
                rnd.choice(OPS),
                rnd.randrange(1 << 20),
                rnd.randrange(1 << 20),
                rnd.randrange(1 << 20),
            )
            for _ in range(rnd.randint(1, 3))
        ]
        outcomes[check(mutate(rnd.choice(BASES), ops))] += 1
    assert outcomes["ok"] >= 25 and outcomes["bad"] >= 25, outcomes


@pytest.mark.parametrize("bad", ["\x00", "\ufffe"])
def test_special_character_is_one_positioned_line(bad):
    text = EXTRA.replace("name: extra", f"name: ex{bad}tra")
    with pytest.raises(BadInput) as ei:
        load_profile_text(text, "fuzz.yaml")
    (p,) = ei.value.problems
    assert "\n" not in p.message
    assert (p.line, p.col) == (1, 9)


@pytest.mark.parametrize(
    "text",
    [
        "ports:\n  p0: {interface: p0}\nstreams:\n  - name: s\n    <<: {bogus: 1}\n    port: p0\n",
        "x: &d {port: p0, size: 10}\nports:\n  p0: {interface: p0}\nstreams:\n"
        "  - <<: *d\n    name: s\n",
    ],
    ids=["inline-merge-unknown-key", "anchored-defaults-bad-size"],
)
def test_merge_key_error_is_positioned(text):
    with pytest.raises(BadInput) as ei:
        load_profile_text(text, "m.yaml")
    assert ei.value.problems
    for p in ei.value.problems:
        assert p.line >= 1 and p.col >= 1 and p.message.strip()
    fields = {p.field for p in ei.value.problems}
    assert fields & {"streams[0].bogus", "streams[0].size"}, fields


def test_merge_key_valid_profile_loads():
    """Merges that validate work today (the guard for the xfail above): only errors break."""
    text = (
        "ports:\n  p0: {interface: p0}\nstreams:\n"
        "  - &s {name: a, port: p0, size: 128}\n"
        "  - <<: *s\n    name: b\n"
    )
    prof = load_profile_text(text, "m.yaml")
    assert [s.name for s in prof.streams] == ["a", "b"]
    assert prof.streams[1].size.fixed == 128 and prof.streams[1].port == "p0"
