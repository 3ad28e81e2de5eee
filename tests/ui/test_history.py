"""The charts' history rings and the chart's sampling: counts, not pictures."""

from __future__ import annotations

from tgen_tui.engine.snapshot import PortStats, StatsSnapshot, StreamStats
from tgen_tui.ui.charts import columns, nice_top
from tgen_tui.ui.history import FINE, WINDOWS, History


def _snap(t: float, tx: float, lost: int) -> StatsSnapshot:
    port = PortStats(name="p0", interface="p0", netns=None, state="running", tx_pps=tx)
    stream = StreamStats(name="up", index=0, port="p0", rx_port="p1", lost=lost)
    return StatsSnapshot(t=t, seq=int(t * 10), ports=(port,), streams=(stream,), workers=())


def test_rings_fine_coarse_and_lost_per_second() -> None:
    h = History()
    for i in range(1, 701):  # 70 s at 10 Hz; 7 frames lost per sample = 70 frames/s
        h.add(_snap(i / 10, 1000.0 * (i <= 600), 7 * i))
    fine, coarse = WINDOWS
    tx = h.values(("tx", "p0"), fine)
    assert len(tx) == FINE and tx[-1] == 0.0 and tx[0] == 1000.0  # the oldest 10 s dropped out
    assert h.values(("tx", "p0"), coarse)[:60] == [1000.0] * 60  # one mean a second
    assert h.values(("tx", "p0"), coarse)[60:] == [0.0] * 10
    lost = h.values(("lost", "p0"), fine)
    assert round(lost[-1]) == 70
    assert h.values(("p50", "up"), fine)[-1] is None  # no latency yet: a gap, not a zero
    assert h.values(("ct", ""), fine)[-1] is None  # no DUT probe


def test_a_clear_is_not_negative_loss() -> None:
    h = History()
    h.add(_snap(1.0, 0.0, 500))
    h.add(_snap(1.1, 0.0, 0))  # counters cleared
    assert h.values(("lost", "p0"), WINDOWS[0]) == [0.0, 0.0]


def test_columns_place_short_history_at_the_right() -> None:
    pts = columns([5.0, 7.0], span=600, dots=60)  # 0.2 s of a 60 s window
    assert pts[:-1] == [None] * 59 and pts[-1] == 6.0
    assert columns([1.0] * 600, span=600, dots=60) == [1.0] * 60
    assert [nice_top(v) for v in (0, 3, 20_001, 65_536)] == [1.0, 5.0, 50_000.0, 100_000.0]
