"""The results store without a lab: records, migration, failures, and the `tgen results` verbs
on result documents of the ``tgen run --json`` shape."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import xml.etree.ElementTree as ET

import pytest

from tgen_tui.cli import main
from tgen_tui.results import store
from tgen_tui.results.record import record_run

from .rs_helpers import result


def tgen(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_record_run_stores_every_metric_in_one_complete_record(db):
    r = result(9_000.0, tx_pps=10_000.0, p99_ns=70_000.0)
    rid = record_run(r, db=str(db), dut="natbox", build="v2.1", params={"duration": 2})
    assert rid == 1
    conn = store.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    run = store.get_run(conn, rid)
    assert (run["dut"], run["build"], run["dut_source"], run["test"]) == (
        "natbox",
        "v2.1",
        "option",
        "run",
    )
    assert (
        run["profile_hash"] == "ab" * 32 and run["seed"] == 5 and run["params"] == {"duration": 2}
    )
    head = store.run_metrics(conn, rid)
    assert head["rx_pps"] == 9_000.0 and head["tx_pps"] == 10_000.0
    assert head["loss_pct"] == pytest.approx(10.0) and head["lost"] == 2_000
    assert head["p99_ns"] == 70_000.0 and head["conntrack_peak"] == 64
    scoped = {(m["scope"], m["name"], m["metric"]): m["value"] for m in run["metrics"]}
    assert scoped[("port", "p1", "rx_frames")] == 18_000
    assert scoped[("stream", "up", "lost")] == 2_000
    assert run["n_metrics"] == len(run["metrics"]) > 40
    assert run["result"]["streams"]["up"]["rx_frames"] == 18_000
    assert store.verify(conn) == []


def test_default_labels_unknown_without_lab_and_kernel_with_lab(db):
    conn_rows = []
    for src in ("none", "netns:x1-dut"):
        rid = record_run(result(dut_source=src), db=str(db), build=None)
        conn_rows.append(store.get_run(store.connect(db), rid))
    assert (conn_rows[0]["dut"], conn_rows[0]["build"], conn_rows[0]["dut_source"]) == (
        "unknown",
        "unknown",
        "unknown",
    )
    u = os.uname()
    assert (conn_rows[1]["dut"], conn_rows[1]["build"], conn_rows[1]["dut_source"]) == (
        u.release,
        u.version,
        "lab",
    )


def test_unwritable_database_warns_once_and_returns_none(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert record_run(result(), db=str(blocker / "sub" / "r.db")) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tgen: warning: result not stored")
    not_db = tmp_path / "junk.db"
    not_db.write_bytes(b"this is not sqlite" * 100)
    assert record_run(result(), db=str(not_db)) is None
    assert "not stored" in capsys.readouterr().err
    assert record_run(result(), db=str(tmp_path / "n.db"), no_store=True) is None
    assert not (tmp_path / "n.db").exists()


def test_migrates_a_version_1_database(tmp_path, capsys):
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    # the version-1 layout, written by hand as an old tgen would have
    old.executescript(
        """
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (1);
        CREATE TABLE runs (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, dut TEXT NOT NULL,
            build TEXT NOT NULL, profile TEXT, profile_hash TEXT, result TEXT NOT NULL);
        """
    )
    for i, (build, rx) in enumerate((("v2.1", 7_383_070.0), ("v2.2", 8_029_181.0))):
        old.execute(
            "INSERT INTO runs (started_at, dut, build, profile, profile_hash, result)"
            " VALUES (?, 'dpdk-nat', ?, 'lab', ?, ?)",
            (
                f"2026-01-0{i + 1}T10:00:00+00:00",
                build,
                "ab" * 32,
                json.dumps(result(rx, tx_pps=rx)),
            ),
        )
    old.commit()
    old.close()

    conn = store.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == store.SCHEMA_VERSION
    runs = store.list_runs(conn, newest_first=False)
    assert [(r["build"], r["test"], r["partial"]) for r in runs] == [
        ("v2.1", "run", 0),
        ("v2.2", "run", 0),
    ]
    assert store.run_metrics(conn, runs[1]["id"])["rx_pps"] == 8_029_181.0
    assert store.verify(conn) == []
    conn.close()
    # the migrated database takes new runs and answers the verbs
    rid = record_run(
        result(7_414_833.0, tx_pps=7_414_833.0), db=str(path), dut="dpdk-nat", build="v2.3"
    )
    assert rid == 3
    rc, out, _ = tgen(capsys, "results", "compare", "v2.1", "v2.2", "--db", str(path))
    assert rc == 0 and "+8.8 %" in out and "rx pps" in out


def test_newer_schema_is_refused_with_one_line(tmp_path, capsys):
    path = tmp_path / "new.db"
    c = sqlite3.connect(path)
    c.executescript(
        "CREATE TABLE schema_version (version INTEGER); INSERT INTO schema_version VALUES (99);"
    )
    c.commit()
    c.close()
    rc, _, err = tgen(capsys, "results", "list", "--db", str(path))
    assert rc == 3 and err.count("\n") == 1 and "schema version 99" in err
    assert record_run(result(), db=str(path)) is None
    assert "schema version 99" in capsys.readouterr().err


def test_list_shows_the_socket_flows_goodput_beside_the_frames(db, capsys):
    frames = record_run(result(), db=str(db), build="b1")
    flows = result()
    flows["transport"] = {"streams": {"bulk": {"protocol": "tcp", "goodput_bps": 1.18e9}}}
    flows["metrics"] = {"goodput_bps": 1.18e9}
    both = record_run(flows, db=str(db), build="b2")
    rc, out, _ = tgen(capsys, "results", "list", "--db", str(db))
    assert rc == 0
    head, *rows = [ln for ln in out.splitlines() if ln.strip()]
    assert head.split()[-2:] == ["goodput", "flags"]
    by_id = {int(ln.split()[0]): ln for ln in rows}
    assert "1.2 Gbit/s" in by_id[both] and "Gbit/s" not in by_id[frames]


def test_bad_input_and_missing_database_exit_codes(db, capsys, tmp_path):
    rc, _, err = tgen(capsys, "results", "list", "--db", str(tmp_path / "none.db"))
    assert rc == 3 and "no results database" in err and "Traceback" not in err
    record_run(result(), db=str(db), dut="d", build="b1")
    rc, _, err = tgen(capsys, "results", "show", "42", "--db", str(db))
    assert rc == 2 and err.strip() == f"tgen: error: no run 42 in {db} (see: tgen results list)"
    rc, _, err = tgen(capsys, "results", "list", "--since", "yesterday", "--db", str(db))
    assert rc == 2 and "--since" in err
    rc, _, err = tgen(capsys, "results", "check", "--db", str(db))
    assert rc == 2 and "nothing to check against" in err
    rc, _, err = tgen(capsys, "results", "trend", "bogus_metric", "--db", str(db))
    assert rc == 2 and "unknown metric" in err
    rc, _, err = tgen(
        capsys, "results", "trend", "rx_pps", "--output", str(tmp_path / "x.gif"), "--db", str(db)
    )
    assert rc == 2 and ".svg or .png" in err


def _builds(db, spec: dict[str, list[float]], dut: str = "natbox") -> None:
    for build, rates in spec.items():
        for rx in rates:
            record_run(result(rx, tx_pps=max(rx, 10_000.0)), db=str(db), dut=dut, build=build)


def test_check_with_repeats_names_metric_change_and_spread(db, capsys):
    _builds(
        db,
        {
            "b1": [10_000.0, 9_990.0, 10_010.0],
            "b2": [10_000.0, 10_010.0, 9_990.0],
            "b3": [9_180.0, 9_190.0, 9_185.0],
        },
    )
    rc, out, _ = tgen(
        capsys, "results", "check", "--build", "b2", "--against", "b1", "--db", str(db)
    )
    assert rc == 0, out
    assert "no regression" in out
    rc, out, _ = tgen(capsys, "results", "check", "--build", "b3", "--db", str(db))
    assert rc == 1
    assert "rx pps median fell 8.2 % since build b2 (beyond 3 × the spread)" in out
    assert "loss median rose by 8.15 points since build b2 (beyond 3 × the spread)" in out
    assert "variance" not in out
    # the spread can hide a change that is beyond the bound: no regression then
    _builds(db, {"b4": [9_000.0, 10_000.0, 8_000.0]})
    _builds(db, {"b5": [8_400.0, 9_600.0, 8_300.0]})
    rc, out, _ = tgen(capsys, "results", "check", "--metric", "rx_pps", "--db", str(db))
    assert rc == 0, out
    # a threshold is an option
    rc, out, _ = tgen(
        capsys,
        "results",
        "check",
        "--build",
        "b2",
        "--against",
        "b1",
        "--max-change",
        "0",
        "--spread-factor",
        "0",
        "--metric",
        "rx_pps",
        "--db",
        str(db),
    )
    assert rc == 0  # b2's median equals b1's: no change the bad way at all


def test_check_flags_variance_growth(db, capsys):
    for build, p99s in (("k1", [50e3, 52e3, 51e3, 49e3]), ("k2", [50e3, 250e3, 60e3, 400e3])):
        for p in p99s:
            record_run(result(10_000.0, p99_ns=p), db=str(db), dut="kern", build=build)
    rc, out, _ = tgen(capsys, "results", "check", "--db", str(db))
    assert rc == 1
    line = next(x for x in out.splitlines() if "p99 variance" in x)
    assert line.startswith("latency p99 variance grew ") and "since build k1" in line
    rc, out, _ = tgen(capsys, "results", "check", "--variance-growth", "1e9", "--db", str(db))
    assert "variance" not in out


def test_compare_shows_medians_spreads_and_change(db, capsys):
    _builds(db, {"b1": [10_000.0, 9_900.0, 10_100.0], "b2": [8_000.0, 8_100.0, 7_900.0]})
    rc, out, _ = tgen(capsys, "results", "compare", "b1", "b2", "--db", str(db))
    assert rc == 0
    row = next(x for x in out.splitlines() if x.strip().startswith("rx pps"))
    assert "10.0 kpps" in row and "8.0 kpps" in row and "±100 pps" in row
    assert "-20.0 %" in row and "yes (> 3 × spread), worse" in row
    rc, out, _ = tgen(capsys, "results", "compare", "1", "4", "--json", "--db", str(db))
    doc = json.loads(out)
    rx = next(m for m in doc["metrics"] if m["metric"] == "rx_pps")
    assert rx["a_median"] == 10_000.0 and rx["b_median"] == 8_000.0 and rx["beyond_spread"] is None


def test_trend_terminal_plot_and_svg(db, capsys, tmp_path):
    _builds(db, {"v2.1": [7_383_070.0], "v2.2": [8_029_181.0], "v2.3": [7_414_833.0]}, dut="dpdk")
    svg = tmp_path / "t.svg"
    rc, out, _ = tgen(
        capsys, "results", "trend", "rx_pps", "--dut", "dpdk", "-o", str(svg), "--db", str(db)
    )
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("rx pps (pps) by build: DUT dpdk")
    assert sum(x.count("●") for x in lines if not x.startswith("●")) == 3
    assert any("v2.1" in x and "v2.2" in x and "v2.3" in x for x in lines)
    assert any("Mpps" in x for x in lines)
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(f"{ns}text")]  # matplotlib, svg.fonttype none
    assert texts.count("n=1") == 3  # one build, one sample each
    assert "v2.2" in texts and any("Mpps" in (t or "") for t in texts)
    assert "7.4 Mpps" in texts and "8.0 Mpps" in texts  # round ticks, one scale
    png = tmp_path / "t.png"
    rc, out, err = tgen(capsys, "results", "trend", "rx_pps", "-o", str(png), "--db", str(db))
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # the optional dependency is missing: one line, exit 3
        assert rc == 3 and "matplotlib" in err and not png.exists()
    else:
        assert rc == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_export_csv_and_json(db, capsys, tmp_path):
    _builds(db, {"b1": [10_000.0], "b2": [9_000.0]})
    rc, out, _ = tgen(capsys, "results", "export", "--csv", "--db", str(db))
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and [r["build"] for r in rows] == ["b1", "b2"]
    assert float(rows[1]["rx_pps"]) == 9_000.0 and float(rows[1]["loss_pct"]) == pytest.approx(10.0)
    rc, out, _ = tgen(capsys, "results", "export", "--json", "--build", "b2", "--db", str(db))
    doc = json.loads(out)
    assert len(doc) == 1 and doc[0]["result"]["streams"]["up"]["rx_frames"] == 18_000


def test_trials_are_stored_raw_and_repeats_give_the_spread(db, capsys):
    trials = [{"rate_pps": 1e4, "rx": 9_990, "search": True}] + [
        {"repeat": i, "metrics": {"throughput_fps": v}}
        for i, v in enumerate((81_000, 80_000, 82_000))
    ]
    r = result() | {"metrics": {"throughput_fps": 81_000.0}}
    rid = record_run(r, db=str(db), dut="d", build="b1", test="rfc2544", trials=trials)
    conn = store.connect(db)
    stored = store.get_run(conn, rid)["trials"]
    assert [t.pop("schema_version") for t in stored] == [1] * len(trials)  # typed records
    assert stored == trials
    r2 = result() | {"metrics": {"throughput_fps": 70_000.0}}
    trials2 = [{"repeat": i, "throughput_fps": v} for i, v in enumerate((70_000, 69_000, 71_000))]
    record_run(r2, db=str(db), dut="d", build="b2", test="rfc2544", trials=trials2)
    rc, out, _ = tgen(capsys, "results", "compare", "1", "2", "--db", str(db))
    row = next(x for x in out.splitlines() if "throughput fps" in x)
    assert "±1.0 kpps" in row and "-13.6 %" in row and "yes" in row
    rc, out, _ = tgen(capsys, "results", "check", "--db", str(db))
    assert (
        rc == 1
        and "throughput fps median fell 13.6 % since build b1 (beyond 3 × the spread)" in out
    )


def test_results_core_never_imports_textual():
    import subprocess
    import sys

    code = (
        "import sys, tgen_tui.results.record, tgen_tui.results.analysis, tgen_tui.results.plot, "
        "tgen_tui.commands.results_cmd; print('textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
