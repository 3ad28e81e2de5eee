"""The trio engine on real workers in a real lab: start/stop, stop-all, stop while starting,
a worker crash, and no process left behind. Marked per test (no global trio mode)."""

from __future__ import annotations

import os
import signal

import psutil
import pytest
import trio

from tgen_tui.engine.api import EngineCommandError
from tgen_tui.engine.controller import open_engine
from tgen_tui.engine.options import EngineOptions
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile_text

from .engine_helpers import profile_yaml, stream_yaml, wait_sent


@pytest.fixture(scope="module")
def nat_lab(make_lab):
    """One NAT lab for this module: its tests only send through the DUT and read counts
    that start at each run (the DUT's settings are never changed here; a test that
    changes them brings up a lab of its own)."""
    with make_lab("nat", "e") as prefix:
        yield prefix


def _compiled(prefix: str, streams: str, dut: bool = True):
    return compile_profile(load_profile_text(profile_yaml(prefix, streams, dut=dut)))


def _children() -> set[int]:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}


async def _wait_for(pred, timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not pred():
            await trio.sleep(0.05)


@pytest.mark.trio
async def test_start_stop_one_port_counts_match(nat_lab):
    c = _compiled(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=3000))
    before = _children()
    async with open_engine(c, EngineOptions(interval=0.1, drain_ms=300)) as eng:
        pids = {st.pid for st in eng.states.values()}
        assert pids and pids <= _children()
        await eng.start(["p0"])
        assert eng.ports["p0"].state == "running"
        assert eng.ports["p1"].state == "idle"
        await wait_sent(eng, {"up": 1001})
        await eng.stop(["p0"])
        assert eng.ports["p0"].state == "stopped"
        snap = await eng.final_snapshot()
    p0, p1, up = snap.port("p0"), snap.port("p1"), snap.stream("up")
    assert p0.tx_frames > 1000
    assert p0.tx_frames == p0.if_tx_frames  # worker count equals the kernel's
    assert p1.rx_frames == p1.if_rx_frames
    assert up.tx_frames == p0.tx_frames
    assert up.rx_frames == up.tx_frames  # through the NAT DUT, nothing lost at 3 kfps
    assert up.lost == 0 and up.duplicates == 0
    assert up.latency_ns.min is not None and up.latency_ns.min >= 0
    assert up.latency_ns.p50 > 0
    assert up.latency_ns.p99 >= up.latency_ns.p50 >= up.latency_ns.min
    assert snap.dut is not None and snap.dut.conntrack_peak >= 64
    # every worker reaped
    assert not (pids & _children())
    assert _children() <= before


@pytest.mark.trio
async def test_start_all_stop_all(nat_lab):
    streams = stream_yaml("up", "p0", rx_port="p1", pps=2000) + stream_yaml(
        "down", "p1", rx_port="p0", pps=1000, src_ports="7", extra=""
    )
    c = _compiled(nat_lab, streams)
    async with open_engine(c, EngineOptions(drain_ms=200)) as eng:
        await eng.start()
        assert {p.state for p in eng.ports.values()} == {"running"}
        await wait_sent(eng, {"up": 801, "down": 401})
        await eng.stop()
        assert {p.state for p in eng.ports.values()} == {"stopped"}
        snap = await eng.final_snapshot()
    assert snap.stream("up").tx_frames > 800
    assert snap.stream("down").tx_frames > 400
    assert snap.port("p0").tx_frames == snap.port("p0").if_tx_frames
    assert snap.port("p1").tx_frames == snap.port("p1").if_tx_frames


@pytest.mark.trio
async def test_stop_while_starting_does_not_hang(nat_lab):
    c = _compiled(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=5000))
    async with open_engine(c, EngineOptions(drain_ms=100)) as eng:
        with trio.fail_after(5):
            async with trio.open_nursery() as n:
                n.start_soon(eng.start)
                n.start_soon(eng.stop)
            await eng.stop()  # whatever the interleaving, a second stop settles it
        assert eng.ports["p0"].state in ("stopped", "idle")
        snap = await eng.final_snapshot()
        assert snap.port("p0").tx_frames == snap.port("p0").if_tx_frames


@pytest.mark.trio
async def test_worker_crash_marks_port_failed_and_other_port_keeps_sending(direct_lab):
    streams = stream_yaml("a", "p0", rx_port="p1", nat=False, pps=2000) + stream_yaml(
        "b", "p1", rx_port="p0", nat=False, pps=2000, src_ports="7"
    )
    c = _compiled(direct_lab, streams, dut=False)
    async with open_engine(c, EngineOptions(drain_ms=100)) as eng:
        assert len(eng.workers) == 2
        await eng.start()
        await wait_sent(eng, {"a": 1, "b": 1})
        victim = eng.states[eng.ports["p0"].spec.worker]
        os.kill(victim.pid, signal.SIGKILL)
        await _wait_for(lambda: eng.ports["p0"].state == "failed")
        assert "SIGKILL" in (eng.ports["p0"].failure or "")
        s1 = await eng.sample_now()
        s2 = await wait_sent(eng, {"b": s1.stream("b").tx_frames + 500})  # still sending
        assert eng.ports["p1"].state == "running"
        assert s2.port("p1").tx_frames > s1.port("p1").tx_frames + 500
        await eng.stop()
        assert eng.ports["p1"].state == "stopped"
        assert any("failed" in e for e in eng.events)


@pytest.mark.trio
async def test_set_rate_and_clear(nat_lab):
    c = _compiled(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=1000))
    async with open_engine(c, EngineOptions(drain_ms=200)) as eng:
        await eng.start()
        await wait_sent(eng, {"up": 1})
        await eng.set_rate("up", 4000)
        assert eng.requested_pps(0) == 4000
        s = await wait_sent(eng, {"up": 2001})
        assert s.stream("up").requested_pps == 4000
        await eng.clear()
        s2 = await eng.sample_now()
        assert s2.stream("up").tx_frames < s.stream("up").tx_frames
        await eng.set_rate("p0", 2000)  # a port total scales its streams
        assert eng.requested_pps(0) == 2000
        with pytest.raises(EngineCommandError, match="nope: no such stream"):
            await eng.set_rate("nope", 10)
        await eng.stop()
        fin = await eng.final_snapshot()
    up = fin.stream("up")
    # frames in flight at clear() were sent before it and received after it
    assert up.tx_frames > 0 and up.rx_frames >= up.tx_frames and up.lost == 0


@pytest.mark.trio
async def test_vlan_and_qinq_arrive_tagged_and_counted_per_stream(direct_lab, tmp_path):
    import subprocess

    streams = stream_yaml(
        "v35", "p0", rx_port="p1", nat=False, pps=500, extra="    vlan: [{id: 35, pcp: 3}]\n"
    ) + stream_yaml(
        "qinq",
        "p0",
        rx_port="p1",
        nat=False,
        pps=500,
        src_ports="20000",
        extra="    vlan: [{id: 100}, {id: 200}]\n",
    ).replace("size: 64", "size: 80")
    c = _compiled(direct_lab, streams, dut=False)
    pcap = tmp_path / "p1.pcap"
    cap = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            f"{direct_lab}-tester",
            "tshark",
            "-q",
            "-i",
            "p1",
            "-w",
            str(pcap),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # dumpcap writes the file's header once it captures on the interface
        with trio.fail_after(30):
            while not (pcap.exists() and pcap.stat().st_size > 0):
                assert cap.poll() is None, "tshark ended before it captured"
                await trio.sleep(0.05)
        async with open_engine(c, EngineOptions(drain_ms=200)) as eng:
            await eng.start(["p0"])
            await wait_sent(eng, {"v35": 301, "qinq": 301})
            await eng.stop()
            fin = await eng.final_snapshot()
        await trio.sleep(0.5)
    finally:
        cap.terminate()
        cap.wait(timeout=10)
    v35, qq = fin.stream("v35"), fin.stream("qinq")
    assert v35.tx_frames > 300 and v35.rx_frames == v35.tx_frames and v35.lost == 0
    assert qq.tx_frames > 300 and qq.rx_frames == qq.tx_frames and qq.lost == 0
    assert v35.vlan_tci is not None and v35.vlan_tci & 0xFFF == 35 and v35.vlan_tci >> 13 == 3
    assert qq.vlan_tci is not None and qq.vlan_tci & 0xFFF == 100
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-T",
            "fields",
            "-e",
            "ieee8021ad.id",
            "-e",
            "vlan.id",
            "-e",
            "udp.srcport",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    tags = {}
    for line in out:
        if line.strip():
            outer, ids, sport = line.split("\t")
            tags.setdefault(",".join(x for x in (outer, ids) if x), set()).add(sport)
    assert "35" in tags  # single tag
    assert "100,200" in tags  # QinQ: outer 802.1ad 100, inner 802.1Q 200, as configured
    assert tags["100,200"] == {"20000"}
