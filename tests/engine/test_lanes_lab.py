"""Sender lanes on real workers in a real NAT lab (tgen_tui.engine.lanes): two lanes on
p0 count exactly what the interfaces count, lose nothing, reorder and duplicate nothing;
a unique permutation of 65,536 port pairs split over two lanes creates exactly 65,536
conntrack entries on the DUT in one cycle (each tuple once)."""

from __future__ import annotations

import pytest
import trio

from tgen_tui.engine.controller import open_engine
from tgen_tui.engine.options import EngineOptions
from tgen_tui.lab import topology as lab
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile_text

from .engine_helpers import profile_yaml, stream_yaml, wait_sent


def _lanes_profile(prefix: str, streams: str, lanes: int = 2):
    text = profile_yaml(prefix, streams)
    old = f"p0: {{interface: p0, netns: {prefix}-tester}}"
    assert old in text
    text = text.replace(old, f"p0: {{interface: p0, netns: {prefix}-tester, lanes: {lanes}}}")
    return compile_profile(load_profile_text(text))


@pytest.mark.trio
async def test_two_lanes_on_p0_count_exactly(nat_lab):
    # lab.yaml's shape: "down" is the reply traffic to the NAT's public address, on the
    # ports that "up" opened, once the mappings exist
    down = stream_yaml(
        "down", "p1", rx_port="p0", pps=2000, src_ports="7", extra="    schedule: {start: 300ms}"
    ).replace("dst_port: 7", "dst_port: {min: 10000, max: 10063, mode: inc}")
    streams = stream_yaml("up", "p0", rx_port="p1", pps=6000) + down
    c = _lanes_profile(nat_lab, streams)
    async with open_engine(c, EngineOptions(interval=0.1, drain_ms=300, cores=[0, 1])) as eng:
        plan = eng.plan_text()
        assert plan[0].startswith("worker 0: core 0: port p0 lane 0/2: streams up")
        assert plan[1].startswith("worker 1: core 1: port p0 lane 1/2: streams up")
        assert len(eng.workers) == 3
        await eng.start()
        await wait_sent(eng, {"up": 3001, "down": 200})
        await eng.stop()
        snap = await eng.final_snapshot()
        # stop, clear, start: every lane's rx row is cleared, also on p1, whose one
        # receiver has no lanes of its own (a stale row read lane 1's new frames as
        # duplicates and out of order, and its old highest seq as loss)
        await eng.clear()
        await eng.start()
        await wait_sent(eng, {"up": 2001})
        await eng.stop()
        again = (await eng.final_snapshot()).stream("up")
    assert again.tx_frames > 2000 and again.rx_frames == again.tx_frames
    assert (again.lost, again.out_of_order, again.duplicates) == (0, 0, 0)
    p0, p1 = snap.port("p0"), snap.port("p1")
    assert p0.tx_frames == p0.if_tx_frames and p1.rx_frames == p1.if_rx_frames
    assert p1.tx_frames == p1.if_tx_frames and p0.rx_frames == p0.if_rx_frames
    up, down = snap.stream("up"), snap.stream("down")
    assert up.tx_frames == p0.tx_frames > 3000  # both lanes sent
    for s in (up, down):
        assert (s.lost, s.out_of_order, s.duplicates) == (0, 0, 0), s.name
        assert s.rx_frames == s.tx_frames, s.name
        assert s.latency_ns.min is not None and s.latency_ns.min >= 0
    # the two p0 lane workers each received a share (fanout), not every frame twice
    assert p0.rx_frames == down.rx_frames
    assert [(w.id, w.lane, w.lanes) for w in snap.workers] == [(0, 0, 2), (1, 1, 2), (2, 0, 1)]


@pytest.mark.trio
async def test_unique_permutation_over_two_lanes_creates_each_tuple_once(nat_lab):
    streams = stream_yaml(
        "perm",
        "p0",
        rx_port="p1",
        pps=25000,
        src_ports="{min: 1024, max: 1279, mode: unique}",
        extra="    mode: {type: burst, count: 65536}",
    ).replace("dst_port: 7", "dst_port: {min: 2000, max: 2255, mode: unique}")
    c = _lanes_profile(nat_lab, streams)
    assert c.streams[0].unique_space == 65536
    d_ns = lab.dut_netns(nat_lab)
    before = lab.conntrack_count(d_ns)
    async with open_engine(c, EngineOptions(drain_ms=300, cores=[0, 1])) as eng:
        await eng.start()
        with trio.fail_after(20):
            while not eng.ports_done_sending():
                await trio.sleep(0.1)
        await eng.stop()
        snap = await eng.final_snapshot()
    s = snap.stream("perm")
    assert s.tx_frames == 65536 and snap.port("p0").if_tx_frames == 65536
    assert lab.conntrack_count(d_ns) - before == 65536


def _sig_match(stream: int, seq: int) -> str:
    """An nft match on the signature of a 64-byte UDP frame: its stream index and seq,
    little-endian, at bytes 16 and 18 of the transport header (tgen_tui.packets.program)."""
    s = int.from_bytes(stream.to_bytes(2, "little"), "big")
    q = int.from_bytes(seq.to_bytes(4, "little"), "big")
    return f"udp dport 7 @th,128,16 {s:#06x} @th,144,32 {q:#010x}"


@pytest.mark.trio
async def test_one_frame_duplicated_and_one_dropped_on_one_lane(nat_lab):
    """A rule on the DUT drops lane 1's frame 12 and duplicates its frame 7 (nft ``dup``:
    the copy goes straight to p1): each is counted once, as lost and as a duplicate."""
    from tgen_tui.lab import commands
    from tgen_tui.lab.naming import D1

    streams = stream_yaml(
        "up", "p0", rx_port="p1", pps=4000, extra="    mode: {type: burst, count: 2000}"
    )
    c = _lanes_profile(nat_lab, streams)
    lane1 = 0 + 1 * 1  # the stream's index + lane * block (one stream in the profile)
    rules = f"""
table ip i23lanes {{
  chain lanefwd {{
    type filter hook forward priority -10; policy accept;
    {_sig_match(lane1, 12)} counter drop
    {_sig_match(lane1, 7)} counter dup to 198.19.0.2 device {D1}
  }}
}}
"""
    d_ns = lab.dut_netns(nat_lab)
    commands.run(["nft", "-f", "-"], input=rules, netns=d_ns)
    async with open_engine(c, EngineOptions(drain_ms=300, cores=[0, 1])) as eng:
        await eng.start()
        with trio.fail_after(20):
            while not eng.ports_done_sending():
                await trio.sleep(0.1)
        await eng.stop()
        snap = await eng.final_snapshot()
    up, p1 = snap.stream("up"), snap.port("p1")
    assert up.tx_frames == 2000
    # on a loaded machine p1's RX ring may overflow (rx_drops) or the DUT drop: those
    # frames are lost too, and said so by the counters; the rule's frame is always one more
    elsewhere = (2000 - p1.if_rx_frames) + p1.rx_drops
    assert up.lost == 1 + elsewhere
    assert (up.duplicates, up.out_of_order) == (1, 0)
    if elsewhere == 0:  # the usual case
        assert up.rx_frames == 2000  # 1999 unique + the duplicate
    counters = commands.run(["nft", "list", "table", "ip", "i23lanes"], netns=d_ns).stdout
    assert counters.count("counter packets 1 bytes") == 2  # each rule hit exactly one frame


@pytest.mark.trio
async def test_clear_while_two_lanes_send_leaves_no_phantom_loss(nat_lab):
    """A clear resets every lane's rx rows and sums the lanes' sequence floors: after it,
    while sending and once stopped, nothing is lost, duplicated or out of order."""
    c = _lanes_profile(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=4000))
    async with open_engine(c, EngineOptions(drain_ms=300, cores=[0, 1])) as eng:
        await eng.start()
        await wait_sent(eng, {"up": 1000})
        await eng.clear()
        live = await wait_sent(eng, {"up": 1000})  # counted from the clear
        await eng.stop()
        snap = await eng.final_snapshot()
    assert live.stream("up").lost == 0
    up = snap.stream("up")
    # frames in flight at the clear arrive after the rx baseline but were sent before the
    # tx one, so rx may exceed tx by those (as with one lane); none is lost or doubled
    assert up.tx_frames > 0 and up.rx_frames >= up.tx_frames
    assert (up.lost, up.duplicates, up.out_of_order) == (0, 0, 0)


@pytest.mark.trio
async def test_af_xdp_lanes_bind_their_queue_and_split_odd_flows(nat_lab):
    """The lab's veths have a queue per CPU: lane 1's AF_XDP socket binds queue 1 of p0
    (on a one-queue veth it is refused). 63 flows over 2 lanes (a flow split: 32 + 31
    flows), 10 cycles: every frame sent once, the DUT sees each flow once."""
    streams = stream_yaml(
        "odd",
        "p0",
        rx_port="p1",
        pps=5000,
        src_ports="{min: 20000, max: 20062, mode: inc}",
        extra="    mode: {type: burst, count: 630}",
    )
    text = profile_yaml(nat_lab, streams)
    old = f"p0: {{interface: p0, netns: {nat_lab}-tester}}"
    new = f"p0: {{interface: p0, netns: {nat_lab}-tester, lanes: 2, tx_path: af_xdp}}"
    c = compile_profile(load_profile_text(text.replace(old, new)))
    d_ns = lab.dut_netns(nat_lab)
    before = lab.conntrack_count(d_ns)
    async with open_engine(c, EngineOptions(drain_ms=300, cores=[0, 1])) as eng:
        await eng.start()
        with trio.fail_after(20):
            while not eng.ports_done_sending():
                await trio.sleep(0.1)
        await eng.stop()
        snap = await eng.final_snapshot()
    s, p0, p1 = snap.stream("odd"), snap.port("p0"), snap.port("p1")
    assert s.tx_frames == p0.tx_frames == p0.if_tx_frames == 630
    assert s.rx_frames == p1.rx_frames == p1.if_rx_frames == 630
    assert (s.lost, s.out_of_order, s.duplicates) == (0, 0, 0)
    assert lab.conntrack_count(d_ns) - before == 63
