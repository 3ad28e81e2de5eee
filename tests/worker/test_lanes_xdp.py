"""AF_XDP per lane (tgen_tui.worker.fanout.open_lane_tx): lane L binds queue L, so two
lanes send on one veth with two queues; on a one-queue veth lane 1 is refused with a
message that says what to do."""

from __future__ import annotations

import pytest

from tgen_tui.packets.lanes import Lane, LaneBuilder
from tgen_tui.worker.fanout import open_lane_tx
from tgen_tui.worker.netns import netns
from tgen_tui.worker.txpath import open_tx

from .wk_helpers import make_program, sh

pytestmark = pytest.mark.root


def _spec(lane: int, lanes: int = 2) -> dict:
    return {"lane": {"lane": lane, "lanes": lanes, "block": 1}}


def test_two_lanes_bind_their_own_queue_and_send(veth):
    qa, qb = veth.if_a[:-1] + "q", veth.if_b[:-1] + "r"
    sh("ip", "-n", veth.ns_a, "link", "add", qa, "numtxqueues", "2", "numrxqueues", "2",
       "type", "veth", "peer", "name", qb, "numtxqueues", "2", "numrxqueues", "2",
       "netns", veth.ns_b)  # fmt: skip
    for ns, ifn in ((veth.ns_a, qa), (veth.ns_b, qb)):
        sh("ip", "-n", ns, "link", "set", ifn, "up")
    prog = make_program(size=60)
    txs = []
    try:
        with netns(veth.ns_a):
            for lane in (0, 1):
                txs.append(open_lane_tx(open_tx, qa, "af_xdp", {"max_batch": 256}, _spec(lane)))
        assert [t.kind for t in txs] == ["af_xdp", "af_xdp"]
        sent = 0
        for lane, tx in enumerate(txs):
            buf, lens = LaneBuilder(prog, Lane(lane, 2, 1), max_batch=256).build(0, 200)
            m = 0
            while m < 200:
                m += tx.send(buf[m:200], lens[m:200])
            sent += m
    finally:
        for t in txs:
            t.close()
    out = sh("ip", "netns", "exec", veth.ns_b, "cat", f"/sys/class/net/{qb}/statistics/rx_packets")
    assert sent == 400 and int(out.stdout) >= 400


def test_a_second_lane_on_a_one_queue_veth_is_refused_with_the_remedy(veth):
    with netns(veth.ns_a):
        tx0 = open_lane_tx(open_tx, veth.if_a, "af_xdp", {"max_batch": 64}, _spec(0))
        try:
            with pytest.raises(OSError, match="give the interface 2 queues"):
                open_lane_tx(open_tx, veth.if_a, "af_xdp", {"max_batch": 64}, _spec(1))
        finally:
            tx0.close()
