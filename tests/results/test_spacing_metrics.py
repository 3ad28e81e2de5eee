"""A result's spacing becomes store metrics, and a drop in it fails ``results check``."""

from __future__ import annotations

from tgen_tui.cli import main
from tgen_tui.results.metrics import CHECKED, extract
from tgen_tui.results.models import RunResult
from tgen_tui.results.record import record_run

from .rs_helpers import result


def _spaced(within: float | None, mae: float = 3_000.0) -> dict:
    r = result()
    r["streams"]["up"]["spacing"] = {
        "asked_gap_ns": 100_000.0,
        "gaps": 19_999,
        "mean_gap_ns": 100_000.0,
        "mae_ns": mae,
        "within_10pct": within,
        "p50_ns": 100_352.0,
        "p99_ns": 180_224.0,
        "ks": None,
        "law": "constant",
    }
    return r


def test_spacing_is_a_stream_and_run_metric_and_survives_the_model():
    doc = _spaced(0.971)
    rows = {(s, n, m): v for s, n, m, v in extract(doc)}
    assert rows[("stream", "up", "spaced_pct")] == rows[("run", "", "spaced_pct")] == 97.1
    assert rows[("stream", "up", "gap_mae_ns")] == 3_000.0
    assert ("stream", "up", "gap_ks") not in rows  # None: not stored
    assert "spaced_pct" in CHECKED
    back = RunResult.model_validate(doc).to_doc()
    assert back["streams"]["up"]["spacing"]["within_10pct"] == 0.971
    none = {(s, n, m) for s, n, m, _ in extract(_spaced(None))}
    assert ("run", "", "spaced_pct") not in none  # no asked gap: no share
    assert not any(m == "spaced_pct" for _, _, m, _ in extract(result()))  # older results


def test_check_flags_a_drop_in_spacing_by_build(db, capsys):
    record_run(_spaced(0.97), db=str(db), dut="natbox", build="b1")
    record_run(_spaced(0.95), db=str(db), dut="natbox", build="b2")  # 2 points: within 5
    assert main(["results", "check", "--db", str(db)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    record_run(_spaced(0.80), db=str(db), dut="natbox", build="b3")
    assert main(["results", "check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "spaced median fell by 15.00 points since build b2" in out, out
    args = ["results", "check", "--spacing-points", "20", "--db", str(db)]
    assert main(args) == 0, capsys.readouterr().out
