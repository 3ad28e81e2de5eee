"""Loss attribution in methodology: a trial records its loss causes and the drop counters
that moved; a report's drops table sums them per interface and counter."""

from __future__ import annotations

import pytest
import trio

from tgen_tui.methodology.kit.drops import drops_summary, drops_table, unexplained_total
from tgen_tui.methodology.kit.trial import TrialRunner
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile_text
from tgen_tui.results.models import Report, Trial

from .lab_profiles import forward_profile


@pytest.fixture
def dropping_lab(make_lab):
    """A NAT lab whose DUT drops 2 % of forwarded frames (an nft rule)."""
    with make_lab("nat", "m", drop_percent=2.0) as prefix:
        yield prefix


@pytest.mark.root
def test_a_trial_records_its_loss_causes_and_drops(dropping_lab) -> None:
    compiled = compile_profile(load_profile_text(forward_profile(dropping_lab), "p.yaml"))
    runner = TrialRunner(compiled, timeout_s=0.2, settle_s=0.0)

    async def one():
        return await runner.run(8000, "search", duration_s=1.0, early_stop=False)

    t = trio.run(one)
    assert t.lost > 50  # 2 % of 8,000
    causes = {c.cause: c for c in t.extra.loss_causes["up"]}
    cause = causes.pop("nft_rule_drop")
    assert cause.where == "dut"
    # a loaded host (CI) may add its own, each named: the tester's queue, ring or interface,
    # or the softnet backlog of the cores the lab shares; never anything else
    load = ("tester_tx_unsent", "tester_ring_drop", "tester_if_drop", "backlog_drop")
    assert set(causes) <= set(load), causes
    lost = t.lost - sum(c.frames for c in causes.values())
    assert cause.frames >= 0.99 * lost and t.extra.loss_unexplained["up"] <= 0.01 * t.lost
    rule = next(r for r in t.extra.drops if r.cause == "nft_rule_drop")
    assert rule.matched == cause.frames and rule.frames == rule.matched + rule.excess
    report = Report(test="t", drops=drops_summary([t]), loss_unexplained=unexplained_total([t]))
    ((title, header, cols, rows),) = drops_table(report)
    assert rows[0][0] == f"dut: {rule.counter}" and rows[0][1][0] == rule.frames


def test_drops_summary_sums_per_interface_and_counter() -> None:
    def trial(frames: int, unexplained: int) -> Trial:
        return Trial.model_validate({
            "rate_pps": 1.0,
            "extra": {
                "drops": [
                    {"where": "d1", "counter": "qdisc tbf 1: drops", "cause": "qdisc_drop",
                     "frames": frames, "matched": frames, "excess": 0},
                    {"where": "d1", "counter": "qdisc tbf 1: overlimits",
                     "cause": "qdisc_overlimit", "frames": 7, "matched": None, "excess": None},
                ],
                "loss_unexplained": {"up": unexplained},
            },
        })  # fmt: skip

    trials = [trial(100, 1), trial(50, 0), Trial(rate_pps=1.0)]
    s = drops_summary(trials)
    assert s[0].to_doc() == {"where": "d1", "counter": "qdisc tbf 1: drops",
                             "cause": "qdisc_drop", "frames": 150, "matched": 150, "excess": 0,
                             "trials": 2}  # fmt: skip
    assert s[1].frames == 14 and s[1].matched is None
    assert unexplained_total(trials) == 1
    report = Report(test="t", drops=s, loss_unexplained=1)
    ((title, header, cols, rows),) = drops_table(report)
    assert title.startswith("Drops per interface and counter") and cols[0] == "frames"
    assert rows[0] == ("d1: qdisc tbf 1: drops", [150, 150, 0, 2])
    assert rows[-1] == ("unexplained loss (no counter)", [1, None, None, None])
    assert drops_table(Report(test="t", drops=[])) == []
