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
    assert h.times(fine)[0] == 10.1 and h.times(fine)[-1] == 70.0
    # one mean a second: seconds 0..59 sent (second 0 has 9 samples, t 0.1..0.9); second 60
    # has t 60.0 (the last sending sample) and 9 idle ones; second 70 is still open
    pts = h.values(("tx", "p0"), coarse)
    assert pts == [1000.0] * 60 + [100.0] + [0.0] * 9
    assert h.times(coarse) == [s + 0.5 for s in range(70)]
    lost = h.values(("lost", "p0"), fine)
    assert round(lost[-1]) == 70
    assert h.values(("p50", "up"), fine)[-1] is None  # no latency yet: a gap, not a zero
    assert h.values(("ct", ""), fine)[-1] is None  # no DUT probe


def test_a_clear_is_not_negative_loss() -> None:
    h = History()
    h.add(_snap(1.0, 0.0, 500))
    h.add(_snap(1.1, 0.0, 0))  # counters cleared
    assert h.values(("lost", "p0"), WINDOWS[0]) == [0.0, 0.0]


def test_columns_place_samples_by_time() -> None:
    # 0.2 s of a 60 s window: both samples in the last point
    assert columns([5.0, 7.0], [10.0, 10.1], 60, 60) == [None] * 59 + [6.0]
    t = [i / 10 for i in range(600)]
    assert columns([1.0] * 600, t, 60, 60) == [1.0] * 60
    # sampled at 2 Hz instead of 10 Hz: still 60 s wide, empty points between samples
    t2 = [i / 2 for i in range(120)]
    pts = columns([3.0] * 120, t2, 60, 240)
    assert pts[-1] == 3.0 and pts.count(3.0) == 120 and pts.count(None) == 120
    assert [nice_top(v) for v in (0, 3, 20_001, 65_536)] == [1.0, 5.0, 50_000.0, 100_000.0]


def test_a_chart_squeezed_to_its_legend_draws_no_plot():
    """Four rows and a legend that wraps to three lines leave no plot row: no IndexError."""
    from tgen_tui.ui.charts import Chart, Line, TimeBase

    lines = [Line(f"stream-{i} p99", [float(i)] * 10, "red") for i in range(8)]
    strips = Chart("Latency", "µs")._draw(lines, TimeBase(list(range(10)), 60.0), "60 s",
                                          None, str, "", 33, 4)  # fmt: skip
    assert 0 < len(strips) <= 4


def test_the_requested_rate_is_drawn_only_where_it_changes() -> None:
    """A shaped stream's port gets a "req" line that Tx follows; a constant one does not."""
    from tgen_tui.ui.charts import pps_lines

    def snap(t: float, req: float) -> StatsSnapshot:
        port = PortStats(name="p0", interface="p0", netns=None, state="running", tx_pps=req,
                         requested_pps=req)  # fmt: skip
        return StatsSnapshot(t=t, seq=int(t * 10), ports=(port,), streams=(), workers=())

    const, shaped = History(), History()
    for i in range(1, 31):
        const.add(snap(i / 10, 20_000.0))
        shaped.add(snap(i / 10, 10_000.0 if i <= 15 else 50_000.0))
    fine = WINDOWS[0]
    assert [ln.label for ln in pps_lines(const, ["p0"], fine)] == ["p0 tx", "p0 rx"]
    lines = pps_lines(shaped, ["p0"], fine)
    assert [ln.label for ln in lines] == ["p0 req", "p0 tx", "p0 rx"]
    assert list(lines[0].values)[-16:] == [10_000.0] + [50_000.0] * 15
