"""tx_path xdp (tgen_tui.worker.xdplive): frames made and sent by the kernel's live-frames
sender, on a veth pair whose receiving end has NAPI (native XDP_PASS), decoded on the
receiver and compared byte for byte with the batch builder's frames (the ones ``tgen
pcap`` writes) at the same sequence numbers and transmit stamps; counts from the
program's own counters against the interface counters; and the refusal, in one line, of
a peer without NAPI (where the kernel drops every frame without an error)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.program import CSUM_BOTH, CSUM_IP, CSUM_L4, SIG_LEN, FieldOp
from tgen_tui.worker.netns import netns

from .wk_helpers import make_program, sh

pytestmark = pytest.mark.root

xl = pytest.importorskip("tgen_tui.worker.xdplive")


def _sink(ns: str, ifn: str) -> socket.socket:
    with netns(ns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
        s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
        s.bind((ifn, 0))
    s.settimeout(0.5)
    return s


def _drain(s: socket.socket, size: int, want: int = 1 << 30) -> list[bytes]:
    """Our frames (IPv4, ``size`` bytes) from ``s``: ``want`` of them, or until quiet."""
    got: list[bytes] = []
    while len(got) < want:
        try:
            f = s.recv(4096)
        except TimeoutError:
            return got
        if len(f) == size and f[12:14] == b"\x08\x00":
            got.append(f)
    return got


def _counter(ns: str, ifn: str, name: str) -> int:
    out = sh("ip", "netns", "exec", ns, "cat", f"/sys/class/net/{ifn}/statistics/{name}")
    return int(out.stdout)


def _four_fields(tmp_path):
    """IPv4/UDP, 4 varying fields over 65,536 flows: source address inc, IP id random,
    destination address from a learned table, ports a unique permutation (256 x 256)."""
    table = np.zeros((16, 4), dtype=np.uint32)
    table[:, 1] = 0xC6120000 + 0x0200 + np.arange(16)  # 198.18.2.0 .. 198.18.2.15
    path = tmp_path / "learned.npy"
    np.save(path, table)
    base = make_program(size=64)
    fields = (
        FieldOp("src", 26, 4, "inc", 0xC6120100, 0xC61201FF, csum=CSUM_BOTH),
        FieldOp("ipid", 18, 2, "random", 0, 0xFFFF, key=77, csum=CSUM_IP),
        FieldOp("dst", 30, 4, "table", 0, 0xFFFFFFFF, csum=CSUM_BOTH, column=1),
        FieldOp("sport", 34, 2, "unique", 1024, 1279, csum=CSUM_L4),
        FieldOp("dport", 36, 2, "unique", 5000, 5255, csum=CSUM_L4),
    )
    import dataclasses

    # the zeroed template: the varying fields' bytes are 0, their sums come per frame
    t = bytearray(base.template)
    for f in fields:
        t[f.offset : f.offset + f.width] = bytes(f.width)
    ip = bytes(t[14:34])
    ws = int(np.frombuffer(ip, dtype=">u2").astype(np.uint64).sum())
    return dataclasses.replace(
        base, template=bytes(t), fields=fields, unique=(3, 4), unique_key=99,
        table=str(path), table_order="random", table_key=5,
        ip_csum_base=ws, l4_csum_base=17,
    )  # fmt: skip


def _expected(prog, frames: list[bytes]) -> list[bytes]:
    """The builder's frames at the received frames' sequence numbers (consecutive, from
    the first) and transmit stamps, in batches of 4,096."""
    sig = np.frombuffer(b"".join(f[-SIG_LEN:] for f in frames), dtype="<u2, <u2, <u4, <u4")
    seq, ts = sig["f2"].astype(np.int64), sig["f3"].astype(np.uint64)
    assert (np.diff(seq) == 1).all()
    b = BatchBuilder(prog, max_batch=4096)
    out: list[bytes] = []
    for k in range(0, len(frames), 4096):
        n = min(4096, len(frames) - k)
        buf, lens = b.build(int(seq[k]), n, ts_ns=ts[k : k + n])
        out += [bytes(buf[i, : lens[i]]) for i in range(n)]
    return out


def test_xdp_frames_equal_the_builders_and_counts_are_exact(veth, tmp_path):
    prog = _four_fields(tmp_path)
    with netns(veth.ns_b):
        xl.attach_pass(veth.if_b)  # NAPI on the receiving end
    rx = _sink(veth.ns_b, veth.if_b)
    tx0 = _counter(veth.ns_a, veth.if_a, "tx_packets")
    rx0 = _counter(veth.ns_b, veth.if_b, "rx_packets")
    got: list[bytes] = []
    with netns(veth.ns_a):
        tx = xl.XdpLiveTx(veth.if_a)
    try:
        assert tx.kind == "xdp"
        slot = tx.add_stream(prog)
        d0 = _counter(veth.ns_a, veth.if_a, "tx_dropped")
        tx.probe()  # a peer with NAPI: nothing raised, the oversized probe refused (EMSGSIZE)
        assert _counter(veth.ns_a, veth.if_a, "tx_dropped") == d0
        assert _counter(veth.ns_a, veth.if_a, "tx_packets") == tx0
        assert _counter(veth.ns_b, veth.if_b, "rx_packets") == rx0
        # one whole unique cycle, in calls no longer than the far veth's 256-frame XDP
        # ring (on a loaded host the kernel may run its NAPI only after the call)
        for k in range(0, 65536, 256):
            assert tx.send_stream(slot, k, 256) == 256
            got += _drain(rx, 64, 256)
        got += _drain(rx, 64)  # and nothing more
    finally:
        tx.close()
        rx.close()
    assert (tx.produced, tx.sent, tx.dropped) == (65536, 65536, 0)
    assert _counter(veth.ns_a, veth.if_a, "tx_packets") - tx0 == 65536
    assert _counter(veth.ns_b, veth.if_b, "rx_packets") - rx0 == 65536
    assert len(got) == 65536
    seqs = [int.from_bytes(f[-8:-4], "little") for f in got]
    assert seqs == list(range(65536))  # in order, none lost
    want = _expected(prog, got)
    assert got == want  # every byte, checksums included
    tuples = {f[26:38] for f in got}  # addresses and ports
    assert len({t[8:] for t in tuples}) == 65536  # the permutation: each port pair once
    assert tuples == {f[26:38] for f in want}


def test_xdp_frames_decode_with_valid_checksums(veth, tmp_path):
    """An independent decoder (scapy) recomputes both checksums of received frames."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    prog = _four_fields(tmp_path)
    with netns(veth.ns_b):
        xl.attach_pass(veth.if_b)
    rx = _sink(veth.ns_b, veth.if_b)
    with netns(veth.ns_a):
        tx = xl.XdpLiveTx(veth.if_a)
    try:
        slot = tx.add_stream(prog)
        tx.send_stream(slot, 1000, 512)
        got = _drain(rx, 64)
    finally:
        tx.close()
        rx.close()
    assert len(got) == 512
    for f in got:
        p = Ether(f)
        ip_c, udp_c = p[IP].chksum, p[UDP].chksum
        del p[IP].chksum, p[UDP].chksum
        q = Ether(bytes(p))
        assert (q[IP].chksum, q[UDP].chksum) == (ip_c, udp_c)


def test_xdp_refuses_a_peer_without_napi(veth):
    """No XDP program and no GRO on the receiving veth: the kernel would drop every frame
    and the syscall would still return 0; the probe says so in one line."""
    rx0 = _counter(veth.ns_b, veth.if_b, "rx_packets")
    with netns(veth.ns_a):
        tx = xl.XdpLiveTx(veth.if_a)
    try:
        with pytest.raises(xl.XdpRefused) as e:
            tx.probe()
        with pytest.raises(xl.XdpRefused):
            tx.send_stream(tx.add_stream(make_program(size=64)), 0, 256)
    finally:
        tx.close()
    msg = str(e.value)
    assert "\n" not in msg and "no NAPI" in msg and veth.if_a in msg
    assert _counter(veth.ns_b, veth.if_b, "rx_packets") == rx0


def test_xdp_refuses_what_it_cannot_send():
    """Sizes that vary and replays are the batch builder's, not this path's: one line."""
    import dataclasses

    from tgen_tui.packets.program import SizeProgram

    p = dataclasses.replace(make_program(size=64), sizes=SizeProgram("inc", 64, 128))
    with pytest.raises(ValueError, match="one frame size per stream"):
        xl.stream_config(p)
    held = dataclasses.replace(make_program(size=64), blocks=4)  # flows in blocks
    with pytest.raises(ValueError, match="blocks: 4"):
        xl.stream_config(held)


def test_every_frame_is_whole_even_when_the_receiver_wrote_into_its_page(veth):
    """A receiver that writes into a frame (a DUT forwarding it: new MACs, TTL, NAT) and
    frees it hands the page back to the sender's page pool; the next frames made from
    that page must still be the template's. tgen_check on the far end counts frames with
    the template's MACs, then scribbles over them."""
    prog = make_program(size=64)
    with netns(veth.ns_b):
        sink = xl.XdpObject(programs=("tgen_check",))
        sink.sink_want[:12] = np.frombuffer(prog.template[:12], dtype=np.uint8)
        idx = socket.if_nametoindex(veth.if_b)
        assert sink.lib.bpf_xdp_attach(idx, sink.fd("tgen_check"), xl.XDP_FLAGS_DRV_MODE, None) == 0
    with netns(veth.ns_a):
        tx = xl.XdpLiveTx(veth.if_a)
    try:
        slot = tx.add_stream(prog)
        for k in range(0, 20000, 4096):  # calls longer than a page pool's first fill
            tx.send_stream(slot, k, min(4096, 20000 - k))
        ok, bad = (int(x) for x in sink.sink)
    finally:
        tx.close()
        sink.close()
    # every frame that arrived was whole (one a full ring refused never arrived at all)
    assert (ok, bad) == (tx.sent, 0) and tx.sent + tx.dropped == 20000
    assert tx.sent > 10000


def test_napi_lost_mid_run_raises_with_the_cause(veth):
    """The far end loses its XDP program while frames flow: the next call says why in
    one line (the worker reports it as the port's tx failure), never silent loss."""
    with netns(veth.ns_b):
        xl.attach_pass(veth.if_b)
    with netns(veth.ns_a):
        tx = xl.XdpLiveTx(veth.if_a)
    try:
        slot = tx.add_stream(make_program(size=64))
        assert tx.send_stream(slot, 0, 1000) == 1000 and tx.sent == 1000
        with netns(veth.ns_b):
            xl.detach(veth.if_b)
        with pytest.raises(xl.XdpRefused, match="no NAPI"):
            tx.send_stream(slot, 1000, 1000)
    finally:
        tx.close()
    assert (tx.sent, tx.dropped) == (1000, 1000)
