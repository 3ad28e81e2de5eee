"""Typed results: every document the store holds goes through its model, keeps its
shape, and carries a schema_version (documents of 468ed7a have none: they migrate)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tgen_tui.methodology.registry import PROCEDURES, procedure, scaled
from tgen_tui.results import models, store
from tgen_tui.results.record import record_run

from .rs_helpers import result

FIXTURE = Path(__file__).parent / "data" / "store-468ed7a.sqlite"


def _old_docs() -> list[tuple[int, str, dict]]:
    conn = sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True)
    try:
        return [
            (i, t, json.loads(r)) for i, t, r in conn.execute("SELECT id, test, result FROM runs")
        ]
    finally:
        conn.close()


def test_run_result_models_what_build_result_wrote():
    (_, _, doc), *_ = _old_docs()
    assert "schema_version" not in doc
    r = models.RunResult.model_validate(doc)
    assert r.schema_version == models.SCHEMA_VERSION
    assert r.ports["p0"].tx_pps_mean > 0 and r.streams["up"].latency_ns.p99 == 69632.0
    assert r.dut is not None and r.dut.conntrack_rise == 256
    back = r.to_doc()
    assert back.pop("schema_version") == 1 and back == doc  # same fields, same values


@pytest.mark.parametrize("rid,test,doc", _old_docs(), ids=lambda x: str(x)[:24])
def test_every_old_document_migrates_on_read_and_keeps_its_shape(rid, test, doc):
    m = models.parse_result(test, doc)
    assert type(m) is models.model_for(test) and m.schema_version == 1
    back = json.loads(json.dumps(m.to_doc(), default=str))
    back.pop("schema_version")
    assert back == doc


def test_reports_are_typed():
    docs = {t: d for _, t, d in _old_docs()}
    tp = models.parse_result("rfc2544-throughput", docs["rfc2544-throughput"])
    first = tp.by_frame_size[0].searches[0].trials[0]  # what was stored, not a default
    assert tp.summary.median == 5000 and (first.kind, first.rate_pps) == ("upper_bound", 20000)
    cap = models.parse_result("rfc9693-capacity", docs["rfc9693-capacity"])
    assert (cap.capacity.capacity, cap.capacity.h_connections) == (5000, 6000)
    sc = models.parse_result("scaleup-rfc2544-throughput", docs["scaleup-rfc2544-throughput"])
    assert [r.cores for r in sc.rows] == [1, 2]


def test_stored_trials_read_typed_and_keep_their_shape():
    docs = {t: d for _, t, d in _old_docs()}
    tp = models.parse_result("rfc2544-throughput", docs["rfc2544-throughput"])
    first = tp.by_frame_size[0].searches[0].trials[0]
    assert isinstance(first, models.Trial) and first.verdict == "fail"
    up = first.extra.streams["up"]
    assert (up.tx_frames, up.latency_ns.p99, up.latency_source) == (3750, 106496.0, "kernel")
    assert first.extra.ports["p1"].if_rx_frames == first.rx_frames == 1035
    assert first.extra.conntrack.rise == 0 and first.extra.early_stop_at_s == 0.182
    cps = models.parse_result("rfc9693-cps", docs["rfc9693-cps"])
    final = cps.searches[0].trials[-1]
    assert isinstance(final.extra.phase2, models.Phase2Trial)
    assert final.extra.phase2.through_nat and final.extra.learned.tuples > 0
    raw = docs["rfc2544-throughput"]["by_frame_size"][0]["searches"][0]["trials"][0]
    assert first.to_doc() == raw  # verdict and loss_pct as stored, nothing added


def test_a_trial_made_here_writes_every_field_and_its_verdict():
    t = models.Trial(rate_pps=1000, tx_frames=200, rx_frames=150, lost=50)
    t.extra.conntrack = models.ConntrackCounts(before=0, after=150, rise=150)
    d = t.to_doc()
    assert set(models.TRIAL_FIELDS) <= set(d) and d["stopped_early"] is False
    assert (d["verdict"], d["loss_pct"]) == ("fail", 25.0)
    assert d["extra"] == {"conntrack": {"before": 0, "after": 150, "rise": 150}}
    t.valid = False
    assert t.to_doc()["verdict"] == "invalid"
    t.extra.streams = {"up": models.StreamCounts(tx_frames=200)}
    bare = t.without_streams()
    assert "streams" not in bare.to_doc()["extra"] and t.extra.streams  # a copy
    assert bare.to_doc()["verdict"] == "invalid"


def test_the_store_writes_and_reads_through_the_models(db):
    trials = [{"rate_pps": 1000, "kind": "search", "passed": True, "search": 0}]
    rid = record_run(result(), db=str(db), dut="d", build="b", trials=trials)
    conn = store.connect(db)
    raw = json.loads(conn.execute("SELECT result FROM runs WHERE id = ?", (rid,)).fetchone()[0])
    assert raw["schema_version"] == 1
    typed = store.read_result(conn, rid)
    assert isinstance(typed, models.RunResult) and typed.streams["up"].rx_frames == 20_000
    (t,) = store.read_trials(conn, rid)
    assert isinstance(t, models.TrialRecord) and t.rate_pps == 1000 and t.search == 0


def test_every_procedure_is_registered_and_has_a_report_model():
    names = {"throughput", "loss", "latency", "pdv", "cps", "capacity", "teardown", "scaleup"}
    names.add("sweep")  # tgen sweep (issue 22)
    names.add("search")  # tgen search (RFC 9971)
    names |= {"app-cps", "app-concurrent"}  # tgen rfc9411 cps / concurrent (issue 35)
    assert set(PROCEDURES) == names
    for p in PROCEDURES.values():
        assert procedure(p.test) is p and procedure(p.name) is p
        if p.name != "scaleup":  # each test's report has its own model
            assert models.model_for(p.test) is not models.RunResult
    assert procedure("scaleup-rfc9693-cps").name == "scaleup"
    assert scaled("scaleup-rfc9693-cps").name == "cps"
    with pytest.raises(KeyError):
        procedure("rfc2544-bogus")


def test_a_document_its_model_rejects_still_reads(db):
    rid = record_run(result(), db=str(db), dut="d", build="b")
    conn = store.connect(db)
    bad = {"ports": "not a mapping", "profile_hash": "x"}
    conn.execute("UPDATE runs SET result = ? WHERE id = ?", (json.dumps(bad), rid))
    conn.execute("INSERT INTO trials VALUES (?, 0, ?)", (rid, '{"kind": "search_result"}'))
    run = store.get_run(conn, rid)
    assert run["result"]["ports"] == "not a mapping" and run["trials"][0]["kind"]


def test_the_scaleup_verb_offers_the_registry_scalable_procedures():
    from tgen_tui.commands.methodology_cmds import SCALABLE
    from tgen_tui.methodology.registry import scalable

    assert list(SCALABLE) == [p.test for p in scalable()]
