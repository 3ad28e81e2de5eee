"""learn: true reply streams (issue 22) and sender lanes (issue 23): a lane receives only
its fanout share of the port's frames, so it would learn (or verify) only a share of the
flows. The learning port and the verifying port have one lane: ``lanes:`` on them is bad
input (file:line:field, exit 2); ``--lanes N`` leaves them one lane and says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LAB = (Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml").read_text()


def _learn_profile(lanes_port: str | None = None) -> str:
    text = LAB.replace(
        "    schedule: {start: 500ms}", "    schedule: {start: 500ms}\n    learn: true"
    )
    assert "learn: true" in text
    if lanes_port:
        line = f"  {lanes_port}: {{interface: {lanes_port}, netns: tgen-tester, speed: 10G}}"
        assert line in text
        text = text.replace(line, line[:-1] + ", lanes: 2}")
    return text


@pytest.mark.parametrize(("port", "field"), [("p1", "port"), ("p0", "rx_port")])
def test_validate_refuses_lanes_on_a_learn_true_streams_ports(tmp_path, port, field):
    path = tmp_path / "learn.yaml"
    path.write_text(_learn_profile(port))
    r = subprocess.run(
        [sys.executable, "-m", "tgen_tui", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert f"{path}:" in lines[0] and f"streams[1].{field}" in lines[0]
    assert f"port {port} has lanes: 2" in lines[0] and "learn: true" in lines[0]


def test_validate_accepts_lanes_on_other_ports_of_a_learn_profile(tmp_path):
    text = _learn_profile()
    text = text.replace(
        "  p1: {interface: p1",
        "  p2: {interface: p2, netns: tgen-tester, lanes: 2}\n  p1: {interface: p1",
    )
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    r = subprocess.run(
        [sys.executable, "-m", "tgen_tui", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


def test_lanes_option_keeps_one_lane_on_learn_ports_and_says_so():
    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.engine.setup import Setup
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile_text

    compiled = compile_profile(load_profile_text(_learn_profile()))
    s = Setup.build(compiled, EngineOptions(cores=[0, 1], lanes=2))
    assert (s.ports["p0"].lanes, s.ports["p1"].lanes) == (1, 1)
    assert len(s.plans) == 2 and s.n_streams == 2
    assert (
        "--lanes 2: port p0, p1 keeps one lane (it learns tuples, verifies flows or sends "
        "flows in blocks: each lane would see only its share)"
    ) in s.warnings
    plain = Setup.build(compiled, EngineOptions(cores=[0, 1]))
    assert not any("keeps one lane" in w for w in plain.warnings)
