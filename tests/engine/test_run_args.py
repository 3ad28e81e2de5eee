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
