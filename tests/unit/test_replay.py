"""Replaying a capture: the pcap/pcapng reader, the rewriter and the replay builder.

scapy is the independent decoder: it writes the captures, and it decodes every frame the
builder makes (addresses, ports, tags, and every checksum rebuilt from scratch must equal
the one the incremental fix wrote; fragments are reassembled for their UDP checksum).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tgen_tui.packets.pcapread import PcapError, read_capture
from tgen_tui.packets.program import SIG_LEN, SIG_MAGIC, program_from_dict, program_to_dict
from tgen_tui.packets.replaybuild import RecordedDueTimes, ReplayBuilder
from tgen_tui.packets.replaycompile import ReplayError, compile_replay
from tgen_tui.profiles.loader import load_profile_text

from .replay_helpers import MIX_FLOWS, MIX_FRAMES, checksums_valid, make_mix, mix_packets

REWRITE = {"ipv4": {"10.0.0.0/24": "198.18.0.0/24", "10.1.0.0/24": "198.19.0.0/24"}}


def _profile(pcap: Path, rewrite: dict | None = None, port: dict | None = None, **pc):
    s = {"name": "r", "port": "p0", "rx_port": "p1", "rate": {"pps": 1000}}
    s["pcap"] = {"file": str(pcap), **pc}
    if rewrite is not None:
        s["rewrite"] = rewrite
    doc = {"ports": {"p0": {"interface": "p0", **(port or {})}, "p1": {"interface": "p1"}}}
    doc["streams"] = [s]
    return load_profile_text(json.dumps(doc), str(pcap.parent / "t.yaml"))


def _builder(pcap: Path, rewrite: dict | None = REWRITE, **pc) -> ReplayBuilder:
    prof = _profile(pcap, rewrite, **pc)
    s = prof.streams[0]
    prog = compile_replay(s, 3, prof.ports["p0"], 1)
    prog = program_from_dict(json.loads(json.dumps(program_to_dict(prog))))  # the pipe
    return ReplayBuilder(prog, max_batch=64)


@pytest.fixture
def mix(tmp_path: Path) -> Path:
    return make_mix(tmp_path / "mix.pcap")


# ---------------------------------------------------------------------- reader
@pytest.mark.parametrize("ng", [False, True], ids=["pcap", "pcapng"])
def test_reader_gives_scapys_frames_and_times(tmp_path: Path, ng: bool) -> None:
    path = make_mix(tmp_path / "m.cap", pcapng=ng)
    cap = read_capture(path)
    want = mix_packets()
    assert len(cap) == MIX_FRAMES
    assert [cap.frame(i) for i in range(len(cap))] == [bytes(p) for p in want]
    gaps = np.diff(cap.ts_ns)
    assert np.all(np.abs(gaps - 1_000_000) <= 1000), gaps  # 1 ms apart (µs resolution)
    assert cap.kind == ("pcapng" if ng else "pcap")


def test_reader_big_endian_and_nanosecond_pcap(tmp_path: Path) -> None:
    frame = bytes(mix_packets()[0])
    p = tmp_path / "be.pcap"
    hdr = struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    rec = struct.pack(">IIII", 7, 123456789, len(frame), len(frame)) + frame
    p.write_bytes(hdr + rec + rec)
    cap = read_capture(p)
    assert len(cap) == 2 and cap.frame(1) == frame
    assert int(cap.ts_ns[0]) == 7_123_456_789


@pytest.mark.parametrize(
    "data, words",
    [
        (b"", "not a pcap"),
        (b"hello world, not a capture", "not a pcap or pcapng file"),
        (struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 105), "not Ethernet"),
        (struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + b"\0" * 7, "truncated"),
        (
            struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
            + struct.pack("<IIII", 0, 0, 500, 500)
            + b"x" * 20,
            "runs past the end",
        ),
    ],
)
def test_reader_refuses_damaged_files_in_one_line(tmp_path: Path, data: bytes, words: str) -> None:
    p = tmp_path / "bad.pcap"
    p.write_bytes(data)
    with pytest.raises(PcapError) as e:
        read_capture(p)
    assert words in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------------- rewrite
def test_rewrite_maps_addresses_strips_vlan_and_keeps_checksums_valid(mix: Path) -> None:
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Dot1Q, Ether

    b = _builder(mix, {**REWRITE, "vlan": "strip", "ports": {53: 5353}}, signature="off")
    out = b.frames(0, MIX_FRAMES, 0)
    assert checksums_valid(out) == []
    pk = [Ether(f) for f in out]
    assert [p[IP].src for p in pk] == [
        "198.18.0.1", "198.18.0.2", "198.18.0.2", "198.18.0.3",
        "198.18.0.4", "198.18.0.4", "198.18.0.4", "198.18.0.5",
    ]  # fmt: skip
    assert {p[IP].dst.rsplit(".", 1)[0] for p in pk} == {"198.19.0"}
    assert not any(Dot1Q in p for p in pk)
    assert len(out[7]) == len(bytes(mix_packets()[7])) - 4
    assert pk[0]["UDP"].dport == 5353
    # the payloads are the captured ones (signature: off)
    assert bytes(pk[2]["TCP"].payload) == bytes(mix_packets()[2]["TCP"].payload)


def test_vlan_set_tags_every_frame(mix: Path) -> None:
    from scapy.layers.l2 import Dot1Q, Ether

    b = _builder(mix, {**REWRITE, "vlan": {"id": 76, "pcp": 3}})
    out = b.frames(0, MIX_FRAMES, 0)
    assert all(Ether(f)[Dot1Q].vlan == 76 and Ether(f)[Dot1Q].prio == 3 for f in out)
    assert checksums_valid(out) == []


def test_ipv6_rewrite_fixes_udp_and_icmpv6_checksums(tmp_path: Path) -> None:
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.utils import wrpcap

    e = Ether(src="00:11:22:33:44:55", dst="66:77:88:99:aa:bb")
    pk = [
        e / IPv6(src="2001:db8::1", dst="2001:db8:1::9") / UDP(sport=1, dport=2) / Raw(b"a" * 30),
        e / IPv6(src="2001:db8::2", dst="2001:db8:1::9") / ICMPv6EchoRequest(id=5) / Raw(b"b" * 20),
    ]
    wrpcap(str(tmp_path / "v6.pcap"), pk)
    rw = {"ipv6": {"2001:db8::/48": "2001:2::/48", "2001:db8:1::/48": "2001:2:1::/48"}}
    b = _builder(tmp_path / "v6.pcap", rw, loops=2, unique=True)
    out = b.frames(0, 4, 0)
    assert checksums_valid(out) == []
    got = [Ether(f)[IPv6].src for f in out]
    assert got == ["2001:2::1", "2001:2::2", "2001:2::3", "2001:2::4"]  # unique: + span 2
    assert Ether(out[3])[IPv6].dst == "2001:2:1::9"


def test_unique_loops_are_new_flows_with_valid_checksums(mix: Path) -> None:
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    b = _builder(mix, {**REWRITE, "vlan": "strip"}, loops=5, unique=True)
    out = b.frames(0, 5 * MIX_FRAMES, 0)
    assert checksums_valid(out) == []
    srcs = [Ether(f)[IP].src for f in out]
    for k in range(5):  # the sources 10.0.0.1-5 span 5 addresses: loop k adds 5k
        loop = srcs[k * MIX_FRAMES : (k + 1) * MIX_FRAMES]
        assert loop[0] == f"198.18.0.{1 + 5 * k}" and loop[-1] == f"198.18.0.{5 + 5 * k}"
    flows = {(Ether(f)[IP].src, Ether(f)[IP].dst, Ether(f)[IP].proto) for f in out}
    assert len(flows) == 5 * MIX_FLOWS


def test_signature_written_where_the_payload_has_room(mix: Path) -> None:
    from scapy.layers.l2 import Ether

    b = _builder(mix, {**REWRITE, "vlan": "strip"}, loops=2)
    out = b.frames(0, 2 * MIX_FRAMES, 0xABCDEF)
    assert checksums_valid(out) == []
    signed = {}
    for i, f in enumerate(out):
        magic, stream, seq, ts = struct.unpack("<HHII", f[-SIG_LEN:])
        if magic == SIG_MAGIC:
            signed[i] = (stream, seq, ts)
    # DNS (0), the HTTP GET (2), the ICMP echo (3), the VLAN frame's UDP (7): not the
    # SYN (no payload) nor the fragments
    assert sorted(signed) == [0, 2, 3, 7, 8, 10, 11, 15]
    assert all(v == (3, i, 0xABCDEF) for i, v in signed.items())
    assert Ether(out[1])["TCP"].flags == "S"


def test_macs_from_the_port_and_gateway(mix: Path) -> None:
    from tgen_tui.worker.responder import with_macs

    prof = _profile(mix, REWRITE, port={"ipv4": "198.18.0.2/24", "gateway": "198.18.0.1"})
    prog = compile_replay(prof.streams[0], 0, prof.ports["p0"], 1)
    assert prog.eth_auto and prog.replay is not None and prog.replay.macs
    l3 = {"mac": "02:00:00:00:00:aa", "gw4": "02:00:00:00:00:bb"}
    (prog,) = with_macs([prog], l3)
    out = ReplayBuilder(prog, 16).frames(0, MIX_FRAMES, 0)
    assert {f[:12].hex() for f in out} == {"0200000000bb0200000000aa"}


def test_bpf_filter_and_frame_range_select(mix: Path) -> None:
    # as tcpdump -r: "udp" is DNS and the three fragments; the tagged frame needs "vlan"
    assert list(_builder(mix, REWRITE, filter="udp").r.frame_numbers) == [1, 5, 6, 7]
    assert list(_builder(mix, REWRITE, filter="vlan and udp").r.frame_numbers) == [8]
    b = _builder(mix, REWRITE, frames="2-4")
    assert list(b.r.frame_numbers) == [2, 3, 4]


# ---------------------------------------------------------------------- timing
def test_recorded_times_times_speed_and_max_gap(tmp_path: Path) -> None:
    from tgen_tui.packets.program import Schedule

    path = make_mix(tmp_path / "m.pcap", gap=0.002)
    b = _builder(path, REWRITE, timing="recorded", speed=2, loops=3)
    sched = b.p.schedule
    dt = b.due_times(sched)
    assert isinstance(dt, RecordedDueTimes)
    due = dt.due(0, 3 * MIX_FRAMES)
    assert np.allclose(np.diff(due), 0.001, atol=1e-6)  # 2 ms recorded, halved
    assert dt.total() == 3 * MIX_FRAMES
    assert dt.count_until(due[5]) == 6 and dt.due_one(9) == pytest.approx(due[9])
    assert sched.pps == pytest.approx(1000.0, rel=1e-6)  # the mean rate x speed
    b = _builder(path, REWRITE, timing="recorded", max_gap="1ms")
    d = b.due_times(b.p.schedule).due(0, MIX_FRAMES)
    assert np.allclose(np.diff(d), 0.001, atol=1e-6)
    # a rate change scales the recorded pace
    faster = b.due_times(Schedule(pps=b.p.schedule.pps * 4, count=None))
    assert np.allclose(np.diff(faster.due(0, 4)), 0.00025, atol=1e-7)


# ---------------------------------------------------------------------- errors
def test_compile_errors_name_the_field(mix: Path, tmp_path: Path) -> None:
    prof = _profile(mix, {"ipv4": {"10.9.0.0/16": "198.18.0.0/16"}})
    with pytest.raises(ReplayError) as e:
        compile_replay(prof.streams[0], 0, prof.ports["p0"], 1)
    assert e.value.field == "rewrite.ipv4" and "10.9.0.0/16" in e.value.message
    prof = _profile(mix, REWRITE, mtu=1000)
    with pytest.raises(ReplayError) as e:
        compile_replay(prof.streams[0], 0, prof.ports["p0"], 1)
    assert e.value.field == "pcap.mtu" and "frame 5" in e.value.message


def _validate(tmp_path: Path, stream_yaml: str) -> subprocess.CompletedProcess:
    (tmp_path / "p.yaml").write_text(
        "ports:\n  p0: {interface: p0}\n  p1: {interface: p1}\nstreams:\n"
        f"  - name: r\n    port: p0\n    rx_port: p1\n{stream_yaml}"
    )
    return subprocess.run(
        [sys.executable, "-m", "tgen_tui", "validate", "p.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "stream_yaml, where, words",
    [
        ("    pcap: {file: none.pcap}\n", "8:12: streams[0].pcap.file", "no such file"),
        ("    pcap: {file: bad.pcap}\n", "8:12: streams[0].pcap.file", "runs past the end"),
        (
            "    pcap: {file: mix.pcap}\n    rewrite: {ipv4: {10.7.0.0/16: 198.18.0.0/16}}\n",
            "9:15: streams[0].rewrite.ipv4",
            "maps nothing",
        ),
        (
            "    pcap: {file: mix.pcap, mtu: 1400}\n",
            "8:28: streams[0].pcap.mtu",
            "over the port's MTU",
        ),
        ("    pcap: {file: mix.pcap}\n    udp: {}\n", "streams[0].udp", "takes its headers"),
    ],
)
def test_validate_errors_are_one_line_exit_2(
    tmp_path: Path, mix: Path, stream_yaml: str, where: str, words: str
) -> None:
    (tmp_path / "bad.pcap").write_bytes(mix.read_bytes()[:100])
    r = _validate(tmp_path, stream_yaml)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and where in lines[0] and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_validate_prints_the_summary_and_a_sample(tmp_path: Path, mix: Path) -> None:
    r = _validate(
        tmp_path,
        "    pcap: {file: mix.pcap, loops: 5, unique: true}\n"
        '    rewrite: {ipv4: {"10.0.0.0/24": "198.18.0.0/24"}, vlan: strip}\n',
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "frames 8 (file frames 1-8), flows 5, 5 loops, unique" in out
    assert "icmp 1, tcp 2, udp 5 (3 fragments)" in out
    assert "recorded 0.007000 s" in out
    assert "frame 1 as captured: Ether / IP / UDP" in out and "frame 1 as sent:" in out


def test_receiver_keys_survive_source_nat(mix: Path) -> None:
    """The receiver's flow keys (worker.replayrx) of the frames as a NAT forwards them
    (source address, port and echo id rewritten) equal the templates' keys."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.l2 import Ether

    from tgen_tui.worker.replayrx import ReplayRx, frame_keys, template_keys

    b = _builder(mix, {**REWRITE, "vlan": "strip"}, loops=2, unique=True)
    want = template_keys(b.r.t, b.r.lens)
    natted = []
    for f in b.frames(0, 2 * MIX_FRAMES, 0):
        p = Ether(f)
        p[IP].src = "198.19.0.1"
        for layer, field in ((UDP, "sport"), (TCP, "sport"), (ICMP, "id")):
            if layer in p and not p[IP].frag:
                setattr(p[layer], field, 61000)
        natted.append(bytes(p))
    buf = np.frombuffer(b"".join(f + bytes(2048 - len(f)) for f in natted), dtype=np.uint8)
    got = frame_keys(buf, np.arange(len(natted)) * 2048, np.array([len(f) for f in natted]))
    assert list(got) == list(want) * 2
    assert len(set(want.tolist())) == 6  # 5 flows; the fragments after the first: a 6th key
    rx = ReplayRx([(3, want)])
    hit, streams, plain = rx.match(got)
    assert len(hit) == 2 * MIX_FRAMES and set(streams.tolist()) == {3} and plain.all()
    assert sum(r["rx_frames"] for r in rx.report()) == 2 * MIX_FRAMES


def test_a_derived_profile_keeps_its_pcap_stream(mix: Path) -> None:
    """--pacing and --seed re-validate the profile as dumped (profiles.revalidate): the
    dumped defaults (no tags, size 64, learn false) are not headers given by hand."""
    from tgen_tui.profiles.revalidate import with_pacing, with_seed

    prof = with_seed(with_pacing(_profile(mix, REWRITE, loops=2), "timer"), 7)
    assert prof.streams[0].pcap is not None and prof.seed == 7
    assert prof.streams[0].pcap.file == str(mix)


def test_flow_rows_merge_fragments_and_count_partial_loops() -> None:
    from tgen_tui.engine.replayflows import flow_rows
    from tgen_tui.worker.replayrx import FRAG_PORT

    dst = (4 << 60) | (17 << 52) | (0xC6130109 << 17)  # udp 198.19.1.9
    entries = [
        {"stream": 0, "key": dst | 9, "per_loop": 1, "rx_frames": 5},
        {"stream": 0, "key": dst | FRAG_PORT, "per_loop": 2, "rx_frames": 9},
    ]
    (row,) = flow_rows(15, 3, entries)  # 5 loops of 3 frames
    assert row == {"flow": "udp 198.19.1.9:9", "sent": 15, "rx": 14, "lost": 1}
    (row,) = flow_rows(16, 3, entries)  # a sixth loop begun: its third in proportion
    assert row["sent"] == 16
