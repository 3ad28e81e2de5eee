"""Spaced sending on the real lab (root): ``pacing: qdisc`` puts tgen's TBF on the tester's
own port at the port's frame rate for the run and takes it off after; several streams on
one port leave interleaved by due time (read back from a tcpdump tap on the DUT's ingress
with scapy); a TBF left by a killed worker is taken off by the next run. Counts and order
only: how evenly the frames are spaced is measured in benchmarks/spacing.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]


def _profile(prefix: str, tmp: Path, streams: str, pacing: str = "qdisc") -> Path:
    text = f"""
name: paced
seed: 1
duration: 2s
ports:
  p0: {{interface: p0, netns: {prefix}-tester, pacing: {pacing}}}
  p1: {{interface: p1, netns: {prefix}-tester}}
dut: {{netns: {prefix}-dut}}
streams:
{streams}"""
    p = tmp / "paced.yaml"
    p.write_text(text)
    return p


def _stream(name: str, dport: int, pps: int) -> str:
    return f"""  - name: {name}
    port: p0
    rx_port: p1
    eth: {{src: "02:74:67:00:00:01", dst: "02:74:67:00:00:fe"}}
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp: {{src_port: {{min: 10000, max: 10063, mode: inc}}, dst_port: {dport}}}
    size: 64
    rate: {{pps: {pps}}}
"""


def _qdisc(prefix: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", f"{prefix}-tester", "tc", "qdisc", "show", "dev", "p0"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


@pytest.fixture(scope="module")
def lab(make_lab):
    with make_lab("nat", "p") as prefix:
        yield prefix


def test_qdisc_pacing_puts_a_tbf_on_the_port_for_the_run(lab, tmp_path):
    prof = _profile(lab, tmp_path, _stream("up", 7, 5000))
    out = tmp_path / "r.json"
    run = subprocess.Popen(
        [*TGEN, "run", str(prof), "--json", str(out), "-q", "--no-store"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = ""  # the TBF as first seen: at the asked rate (the trim moves it later)
    deadline = time.monotonic() + 20
    while run.poll() is None and time.monotonic() < deadline:
        if not seen and "tbf 7467:" in (q := _qdisc(lab)):
            seen = q
        time.sleep(0.05)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    # 5,000 frames/s of 60 bytes (no FCS): 2.4 Mbit/s, every frame counted as 60 bytes
    # (later trimmed by at most 8 % to keep the departures on their due times)
    m = re.search(r"tbf 7467: .*rate (\d+)Kbit", seen)
    assert m and 2400 * 0.92 <= int(m.group(1)) <= 2400 * 1.08, seen
    assert "tbf" not in _qdisc(lab)  # taken off at the end
    res = json.loads(out.read_text())
    up = res["streams"]["up"]
    assert up["tx_frames"] == up["rx_frames"] > 9000 and up["lost"] == 0
    p0 = res["ports"]["p0"]
    # every frame handed to the TBF left it before tx done (none dropped at its removal);
    # tx_errors (a full TBF queue, retried next turn) depend on the host's stalls: not asserted
    assert p0["tx_frames"] == p0["if_tx_frames"] and p0["tx_unsent"] == 0
    w = next(w for w in res["workers"] if "p0" in w["ports"])
    assert w["pacing"] == "qdisc" and "pacing qdisc" in w["tx_path_why"]


def test_streams_of_a_port_interleave_by_due_time(lab, tmp_path):
    """Two streams at the same rate on one port: A B A B on the wire, not A A A A B B B B
    (the TBF releases what it is given in order; the worker merges the batches)."""
    from scapy.all import UDP, rdpcap

    prof = _profile(lab, tmp_path, _stream("a", 7, 2000) + _stream("b", 9, 2000))
    pcap = tmp_path / "tap.pcap"
    tap = subprocess.Popen(
        ["ip", "netns", "exec", f"{lab}-dut", "tcpdump", "-i", "d0", "-Q", "in", "-U", "-w",
         str(pcap), "udp and (dst port 7 or dst port 9)"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        out = tmp_path / "r.json"
        cmd = [*TGEN, "run", str(prof), "--json", str(out), "-q", "--no-store"]
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        time.sleep(1.0)
    finally:
        tap.terminate()
        tap.wait(timeout=10)
    order = [p[UDP].dport for p in rdpcap(str(pcap)) if UDP in p]
    res = json.loads(out.read_text())["streams"]
    assert order.count(7) == res["a"]["tx_frames"] > 3000
    assert order.count(9) == res["b"]["tx_frames"] > 3000
    mid = order[200:-200]
    runs, longest = 1, 1
    for x, y in zip(mid, mid[1:], strict=False):
        runs = runs + 1 if x == y else 1
        longest = max(longest, runs)
    assert longest <= 2, f"a stream sent {longest} frames in a row"


def test_a_tbf_left_behind_is_taken_off(lab, tmp_path):
    ns = ["ip", "netns", "exec", f"{lab}-tester", "tc", "qdisc", "replace", "dev", "p0"]
    subprocess.run(
        [*ns, "root", "handle", "7467:", "tbf", "rate", "1mbit", "burst", "1600", "limit", "9000"],
        check=True,
    )
    assert "tbf 7467:" in _qdisc(lab)
    prof = _profile(lab, tmp_path, _stream("up", 7, 1000), pacing="burst")
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "-d", "1", "-q", "--no-store"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    assert "tbf" not in _qdisc(lab)


def test_a_stalled_sender_is_charged_to_the_tester_not_the_dut(lab, tmp_path):
    """The p0 worker is stopped (SIGSTOP) for 0.8 s: when it wakes it hands the TBF the
    frames it owes, which the TBF releases at (at most 8 % over) the port's rate, so at
    the run's stop the TBF still holds a few thousand frames, more than the 200 ms drain
    could count. They are dropped at the stop and counted as p0's frames not put on the
    wire: all of the stream's loss is the tester's (tester_tx_unsent), none the DUT's,
    and every frame that left p0 is on p1's interface and ring."""
    import os
    import signal

    import trio

    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile

    compiled = compile_profile(load_profile(_profile(lab, tmp_path, _stream("up", 7, 5000))))
    out = {}

    async def go():
        async with open_engine(compiled, EngineOptions(drain_ms=200)) as eng:
            await eng.start()
            await trio.sleep(1.0)
            snap = eng.latest_snapshot()
            (w,) = [w for w in snap.workers if "p0" in w.ports]
            os.kill(w.pid, signal.SIGSTOP)
            try:
                await trio.sleep(0.8)
            finally:
                os.kill(w.pid, signal.SIGCONT)
            await trio.sleep(1.0)
            await eng.stop()
            out["final"] = await eng.final_snapshot()

    trio.run(go)
    final = out["final"]
    up, p0, p1 = final.stream("up"), final.port("p0"), final.port("p1")
    assert up.tx_frames > 8000 and p0.tx_unsent > 1000, (
        up,
        p0,
    )  # 0.8 s at 5 kpps, less the catch-up
    assert p0.tx_frames - p0.tx_unsent == p0.if_tx_frames
    assert up.lost == p0.tx_unsent and up.rx_frames == p0.if_tx_frames, (up, p0)
    assert p1.rx_frames == p1.if_rx_frames
    causes = {c.cause: c.frames for c in up.loss_causes}
    assert causes == {"tester_tx_unsent": up.lost} and up.loss_unexplained == 0, up.loss_causes
