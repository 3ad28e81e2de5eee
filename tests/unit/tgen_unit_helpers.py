"""Helpers for the unit tests: build one-stream profiles, frames, pcaps; run tshark.

Not a test module (no ``test_`` prefix); imported by the tests in this folder.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_stream
from tgen_tui.packets.pcap import write_pcap
from tgen_tui.packets.program import SIG_LEN, SIG_MAGIC, StreamProgram
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.profiles.models import Profile

REPO = Path(__file__).resolve().parents[2]
PROFILES = sorted((REPO / "profiles").glob("*.yaml"))
TSHARK = shutil.which("tshark") or ("/usr/bin/tshark" if Path("/usr/bin/tshark").exists() else None)
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
CHECK_OPTS = [
    "-o",
    "ip.check_checksum:TRUE",
    "-o",
    "udp.check_checksum:TRUE",
    "-o",
    "tcp.check_checksum:TRUE",
]


def profile_of(stream: dict, seed: int = 1, speed: str = "10G", **extra) -> Profile:
    """A validated one-port profile with one stream (JSON is YAML, so the real loader parses it)."""
    s = {"name": "s", "port": "p0", "rate": {"pps": 1000}}
    s.update(stream)
    d = {"name": "t", "seed": seed, "ports": {"p0": {"interface": "p0", "speed": speed}}}
    d["streams"] = [s]
    d.update(extra)
    return load_profile_text(json.dumps(d), "<test>")


def program_of(stream: dict, seed: int = 1, index: int = 0) -> StreamProgram:
    p = profile_of(stream, seed=seed)
    return compile_stream(p.streams[0], index, p.ports["p0"], p.seed)


def build(prog: StreamProgram, start: int, n: int, ts_ns: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Frames [start, start+n) as a copied (n, stride) uint8 array and their lengths (no FCS)."""
    b = BatchBuilder(prog, max_batch=max(1, n))
    buf, lens = b.build(start, n, ts_ns)
    return buf.copy(), lens.copy()


def frames(prog: StreamProgram, start: int, n: int, ts_ns: int = 0, max_batch: int = 4096):
    return BatchBuilder(prog, max_batch=max_batch).frames(start, n, ts_ns)


def column(buf: np.ndarray, offset: int, width: int) -> np.ndarray:
    """Big-endian unsigned integers of ``width`` bytes at ``offset`` in every row (int64/obj)."""
    out = np.zeros(buf.shape[0], dtype=np.uint64)
    for j in range(width):
        out = (out << np.uint64(8)) | buf[:, offset + j].astype(np.uint64)
    return out


def signature(frame: bytes) -> tuple[int, int, int, int]:
    """(magic, stream, seq, ts) from the last 12 bytes, little-endian."""
    return struct.unpack("<HHII", frame[-SIG_LEN:])


def check_signatures(frame_list, stream: int, first_seq: int = 0) -> None:
    for i, f in enumerate(frame_list):
        magic, s, seq, _ = signature(f)
        assert magic == SIG_MAGIC, f"frame {i}: magic {magic:#x}"
        assert s == stream, f"frame {i}: stream {s}"
        assert seq == (first_seq + i) & 0xFFFFFFFF, f"frame {i}: seq {seq}"


def write_frames(path: Path, frame_list) -> Path:
    write_pcap(path, [(i * 1e-6, 0, f) for i, f in enumerate(frame_list)])
    return path


def read_pcap(path: Path) -> list[tuple[int, bytes]]:
    """(timestamp ns, frame) records of a nanosecond pcap."""
    data = Path(path).read_bytes()
    magic, vmaj, vmin, _, _, snap, link = struct.unpack("<IHHiIII", data[:24])
    assert magic == 0xA1B23C4D and (vmaj, vmin) == (2, 4) and link == 1
    out, pos = [], 24
    while pos < len(data):
        sec, nsec, incl, orig = struct.unpack("<IIII", data[pos : pos + 16])
        assert incl == orig
        pos += 16
        out.append((sec * 1_000_000_000 + nsec, data[pos : pos + incl]))
        pos += incl
    return out


def tshark_fields(pcap: Path, fields: list[str]) -> list[dict[str, str]]:
    """One dict per frame: field -> value ('' when absent), checksum validation on."""
    cmd = [TSHARK, "-n", "-r", str(pcap), *CHECK_OPTS, "-T", "fields", "-E", "separator=/t"]
    cmd += ["-E", "occurrence=a", "-E", "aggregator=,"]
    for f in fields:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    rows = []
    for line in r.stdout.splitlines():
        vals = line.split("\t")
        vals += [""] * (len(fields) - len(vals))
        rows.append(dict(zip(fields, vals, strict=True)))
    return rows


def rebuilt_with_fresh_checksums(raw: bytes) -> bytes:
    """scapy: decode, delete every checksum and length field, rebuild."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    pkt = Ether(raw)
    # keep the L4 payload opaque: random ports may make scapy dissect it as DNS, GTP, ...
    for layer, hlen in ((UDP, lambda x: 8), (TCP, lambda x: x.dataofs * 4), (ICMP, lambda x: 8)):
        if layer in pkt:
            lay = pkt[layer]
            body = bytes(lay.original)[hlen(lay) :]
            lay.remove_payload()
            lay.add_payload(Raw(body))
    for layer, names in (
        (IP, ("chksum", "len")),
        (UDP, ("chksum", "len")),
        (TCP, ("chksum",)),
        (ICMP, ("chksum",)),
        (IPv6, ("plen",)),
        (ICMPv6EchoRequest, ("cksum",)),
    ):
        if layer in pkt:
            for n in names:
                delattr(pkt[layer], n)
    return bytes(pkt)


def assert_tshark_checksums_good(pcap: Path, expect: list[set[str]]) -> None:
    """Every frame's checksums are good in tshark; ``expect[i]`` names the protocols frame i has."""
    status = {
        "ip": "ip.checksum.status",
        "udp": "udp.checksum.status",
        "tcp": "tcp.checksum.status",
        "icmp": "icmp.checksum.status",
        "icmpv6": "icmpv6.checksum.status",
    }
    rows = tshark_fields(pcap, list(status.values()))
    assert len(rows) == len(expect)
    for i, (row, protos) in enumerate(zip(rows, expect, strict=True)):
        assert protos, f"frame {i}: nothing to check"
        for p in protos:
            assert row[status[p]] == "1", f"frame {i}: {p} checksum status {row[status[p]]!r}"


def protos_of(raw: bytes) -> set[str]:
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import ICMPv6EchoRequest
    from scapy.layers.l2 import Ether

    pkt = Ether(raw)
    out = set()
    for layer, name in ((IP, "ip"), (UDP, "udp"), (TCP, "tcp"), (ICMP, "icmp")):
        if layer in pkt:
            out.add(name)
    if ICMPv6EchoRequest in pkt:
        out.add("icmpv6")
    return out
