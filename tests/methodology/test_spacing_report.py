"""Methodology reports state the spacing their trials had (methodology/kit/spacing.py)."""

from __future__ import annotations

from tgen_tui.methodology.kit.output import search_lines
from tgen_tui.methodology.kit.spacing import pooled, share, spacing_text
from tgen_tui.methodology.procedures.mlr.output import search_lines as mlr_lines
from tgen_tui.methodology.procedures.rfc2544.output import loss_tables
from tgen_tui.results.models import (
    GoalResult,
    LossCurve,
    LossPoint,
    LossReport,
    Search,
    SearchReport,
    SearchTrial,
    SpacingResult,
    Trial,
)


def _sp(gaps: int, within: float | None, mean: float = 100_000.0) -> SpacingResult:
    return SpacingResult(
        asked_gap_ns=100_000.0, gaps=gaps, mean_gap_ns=mean, within_10pct=within, law="constant"
    )


def _trial(rate: float, passed: bool = True, **streams: SpacingResult) -> Trial:
    t = Trial(rate_pps=rate, passed=passed)
    t.extra.spacing = dict(streams) or None
    return t


def test_pooled_over_trials_is_gap_weighted_and_names_the_worst_stream():
    a = _trial(10_000, up=_sp(1000, 0.9), down=_sp(1000, 0.99))
    b = _trial(10_000, up=_sp(3000, 0.5, mean=110_000.0), down=_sp(1000, 0.97))
    per = pooled([a, b])
    assert per["up"] == (0.6, 107_500.0, 4000)
    assert share([a, b]) == 0.6
    assert spacing_text([a, b]) == (
        "60.0 % of gaps within 10 % of the asked gap (worst stream up, mean gap 107.5 us)"
    )
    assert spacing_text([_trial(1.0)]) is None  # no spacing recorded (older trials)
    unknown = _trial(1.0, up=_sp(10, None))
    assert spacing_text([unknown]) == "asked gap unknown; mean gap 100.0 us (stream up)"


def test_rfc2544_search_and_loss_and_mlr_report_lines():
    s = Search(
        l_pps=10_000,
        h_pps=12_000,
        status="ok",
        max_rate=20_000,
        error=1,
        n_trials={"search": 2},
        trials=[_trial(12_000, False, up=_sp(10, 0.1)), _trial(10_000, up=_sp(100, 0.97))],
    )
    lines = search_lines([s])
    assert lines[1] == (
        "    spacing at l: 97.0 % of gaps within 10 % of the asked gap "
        "(worst stream up, mean gap 100.0 us)"
    )
    point = LossPoint(load_pct=100, rate_pps=10_000, flr_pct=0.0, trial=_trial(1, up=_sp(9, 0.5)))
    rep = LossReport(
        test="rfc2544-loss", frame_loss=[LossCurve(frame_size=64, max_rate=1, points=[point])]
    )
    rows = dict(loss_tables(rep)[0][3])
    assert rows["spaced ±10 % (%)"] == ["50.0"]
    mlr = SearchReport(
        test="search",
        goals=[GoalResult(name="ndr", relevant_lower_bound_pps=10_000, regular=True)],
        trials=[SearchTrial(rate_pps=10_000, passed=True, extra={"spacing": {"up": _sp(5, 0.8)}})],
    )
    assert (
        "goal ndr: spacing at the RLB (10,000 fps): 80.0 % of gaps within 10 % of the asked gap "
        "(worst stream up, mean gap 100.0 us)"
    ) in mlr_lines(mlr)
