"""Figures under faults (issue 36), as pure functions: a receive gap that lasts to the end
is the outage, "not recovered"; frames a tester port could not put on the wire are the
tester's loss cause; a stream is counted only on its rx_port."""

from __future__ import annotations

import numpy as np

from tgen_tui.engine import flowstats as FS
from tgen_tui.engine.snapshot import StreamStats
from tgen_tui.engine.stats import StreamCtx
from tgen_tui.worker import counters as C

S = 1_000_000_000


def _tx(first_s: float, last_s: float) -> np.ndarray:
    row = np.zeros(C.TX_STRIDE, dtype=np.int64)
    row[C.T_FIRST_TX_NS], row[C.T_LAST_TX_NS] = int(first_s * S), int(last_s * S)
    return row


def _rx_table(gap_s: float, gap_at_s: float, last_s: float) -> np.ndarray:
    t = np.zeros((1, 1, C.RX_STRIDE), dtype=np.int64)
    t[0, 0, C.R_MAX_GAP] = int(gap_s * S)
    t[0, 0, C.R_GAP_START] = int(gap_at_s * S)
    t[0, 0, C.R_LAST_RX_NS] = int(last_s * S)
    return t


def _read(gap_s: float, gap_at_s: float, last_s: float) -> FS.FlowRead:
    fr = FS.FlowRead(1)
    fr.add(
        np.zeros((0, C.FLOW_STRIDE), dtype=np.int64), (), _rx_table(gap_s, gap_at_s, last_s)[0:1]
    )
    return fr


SC = StreamCtx("up", 0, "p0", "p1")


def _st(rx: int, lost: int) -> StreamStats:
    return StreamStats("up", 0, "p0", "p1", rx_frames=rx, lost=lost, tx_frames=rx + lost)


def test_a_gap_that_lasts_to_the_end_is_the_outage_not_recovered():
    # sent from t=100 s to 110 s; the last frame arrived at 103 s; a 12 ms gap before
    fr = _read(0.012, 101.0, 103.0)
    st = fr.apply(_st(300, 700), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 7000.0 and st.outage_at_s == 3.0 and st.outage_recovered is False
    assert FS.outage_note(st.outage_recovered) == " (not recovered)"


def test_a_gap_that_ended_stays_the_outage_and_recovered():
    fr = _read(1.02, 102.0, 109.999)  # frames came back after 1.02 s, to the end
    st = fr.apply(_st(9000, 1000), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 1020.0 and st.outage_at_s == 2.0 and st.outage_recovered is True


def test_no_loss_no_tail_and_live_tails_need_a_quarter_second():
    fr = _read(0.001, 101.0, 109.9)  # the last 0.1 s of frames lost at the end, settled
    st = fr.apply(_st(9990, 10), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 100.0 and st.outage_recovered is False
    st = fr.apply(_st(10000, 0), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=True)
    assert st.outage_ms == 1.0 and st.outage_recovered is True  # nothing lost: no tail
    live = fr.apply(_st(10000, 0), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=False)
    assert live.outage_ms == 1.0  # live, 0.1 s behind: frames still on the way
    fr = _read(0.001, 101.0, 109.5)
    live = fr.apply(_st(10000, 0), SC, 1, 1, 100.0, _tx(100.0, 110.0), settled=False)
    assert live.outage_ms == 500.0 and live.outage_recovered is False  # an outage going on


def test_a_stream_that_never_arrived_was_out_all_the_time():
    fr = _read(0, 0, 0)
    st = fr.apply(_st(0, 5000), SC, 1, 1, 100.0, _tx(100.5, 110.0), settled=True)
    assert st.outage_ms == 9500.0 and st.outage_at_s == 0.5 and st.outage_recovered is False
    none = fr.apply(_st(0, 5000), StreamCtx("x", 0, "p0", None), 1, 1, 100.0, _tx(100, 110), True)
    assert none.outage_ms is None  # not expected anywhere: no outage


def test_the_dut_event_line_says_not_recovered():
    from tgen_tui.engine.dut_events import attach_outages, event_line

    recs = [
        {"command": "ip link set d1 down", "at_s": 2.0, "end_s": 2.02, "took_ms": 20, "ok": True}
    ]
    attach_outages(
        recs, {"up": {"outage_ms": 7000.0, "outage_at_s": 2.01, "outage_recovered": False}}
    )
    assert recs[0]["outage_recovered"] is False
    assert event_line(recs[0]).endswith("outage 7000.0 ms (up, not recovered)")
