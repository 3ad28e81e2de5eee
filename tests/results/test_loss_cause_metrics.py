"""A result's loss attribution becomes store metrics (results/metrics.py)."""

from __future__ import annotations

from tgen_tui.results.metrics import CATALOGUE, extract
from tgen_tui.results.models import RunResult


def test_loss_causes_are_stream_metrics_and_survive_the_model() -> None:
    doc = {
        "duration_s": 1.0,
        "streams": {
            "up": {
                "tx_frames": 1000,
                "rx_frames": 900,
                "lost": 100,
                "loss_causes": [
                    {"cause": "qdisc_drop", "counter": "qdisc tbf 1: drops", "where": "d1", "frames": 60},
                    {"cause": "nft_rule_drop", "counter": "nft ip t c handle 4 drop", "where": "dut", "frames": 30},
                    {"cause": "nft_rule_drop", "counter": "nft ip t c handle 5 drop", "where": "dut", "frames": 8},
                ],
                "loss_unexplained": 2,
            },
            "old": {"tx_frames": 10, "rx_frames": 10, "lost": 0},  # stored before: no rows
        },
    }  # fmt: skip
    rows = {(s, n, m): v for s, n, m, v in extract(doc)}
    assert rows[("stream", "up", "loss_unexplained")] == 2
    assert rows[("stream", "up", "loss_cause.qdisc_drop")] == 60
    assert rows[("stream", "up", "loss_cause.nft_rule_drop")] == 38
    assert not any(n == "old" and m.startswith("loss_") for _, n, m in rows)
    assert CATALOGUE["loss_unexplained"].better == "lower"
    back = RunResult.model_validate(doc).to_doc()
    assert back["streams"]["up"]["loss_causes"][0]["frames"] == 60
    assert back["streams"]["up"]["loss_unexplained"] == 2
