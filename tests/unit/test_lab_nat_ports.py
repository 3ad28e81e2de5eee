"""The lab's NAT port mode (``--nat-ports``) and the help of ``tgen lab set`` (no root)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tgen_tui.diagnostics import BadInput
from tgen_tui.lab.config import LabConfig
from tgen_tui.lab.nftables import ruleset


def test_random_nat_ports_is_snat_fully_random():
    assert "snat to 198.19.0.1\n" in ruleset() and "random" not in ruleset()
    assert "snat to 198.19.0.1 fully-random\n" in ruleset(nat_ports="random")
    assert LabConfig(nat_ports="random").validated().nat_ports == "random"
    with pytest.raises(BadInput, match="nat_ports"):
        LabConfig(nat_ports="sometimes").validated()


@pytest.mark.parametrize("verb", ["up", "set"])
def test_lab_help_prints(verb):
    cp = subprocess.run(
        [sys.executable, "-m", "tgen_tui", "lab", verb, "--help"], capture_output=True, text=True
    )
    assert cp.returncode == 0, cp.stderr
    assert "--nat-ports {preserve,random}" in cp.stdout and "Traceback" not in cp.stderr
