"""CLI tests for ``tgen validate`` and ``tgen pcap`` on the example and broken profiles.

Everything runs ``tgen`` in a subprocess, as a user would: exit codes, stdout/stderr and
the bytes of the exported pcap are what is checked (tshark for checksums, scapy for a
rebuild of every frame, the signature for stream/sequence numbering).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tgen_tui.profiles.loader import load_profile

from .unit.tgen_unit_helpers import (
    PROFILES,
    REPO,
    SIG_MAGIC,
    assert_tshark_checksums_good,
    needs_tshark,
    protos_of,
    read_pcap,
    rebuilt_with_fresh_checksums,
    signature,
)

TGEN = [sys.executable, "-m", "tgen_tui"]
LINE_RE = re.compile(
    r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<field>[^:\s]+): (?P<msg>\S.*)$"
)


def tgen(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", COLUMNS="100")
    return subprocess.run(
        [*TGEN, *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=env,
        timeout=120,
        check=False,
    )


def test_example_profiles_exist():
    names = {p.name for p in PROFILES}
    assert {"lab.yaml", "imix.yaml", "nat44-stateful.yaml", "rfc4814-udp64.yaml"} <= names
    assert len(PROFILES) >= 7


def test_validate_all_example_profiles_exit_0():
    r = tgen("validate", *[str(p) for p in PROFILES])
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "Traceback" not in r.stdout
    for p in PROFILES:
        assert f"{p}: ok:" in r.stdout


# --------------------------------------------------------------------------- broken profiles
BASE = """\
name: broken
seed: 1
ports:
  p0: {interface: p0, speed: 10G}
  p1: {interface: p1, speed: 10G}
streams:
  - name: ok
    port: p0
    size: 64
    rate: {pps: 1000}
  - name: s1
    port: p1
    eth: {src: "02:00:00:00:00:01", dst: "02:00:00:00:00:02"}
    ipv4:
      src: 198.18.0.2
      dst: 198.19.0.2
    udp:
      src_port: 1000
      dst_port: 7
    size: 100
    rate: {pps: 2000}
"""

# (id, [(old, new), ...], (new-text snippet, anchor inside it), field, message regex)
# The expected LINE:COL is where ``anchor`` starts inside the first occurrence of ``snippet``.
BROKEN = [
    (
        "unknown-key",
        [("    size: 100\n", "    colour: red\n    size: 100\n")],
        ("    colour: red", "colour"),
        "streams[1].colour",
        r"^unknown key$",
    ),
    (
        "vlan-4095",
        [("    size: 100\n", "    vlan:\n      - id: 4095\n        pcp: 1\n    size: 100\n")],
        ("      - id: 4095", "id"),
        "streams[1].vlan[0].id",
        r"4094",
    ),
    (
        "vlan-4095-flow",
        [("    size: 100\n", "    vlan: [{id: 4095}]\n    size: 100\n")],
        ("    vlan: [{id: 4095}]", "id"),
        "streams[1].vlan[0].id",
        r"4094",
    ),
    (
        "port-min-gt-max",
        [("      src_port: 1000\n", "      src_port: {min: 2000, max: 1000, mode: inc}\n")],
        ("      src_port: {min: 2000", "src_port"),
        "streams[1].udp.src_port",
        r"min \(2000\) must be ≤ max \(1000\)",
    ),
    (
        "tcp-64",
        [("    udp:\n", "    tcp:\n"), ("    size: 100\n", "    size: 64\n")],
        ("    size: 64\n    rate: {pps: 2000}", "size"),
        "streams[1].size",
        r"too small.*70 B",
    ),
    (
        "qinq-udp-64",
        [("    size: 100\n", "    vlan: [{id: 10}, {id: 20}]\n    size: 64\n")],
        ("    size: 64\n    rate: {pps: 2000}", "size"),
        "streams[1].size",
        r"too small.*66 B",
    ),
    (
        "ipv6-in-ipv4",
        [("      dst: 198.19.0.2\n", "      dst: 2001:db8::1\n")],
        ("      dst: 2001:db8::1", "dst"),
        "streams[1].ipv4.dst",
        r"IPv6 address in an IPv4 field",
    ),
    (
        "bad-indentation",
        [("    port: p1\n", "     port: p1\n")],
        ("     port: p1", "port: p1"),  # the column is checked to lie on this line only
        "YAML",
        r"mapping values are not allowed",
    ),
    (
        "duplicate-key",
        [("    size: 100\n", "    size: 100\n    size: 200\n")],
        ("    size: 200", "size"),
        "YAML",
        r'duplicate key "size"',
    ),
    (
        "unknown-port",
        [("    port: p1\n", "    port: p9\n")],
        ("    port: p9", "port"),
        "streams[1].port",
        r"unknown port 'p9' \(ports: p0, p1\)",
    ),
    (
        "rate-above-line-rate",
        [("    rate: {pps: 2000}\n", "    rate: {pps: 20M}\n")],
        ("    rate: {pps: 20M}", "rate"),
        "streams[1].rate",
        r"exceeds the line rate of port p1",
    ),
    (
        "string-for-int-port",
        [("      src_port: 1000\n", "      src_port: many\n")],
        ("      src_port: many", "src_port"),
        "streams[1].udp.src_port",
        r"integer",
    ),
    (
        "string-for-int-seed",
        [("seed: 1\n", "seed: lots\n")],
        ("seed: lots", "seed"),
        "seed",
        r"integer",
    ),
]


def _line_col(text: str, snippet: str, anchor: str) -> tuple[int, int]:
    pos = text.index(snippet) + snippet.index(anchor)
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


@pytest.fixture(scope="module")
def broken_validated(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """Every case of BROKEN written to its own file and validated by one ``tgen validate``
    (one process instead of one each: each file still gets its own line). Returns the
    process and {case id: (text, path)}."""
    d = tmp_path_factory.mktemp("broken")
    files = {}
    for cid, edits, *_ in BROKEN:
        text = BASE
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        path = d / f"{cid}.yaml"
        path.write_text(text, encoding="utf-8")
        files[cid] = (text, path)
    return tgen("validate", *[str(p) for _, p in files.values()]), files


def test_validate_broken_profiles_one_line_each_exit_2(broken_validated):
    r, files = broken_validated
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == len(files), r.stderr
    assert [x.split(":", 1)[0] for x in lines] == [str(p) for _, p in files.values()]


@pytest.mark.parametrize(
    ("case", "where", "field", "msg_re"),
    [pytest.param(c[0], *c[2:], id=c[0]) for c in BROKEN],
)
def test_validate_broken_profile_one_positioned_line(broken_validated, case, where, field, msg_re):
    r, files = broken_validated
    text, path = files[case]
    lines = [x for x in r.stderr.splitlines() if x.startswith(f"{path}:")]
    assert len(lines) == 1, r.stderr
    m = LINE_RE.match(lines[0])
    assert m, lines[0]
    assert m["file"] == str(path)
    assert m["field"] == field
    assert re.search(msg_re, m["msg"]), m["msg"]
    line, col = _line_col(text, *where)
    assert int(m["line"]) == line, lines[0]
    if field == "YAML" and where[1] != "size":  # syntax errors: the column lies on that line
        row = text.splitlines()[line - 1]
        assert 1 <= int(m["col"]) <= len(row) + 1, lines[0]
    else:
        assert int(m["col"]) == col, lines[0]


def test_base_of_broken_profiles_is_valid(tmp_path):
    """Guard: the unmutated base passes, so each broken case fails for its own edit only."""
    path = tmp_path / "base.yaml"
    path.write_text(BASE, encoding="utf-8")
    r = tgen("validate", "--quiet", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and r.stdout == ""


@pytest.mark.parametrize("kind", ["missing", "directory", "not-utf8"])
def test_validate_unreadable_file_exit_2_one_line(tmp_path, kind):
    if kind == "missing":
        path = tmp_path / "nope.yaml"
    elif kind == "directory":
        path = tmp_path / "adir.yaml"
        path.mkdir()
    else:
        path = tmp_path / "latin1.yaml"
        path.write_bytes(BASE.replace("name: broken", "name: caf\xe9").encode("latin-1"))
    r = tgen("validate", str(path))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{path}:1:1: "), lines[0]
    assert "cannot read" in lines[0]


def test_validate_good_and_bad_files_together(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE.replace("    port: p1\n", "    port: p9\n"), encoding="utf-8")
    good = REPO / "profiles" / "lab.yaml"
    r = tgen("validate", str(good), str(bad))
    assert r.returncode == 2
    assert f"{good}: ok:" in r.stdout
    assert len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith(f"{bad}:")


def test_pcap_of_broken_profile_exit_2_no_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE.replace("    udp:\n", "    tcp:\n").replace("size: 100", "size: 64"))
    out = tmp_path / "x.pcap"
    r = tgen("pcap", str(bad), "--count", "5", "--output", str(out))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert not out.exists()


def test_pcap_unknown_stream_name_exit_2(tmp_path):
    out = tmp_path / "x.pcap"
    r = tgen("pcap", "profiles/lab.yaml", "--count", "5", "--output", str(out), "--streams", "zz")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "zz" in r.stderr and len(r.stderr.splitlines()) == 1


# --------------------------------------------------------------------------- pcap of every example
COUNT = 300


# synthetic frame streams (a replayed capture's frames are checked by test_pcap_of_replay)
FRAME_PROFILES = [
    p for p in PROFILES if (s := load_profile(p).streams) and all(x.pcap is None for x in s)
]
TRANSPORT_ONLY = [p for p in PROFILES if not load_profile(p).streams]


@pytest.mark.parametrize("profile", TRANSPORT_ONLY, ids=[p.stem for p in TRANSPORT_ONLY])
def test_pcap_of_a_transport_only_profile_is_bad_input(tmp_path, profile):
    out = tmp_path / "x.pcap"
    r = tgen("pcap", str(profile), "--count", "5", "--output", str(out))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    assert "transport streams" in r.stderr and not out.exists()


@needs_tshark
@pytest.mark.parametrize("profile", FRAME_PROFILES, ids=[p.stem for p in FRAME_PROFILES])
def test_pcap_every_example_profile(tmp_path, profile):
    prof = load_profile(profile)
    enabled = [i for i, s in enumerate(prof.streams) if s.enabled]
    assert enabled
    out = tmp_path / f"{profile.stem}.pcap"
    r = tgen("pcap", str(profile), "--count", str(COUNT), "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr

    recs = read_pcap(out)
    assert len(recs) == COUNT * len(enabled)

    # timestamps never go backwards; the signature's ts is the record's due time (low 32 bits)
    ts = [t for t, _ in recs]
    assert all(a <= b for a, b in zip(ts, ts[1:], strict=False))

    # signature: magic, stream index, seq = index of the frame within its stream
    next_seq: Counter[int] = Counter()
    for k, (t, frame) in enumerate(recs):
        magic, stream, seq, sig_ts = signature(frame)
        assert magic == SIG_MAGIC, f"record {k}"
        assert stream in enabled, f"record {k}: stream {stream}"
        assert seq == next_seq[stream], f"record {k}: stream {stream} seq {seq}"
        assert sig_ts == t & 0xFFFFFFFF, f"record {k}"
        next_seq[stream] += 1
    assert next_seq == Counter({i: COUNT for i in enabled})

    # scapy: recomputing every checksum and length gives the same bytes
    for k, (_, frame) in enumerate(recs):
        assert rebuilt_with_fresh_checksums(frame) == frame, f"record {k}"

    # tshark: every IPv4 header, UDP and TCP checksum is good
    assert_tshark_checksums_good(out, [protos_of(f) for _, f in recs])


@needs_tshark
def test_pcap_of_replay_writes_the_rewritten_loops(tmp_path):
    """profiles/replay.yaml: 7 captured frames x 5 loops, rewritten onto the lab, the
    sources moved on each loop, every checksum good (tshark, and scapy rebuilding them;
    the fragmented datagram's after reassembly), the signature where the payload had room."""
    from .unit.replay_helpers import checksums_valid

    out = tmp_path / "replay.pcap"
    r = tgen("pcap", "profiles/replay.yaml", "--count", "1000", "--output", str(out))
    assert r.returncode == 0, r.stderr
    recs = read_pcap(out)
    assert len(recs) == 35  # the 5 loops, not --count
    frames = [f for _, f in recs]
    assert checksums_valid(frames) == []
    srcs = [".".join(str(b) for b in f[26:30]) for f in frames]
    assert srcs[0] == "198.18.1.1" and srcs[7] == "198.18.1.6"  # loop 2: + the span, 5
    signed = [signature(f)[2] for f in frames if signature(f)[0] == SIG_MAGIC]
    assert signed == [i for i in range(35) if i % 7 in (0, 1, 2, 6)]  # seq = frame index
    # tshark checks a fragment's IP header, and the datagram's UDP with its last fragment
    mf = [bool(f[20] & 0x20) for f in frames]
    assert_tshark_checksums_good(
        out, [protos_of(f) - ({"udp"} if m else set()) for f, m in zip(frames, mf, strict=True)]
    )


def test_pcap_is_reproducible(tmp_path):
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    prof = "profiles/rfc4814-udp64.yaml"
    assert tgen("pcap", prof, "--count", "50", "--output", str(a)).returncode == 0
    assert tgen("pcap", prof, "--count", "50", "--output", str(b)).returncode == 0
    assert a.read_bytes() == b.read_bytes()
    assert len(read_pcap(a)) == 50


# --------------------------------------------------------------------------- regressions (bugs found and fixed)
MINI = "ports:\n  p0: {interface: p0}\nstreams:\n  - name: s\n    port: p0\n"


def test_validate_nul_byte_one_line(tmp_path):
    path = tmp_path / "nul.yaml"
    path.write_text(MINI.replace("name: s", "name: s\x00x"), encoding="utf-8")
    r = tgen("validate", str(path))
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{path}:4:12: "), lines[0]


def test_validate_merge_key_error_exit_2(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text(MINI.replace("    port: p0\n", "    <<: {bogus: 1}\n    port: p0\n"))
    r = tgen("validate", str(path))
    assert "Traceback" not in r.stderr
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "extra",
    [
        "    schedule: {stop: .inf}\n",
        "    schedule: {start: .inf}\n",
        "    mode: {type: multi_burst, frames: 10, bursts: 2, gap: .inf}\n",
        "    size: 80\n    ipv6: {src: {min: '2001:db8::', max: '2001:db8::ffff:ffff:ffff:ffff', "
        "mode: random}}\n",
    ],
    ids=["stop-inf", "start-inf", "gap-inf", "ipv6-full-64"],
)
def test_validated_profile_exports_without_traceback(tmp_path, extra):
    path = tmp_path / "p.yaml"
    path.write_text(MINI + extra, encoding="utf-8")
    v = tgen("validate", "--quiet", str(path))
    out = tmp_path / "p.pcap"
    r = tgen("pcap", str(path), "--count", "3", "--output", str(out))
    assert "Traceback" not in v.stderr + r.stderr
    if v.returncode == 0:  # what validate accepts, pcap must export
        assert r.returncode == 0, r.stderr[-500:]
        assert len(read_pcap(out)) == 3
    else:
        assert v.returncode == 2 and r.returncode == 2
