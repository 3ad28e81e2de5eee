"""`tgen run` refuses, before any environment check, what it could not honour."""

from __future__ import annotations

import pytest

from tgen_tui.cli import main


@pytest.mark.parametrize(
    ("event", "words"),
    [
        ("15s: nft -f r.nft", "at 15 s, but the run sends for 10 s"),  # would never run
        ("5s ls", "give TIME: COMMAND"),
    ],
)
def test_a_dut_event_outside_the_run_or_malformed_is_bad_input(event, words, capsys):
    assert main(["run", "profiles/lab.yaml", "-d", "10", "--dut-event", event]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_an_event_without_a_gap_of_its_own_reports_a_bound_not_zero():
    """Each stream keeps only its longest gap: a second event's outage is not known."""
    from tgen_tui.engine.dut_events import attach_outages, event_line

    recs = [{"at_s": 2.0, "end_s": 2.1, "command": "a", "took_ms": 100, "ok": True},
            {"at_s": 6.0, "end_s": 6.1, "command": "b", "took_ms": 100, "ok": True}]  # fmt: skip
    streams = {"up": {"outage_ms": 300.0, "outage_at_s": 6.05}}
    attach_outages(recs, streams)
    assert recs[1]["outage_ms"] == 300.0 and recs[1]["outage_stream"] == "up"
    assert recs[0]["outage_ms"] is None and recs[0]["outage_at_most_ms"] == 300.0
    assert "at most 300.0 ms" in event_line(recs[0])
    attach_outages(recs, {"up": {"outage_ms": None, "outage_at_s": None}})
    assert recs[0]["outage_ms"] == 0.0 and "no outage" in event_line(recs[0])
