"""Kernel transmit timestamps on the sendmmsg path (SO_TIMESTAMPING, sampled, read in batches)."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import time

import numpy as np
import pytest

from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.worker.netns import netns
from tgen_tui.worker.txpath import open_tx

from .wk_helpers import make_program

pytestmark = pytest.mark.root


def _send(tx, total: int, batch: int = 256, read_every: int = 4):
    b = BatchBuilder(make_program(size=60), max_batch=batch)
    tags, times, sent = [], [], 0
    for j, k in enumerate(range(0, total, batch)):
        n = min(batch, total - k)
        buf, lens = b.build(k, n)
        sent += tx.send(buf, lens, tags=np.arange(k, k + n, dtype=np.uint64))
        if j % read_every == 0:
            t, ts = tx.read_tx_timestamps()
            tags.append(t)
            times.append(ts)
    time.sleep(0.05)
    t, ts = tx.read_tx_timestamps()
    return sent, np.concatenate(tags + [t]), np.concatenate(times + [ts])


def test_every_frame_stamped_once_in_order(veth):
    with netns(veth.ns_a):
        tx = open_tx(veth.if_a, "sendmmsg", max_batch=256)
    try:
        tx.enable_tx_timestamps(every=1)
        t0 = time.clock_gettime_ns(time.CLOCK_REALTIME)
        sent, tags, ts = _send(tx, 10_000)
        t1 = time.clock_gettime_ns(time.CLOCK_REALTIME)
    finally:
        tx.close()
    assert sent == 10_000
    assert np.array_equal(tags, np.arange(10_000, dtype=np.uint64)) and tx.ts_lost == 0
    assert np.all(np.diff(ts) >= 0) and ts[0] >= t0 and ts[-1] <= t1


def test_sampled_with_odd_batches(veth):
    r0 = veth.rx_packets()
    with netns(veth.ns_a):
        tx = open_tx(veth.if_a, "sendmmsg", max_batch=100)
    try:
        tx.enable_tx_timestamps(every=7)
        sent, tags, _ = _send(tx, 1000, batch=97, read_every=3)  # phase runs across batches
    finally:
        tx.close()
    assert sent == 1000 and veth.rx_packets() - r0 == 1000
    assert np.array_equal(tags, np.arange(0, 1000, 7, dtype=np.uint64))


def test_without_timestamps_nothing_to_read(veth):
    with netns(veth.ns_a):
        tx = open_tx(veth.if_a, "sendmmsg", max_batch=64)
    try:
        assert tx.ts_every == 0
        with pytest.raises(ValueError):
            tx.enable_tx_timestamps(every=0)
    finally:
        tx.close()


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="needs tcpdump")
def test_kernel_stamp_matches_the_egress_tap(veth, tmp_path):
    """Each frame's kernel transmit time is where tcpdump saw it leave (same clock, µs apart)."""
    pcap = tmp_path / "egress.pcap"
    cap = subprocess.Popen(
        ["ip", "netns", "exec", veth.ns_a, "tcpdump", "-i", veth.if_a, "-n", "-s", "96", "-B", "65536",
         "--time-stamp-precision=nano", "-w", str(pcap), "udp"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert "listening" in cap.stderr.readline()
        with netns(veth.ns_a):
            tx = open_tx(veth.if_a, "sendmmsg", max_batch=256)
        try:
            tx.enable_tx_timestamps(every=1)
            sent, tags, ts = _send(tx, 3000)
        finally:
            tx.close()
        time.sleep(0.3)
    finally:
        os.killpg(cap.pid, signal.SIGINT)
        cap.wait(10)
    data = pcap.read_bytes()
    off, tap = 24, {}
    while off + 16 <= len(data):
        sec, nsec, incl, _ = struct.unpack_from("<IIII", data, off)
        seq = struct.unpack_from("<I", data, off + 16 + incl - 8)[0]  # signature seq
        tap[seq] = sec * 1_000_000_000 + nsec
        off += 16 + incl
    # tcpdump may drop some of a burst in its own buffer; every frame it saw must agree
    assert sent == 3000 and len(tags) == 3000 and len(tap) >= 1000
    diff = np.array([ts[i] - tap[int(t)] for i, t in enumerate(tags) if int(t) in tap])
    assert len(diff) == len(tap)
    assert np.abs(diff).max() < 1_000_000, np.percentile(np.abs(diff), [50, 99])


def test_send_one_between_stamped_frames_keeps_the_tags(veth):
    """The timer pacer's send_one (sendmsg(2) of one frame, stamped when given a tag)
    between batch sends: every frame arrives, and each report names its stamped frame."""
    r0 = veth.rx_packets()
    with netns(veth.ns_a):
        tx = open_tx(veth.if_a, "sendmmsg", max_batch=64)
    try:
        tx.enable_tx_timestamps(every=1)
        b = BatchBuilder(make_program(size=60), max_batch=64)
        stamped = []
        for k in range(0, 640, 64):
            buf, lens = b.build(k, 64)
            for r in range(64):
                addr = buf.ctypes.data + r * buf.strides[0]
                if r % 8 == 0:
                    tag = np.array([k + r], dtype=np.uint64)
                    assert tx.send(buf[r : r + 1], lens[r : r + 1], tag, np.array([0])) == 1
                    stamped.append(k + r)
                elif r % 8 == 4:  # stamped through send_one, with its tag
                    assert tx.send_one(addr, int(lens[r]), k + r) == 1
                    stamped.append(k + r)
                else:
                    assert tx.send_one(addr, int(lens[r])) == 1
        time.sleep(0.05)
        tags, _ = tx.read_tx_timestamps()
    finally:
        tx.close()
    assert tags.tolist() == stamped and tx.ts_lost == 0
    assert veth.rx_packets() - r0 == 640
