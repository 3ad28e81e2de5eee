"""The capture's pieces without a lab: the vectorised pcapng writer read back by tshark
and scapy (independent readers), the per-frame comments against Python's formatting,
and the libpcap filter compiler's answers (accepted, refused with its message)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tgen_tui.packets.bpf import check_filter, compile_filter, expand_shortcut
from tgen_tui.packets.pcapng import (
    FLAG_INBOUND,
    FLAG_OUTBOUND,
    interface_block,
    interface_names,
    iter_packets,
    packet_blocks,
    section_header,
)
from tgen_tui.worker.capring import CapBatch, concat
from tgen_tui.worker.capture import Commenter


def _frames(rng: np.random.Generator, n: int) -> list[bytes]:
    return [
        rng.integers(0, 256, int(rng.integers(14, 300)), dtype=np.uint8).tobytes() for _ in range(n)
    ]


def _batch(frames: list[bytes], rng: np.random.Generator) -> CapBatch:
    lens = np.array([len(f) for f in frames], dtype=np.int64)
    n = len(frames)
    return CapBatch(
        data=np.frombuffer(b"".join(frames), dtype=np.uint8),
        at=np.cumsum(lens) - lens,
        caplen=lens,
        origlen=lens + rng.integers(0, 3, n),
        ts_ns=1_700_000_000_000_000_000 + np.cumsum(rng.integers(1, 10**6, n)),
        tx=rng.random(n) < 0.5,
        signed=rng.random(n) < 0.8,
        stream=rng.integers(0, 6, n),
        seq=np.concatenate([[0, 9, 10, 99, 4294967295], rng.integers(0, 2**32, n - 5)]),
    )


def test_packet_blocks_read_back_by_tshark_and_scapy(tmp_path):
    from scapy.utils import PcapNgReader

    rng = np.random.default_rng(7)
    frames = _frames(rng, 300)
    b = _batch(frames, rng)
    com = Commenter(["up", "down", "x"], 3)
    cflat, cat, clen = com(b)
    if_id = np.where(b.tx, 1, 0)
    flags = np.where(b.tx, FLAG_OUTBOUND, FLAG_INBOUND)
    buf = section_header("hello") + interface_block("p1 rx") + interface_block("p1 tx")
    buf += packet_blocks(b.data, b.at, b.caplen, b.origlen, b.ts_ns, if_id, flags, cflat, cat, clen)
    path = tmp_path / "t.pcapng"
    path.write_bytes(buf)
    cp = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.interface_name",
         "-e", "frame.comment", "-e", "frame.time_epoch", "-e", "frame.len", "-e", "frame.cap_len"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    rows = [r.split("\t") for r in cp.stdout.splitlines()]
    assert len(rows) == len(frames)
    for i, (ifc, comment, epoch, flen, caplen) in enumerate(rows):
        assert ifc == ("p1 tx" if b.tx[i] else "p1 rx")
        assert comment == bytes(cflat[cat[i] : cat[i] + clen[i]]).decode()
        sec, _, ns = epoch.partition(".")
        assert int(sec) * 10**9 + int(ns.ljust(9, "0")) == b.ts_ns[i]
        assert (int(flen), int(caplen)) == (b.origlen[i], b.caplen[i])
    got = [bytes(p) for p in PcapNgReader(str(path))]
    assert got == frames
    back = list(iter_packets(buf))
    assert [p.data for p in back] == frames and interface_names(buf) == ["p1 rx", "p1 tx"]
    assert [p.flags for p in back] == list(flags)


def test_comments_name_the_stream_seq_and_lane():
    rng = np.random.default_rng(3)
    b = _batch(_frames(rng, 200), rng)
    names = ["up", "down"]
    cflat, cat, clen = Commenter(names, 2)(b)
    for i in range(len(b)):
        text = bytes(cflat[cat[i] : cat[i] + clen[i]]).decode()
        if b.signed[i]:
            s = int(b.stream[i])
            assert text == f"stream {names[s % 2]} seq {int(b.seq[i])} lane {s // 2}"
        else:
            assert text == "other (no signature)"


def test_concat_keeps_every_frame():
    rng = np.random.default_rng(5)
    f1, f2 = _frames(rng, 10), _frames(rng, 7)
    b = concat([_batch(f1, rng), _batch(f2, rng)])
    got = [b.data[b.at[i] : b.at[i] + b.caplen[i]].tobytes() for i in range(len(b))]
    assert got == f1 + f2


@pytest.mark.parametrize("expr", ["", "udp and dst port 7", "vlan 35", "not arp", "arpnd", "ip6"])
def test_filters_tcpdump_accepts_compile(expr):
    assert check_filter(expr) is None
    insns = compile_filter(expr)
    assert insns and insns[-1][0] == 0x06  # BPF_RET
    assert any(i[3] == 262144 for i in insns if i[0] == 0x06)  # whole frames


@pytest.mark.parametrize(
    "expr, words", [("udp and dst prot 7", "prot"), ("ip host", "syntax"), ("port 99999", "port")]
)
def test_filters_tcpdump_rejects_carry_its_message(expr, words):
    msg = check_filter(expr)
    assert msg and words in msg
    tcpdump = subprocess.run(["tcpdump", "-d", expr], capture_output=True, text=True)
    assert tcpdump.returncode != 0  # tcpdump rejects the same expression


def test_arpnd_is_an_expression():
    assert "arp" in expand_shortcut("arpnd") and expand_shortcut("udp") == "udp"
