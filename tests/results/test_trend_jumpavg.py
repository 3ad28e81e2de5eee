"""Issue 33, Must show 4 (stored synthetic runs): a history of 12 builds, 3 repeats each, with
0.5 % noise, where build 8 drops 6 % and build 11 recovers. `tgen results trend` and
`tgen results check` group it with jumpavg and report the regression at b8 and the
progression at b11, and no change anywhere else; the fixed bound keeps its verdicts."""

from __future__ import annotations

import random
import re

import pytest

from tgen_tui.cli import main
from tgen_tui.results import trending as T
from tgen_tui.results.record import record_run

from .rs_helpers import result

OFFERED = 11_000.0  # the tester offers more than the DUT forwards (an MRR-like run)
FORWARDED = 10_000.0


def tgen(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def rx_of(build: int) -> float:
    return FORWARDED * (0.94 if 8 <= build <= 10 else 1.0)


@pytest.fixture
def history(db):
    """b1..b12 under DUT natbox, 3 repeats each (fixed seed), started an hour apart."""
    rng = random.Random(33)
    for b in range(1, 13):
        for rep in range(3):
            rx = rng.gauss(rx_of(b), 0.005 * rx_of(b))
            r = result(rx, tx_pps=OFFERED)
            r["started_at"] = f"2026-01-01T{b:02d}:{10 * rep:02d}:00+00:00"
            record_run(r, db=str(db), dut="natbox", build=f"b{b}")
    return db


def _group_rows(out: str) -> list[list[str]]:
    """The rows of the 'trend (jumpavg)' table: [span, samples, ..., verdict, ...]."""
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("trend (jumpavg)"))
    rows = []
    for x in lines[start + 2 :]:
        if not x.startswith("  "):
            break
        rows.append(x.split())
    return rows


def test_trend_reports_the_regression_at_8_and_the_progression_at_11(history, capsys):
    rc, out, _ = tgen(capsys, "results", "trend", "rx_pps", "--db", str(history))
    assert rc == 0, out
    assert "trend (jumpavg): 12 builds in 3 group(s)" in out
    rows = _group_rows(out)
    assert [(r[0], r[1]) for r in rows] == [("b1..b7", "21"), ("b8..b10", "9"), ("b11..b12", "6")]
    # [span, samples, avg, unit, stdev, unit, change, %, verdict, gain, bits, confidence...]
    assert [r[8] for r in rows] == ["-", "regression", "progression"]
    drop = float(rows[1][6])
    rise = float(rows[2][6])
    assert -7.0 < drop < -5.0 and 5.0 < rise < 7.5
    for r in rows[1:]:
        assert float(r[9]) > 10  # gain in bits: a clear change
        assert r[11] == ">99.99"
    last = next(x for x in out.splitlines() if x.startswith("rx pps: last group"))
    assert last.startswith("rx pps: last group b11..b12: progression +")
    assert "against b8..b10" in last
    # the fixed bound next to it: only b8 moved the bad way beyond 5 %
    fixed = out.splitlines()[out.splitlines().index(last) + 1 :]
    assert fixed[0].endswith("1 regression(s)")
    assert fixed[1].startswith("  b8: rx pps median fell ") and "since build b7" in fixed[1]


def test_trend_direction_comes_from_the_metric(history, capsys):
    """Loss is lower-better: its rise at b8 is the regression, its fall at b11 the progression;
    the tester's own rate never changed: one group."""
    rc, out, _ = tgen(capsys, "results", "trend", "loss_pct", "--db", str(history))
    assert rc == 0
    rows = _group_rows(out)
    assert [r[0] for r in rows] == ["b1..b7", "b8..b10", "b11..b12"]
    assert [r[8] for r in rows] == ["-", "regression", "progression"]
    assert rows[1][6].startswith("+") and rows[1][7] == "pt"  # loss in points
    rc, out, _ = tgen(capsys, "results", "trend", "tx_pps", "--db", str(history))
    assert rc == 0
    assert [r[0] for r in _group_rows(out)] == ["b1..b12"]
    assert "tx pps: no change over 12 builds (one group)" in out


def test_check_reports_the_changes_next_to_the_fixed_bound(history, capsys):
    rc, out, _ = tgen(capsys, "results", "check", "--db", str(history))
    # the fixed bound: b12 against b11 did not regress; its output is as before
    assert rc == 0, out
    assert out.splitlines()[0].startswith("DUT natbox: build b12 (3 run(s)) against build b11")
    assert "no regression" in out.splitlines()[0]
    sec = out[out.index("trend (jumpavg)") :].splitlines()
    assert sec[0].startswith("trend (jumpavg) over 12 builds, b1..b12")
    rx = _metric_block(sec, "rx pps")
    assert rx[0].startswith("rx pps: last group b11..b12: progression +")
    assert [re.match(r"(\w+) at build (\w+)", x).groups() for x in rx[1:]] == [
        ("regression", "b8"),
        ("progression", "b11"),
    ]
    loss = _metric_block(sec, "loss")
    assert [re.match(r"(\w+) at build (\w+)", x).groups() for x in loss[1:]] == [
        ("regression", "b8"),
        ("progression", "b11"),
    ]
    for label in ("tx pps", "achieved rate", "latency p50", "latency p99"):
        assert _metric_block(sec, label) == [f"{label}: no change over 12 builds (one group)"]
    # b8 itself: the fixed bound flags it (exit 1) and jumpavg puts b8 in a new group
    rc, out, _ = tgen(capsys, "results", "check", "--build", "b8", "--db", str(history))
    assert rc == 1
    assert "rx pps median fell" in out and "since build b7" in out
    sec = out[out.index("trend (jumpavg)") :].splitlines()
    assert sec[0].startswith("trend (jumpavg) over 8 builds, b1..b8")
    rx = _metric_block(sec, "rx pps")
    assert rx[0].startswith("rx pps: last group b8: regression -")
    # --fail-on-trend: jumpavg's regression of the newest group fails the check too
    rc, out, _ = tgen(
        capsys, "results", "check", "--build", "b9", "--against", "b8", "--db", str(history)
    )
    assert rc == 0 and "rx pps: last group b8..b9: regression" in out
    rc, out, _ = tgen(
        capsys,
        "results",
        "check",
        "--build",
        "b9",
        "--against",
        "b8",
        "--fail-on-trend",
        "--db",
        str(history),
    )
    assert rc == 1
    assert out.splitlines()[-1].startswith("jumpavg: the newest group regressed (rx pps, loss)")


def _metric_block(sec: list[str], label: str) -> list[str]:
    """A metric's lines in check's section: its summary, then one line per change."""
    i = next(i for i, x in enumerate(sec) if x.startswith(f"  {label}: "))
    out = [sec[i].strip()]
    for x in sec[i + 1 :]:
        if not x.startswith("    "):
            break
        out.append(x.strip())
    return out


def test_detect_plain_data():
    rng = random.Random(1)
    hist = [
        (f"b{b}", [rng.gauss(rx_of(b), 0.005 * rx_of(b)) for _ in range(3)]) for b in range(1, 13)
    ]
    t = T.detect("rx_pps", hist)
    assert [g.span for g in t.groups] == ["b1..b7", "b8..b10", "b11..b12"]
    assert [g.kind for g in t.groups] == ["first", "regression", "progression"]
    assert t.groups[1].change_pct == pytest.approx(-6.0, abs=1.0)
    assert not t.regressed and t.last is t.groups[2]
    # all equal (no loss anywhere), a negative value, nothing at all
    flat = T.detect("loss_pct", [("a", [0.0, 0.0]), ("b", [0.0])])
    assert len(flat.groups) == 1 and flat.last is None and flat.note is None
    assert T.detect("x_pct", [("a", [-1.0]), ("b", [2.0])]).note.startswith("negative")
    assert T.detect("rx_pps", [("a", [])]).note == "no samples"
    # a metric without a direction changes, it does not regress
    t = T.detect("gap_ks", [("a", [0.1, 0.1, 0.11]), ("b", [0.5, 0.52, 0.5])])
    assert [g.kind for g in t.groups] == ["first", "change"]


def test_a_coin_toss_boundary_is_unsure_and_flags_nothing(db, capsys):
    """Seen on the lab with one run per build: jumpavg splits 9.33 % from 9.76 % loss at
    0.1 bits (52 %): shown as 'unsure', flagged only under a lower --min-confidence."""
    loss = {"b1": 0.0, "b2": 0.0, "b3": 9.331, "b4": 9.759, "b5": 0.0}
    t = T.detect("loss_pct", [(b, [v]) for b, v in loss.items()])
    assert [g.kind for g in t.groups] == ["first", "regression", "unsure", "progression"]
    assert [g.builds[0] for g in t.flagged] == ["b3", "b5"]
    assert 0.5 < t.groups[2].confidence < 0.6
    assert "(under 99 %: not flagged)" in T.describe(t, t.groups[2])
    t = T.detect("loss_pct", [(b, [v]) for b, v in loss.items()], min_confidence=0.5)
    assert [g.kind for g in t.groups] == ["first", "regression", "regression", "progression"]
    # the same through the verbs: stored runs with that loss, and the option's range
    for i, (b, v) in enumerate(loss.items()):
        r = result(10_000.0 * (1 - v / 100), tx_pps=10_000.0)
        r["started_at"] = f"2026-01-0{i + 1}T00:00:00+00:00"
        record_run(r, db=str(db), dut="lab", build=b)
    rc, out, _ = tgen(capsys, "results", "trend", "loss_pct", "--db", str(db))
    assert rc == 0
    assert [r[8] for r in _group_rows(out)] == ["-", "regression", "unsure", "progression"]
    rc, out, _ = tgen(capsys, "results", "check", "--db", str(db))
    assert re.search(r"\n    unsure at build b4: \+0\.4\d pt .*\(under 99 %: not flagged\)\n", out)
    for argv, words in (
        (["trend", "loss_pct", "--min-confidence", "120"], "--min-confidence: 120: give"),
        (["check", "--min-confidence", "nan"], "--min-confidence: nan: give"),
        (["check", "--history", "-1"], "--history: -1: give 0"),
    ):
        rc, _, err = tgen(capsys, "results", *argv, "--db", str(db))
        assert rc == 2 and err.startswith(f"tgen: error: {words}"), err
