"""A stream's rate over time on the real lab (root): three steps through the NAT send
exactly the integral of the shape, every frame arrives, and the requested rate of the
NDJSON samples is the step's (counts and values only; the per-second rates on the wire
are measured in benchmarks/rate_shape.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

TGEN = [sys.executable, "-m", "tgen_tui"]


def _profile(prefix: str, tmp: Path, shape: str, pacing: str) -> Path:
    text = f"""
name: shaped
seed: 1
ports:
  p0: {{interface: p0, netns: {prefix}-tester, pacing: {pacing}}}
  p1: {{interface: p1, netns: {prefix}-tester}}
dut: {{netns: {prefix}-dut}}
streams:
  - name: up
    port: p0
    rx_port: p1
    eth: {{src: "02:74:67:00:00:01", dst: "02:74:67:00:00:fe"}}
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp: {{src_port: {{min: 10000, max: 10063, mode: inc}}, dst_port: 7}}
    size: 64
    shape: {shape}
"""
    p = tmp / "shaped.yaml"
    p.write_text(text)
    return p


@pytest.fixture(scope="module")
def lab(make_lab):
    with make_lab("nat", "sh") as prefix:
        yield prefix


@pytest.mark.parametrize("pacing", ["burst", "qdisc"])
def test_three_steps_send_the_integral_of_the_shape(lab, tmp_path, pacing):
    shape = "[{rate: 2kpps, for: 1s}, {rate: 10kpps, for: 1s}, {rate: 4kpps, for: 1s}]"
    prof = _profile(lab, tmp_path, shape, pacing)
    val = subprocess.run([*TGEN, "validate", str(prof)], capture_output=True, text=True)
    assert "2k pps 1s, 10k pps 1s, 4k pps 1s (once, 16,000 frames)" in val.stdout, val.stdout
    out, nd = tmp_path / "r.json", tmp_path / "r.ndjson"
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "-d", "4", "--json", str(out), "--ndjson", str(nd), "-q",
         "--no-store"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    up = json.loads(out.read_text())["streams"]["up"]
    # 2,000 + 10,000 + 4,000 frames: the integral, exactly; every one through the NAT
    assert up["tx_frames"] == 16_000
    assert up["rx_frames"] == 16_000 and up["lost"] == 0
    assert up["spacing"]["law"] == "constant+shape"
    asked = set()
    for line in nd.read_text().splitlines():
        snap = json.loads(line)
        if "seq" in snap and "up" in snap.get("streams", {}):
            asked.add(round(snap["streams"]["up"]["requested_pps"]))
    # the requested rate follows the steps (and is 0 once the shape has been sent)
    assert {2000, 10000, 4000} <= asked <= {0, 2000, 10000, 4000}, asked


def test_a_shape_and_a_rate_together_are_one_line(tmp_path):
    prof = _profile("x", tmp_path, "[{rate: 2kpps, for: 1s}]", "burst")
    prof.write_text(prof.read_text() + "    rate: {pps: 5}\n")
    cp = subprocess.run([*TGEN, "validate", str(prof)], capture_output=True, text=True)
    assert cp.returncode == 2
    (line,) = cp.stderr.strip().splitlines()
    assert "shaped.yaml" in line and "give a rate or a shape, not both" in line


def test_line_rate_bursts_are_counted_and_their_losses_named(lab, tmp_path):
    """Ten bursts of 1,000 frames at line rate, 50 ms apart: every frame is sent, and
    each frame is either received or lost with a named cause (a software DUT may drop
    under bursts that it forwards when they are spaced)."""
    prof = _profile(lab, tmp_path, "null", "burst")
    text = prof.read_text().replace(
        "    shape: null\n",
        "    mode: {type: multi_burst, frames: 1000, every: 50ms, at: line, bursts: 10}\n",
    )
    prof.write_text(text)
    val = subprocess.run([*TGEN, "validate", str(prof)], capture_output=True, text=True)
    assert "1,000 frames at line rate" in val.stdout and "mean 20,000 fps" in val.stdout
    out = tmp_path / "r.json"
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "-d", "2", "--json", str(out), "-q", "--no-store"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode in (0, 1), cp.stderr
    res = json.loads(out.read_text())
    up = res["streams"]["up"]
    assert up["tx_frames"] == 10_000
    assert up["rx_frames"] + up["lost"] == 10_000
    assert up["spacing"]["law"] == "constant+burst"
    if up["lost"]:
        named = sum(c["frames"] for c in up.get("loss_causes", []))
        assert named >= 0.99 * up["lost"], up
