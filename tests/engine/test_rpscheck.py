"""A worker pinned to a core that RPS steers receive work to is said, with what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import trio

from tgen_tui.engine import rpscheck
from tgen_tui.engine.rpscheck import parse_mask, rps_warnings

from .engine_helpers import profile_yaml, stream_yaml

TGEN = [sys.executable, "-m", "tgen_tui"]


def test_sysfs_masks_read_as_cpu_sets():
    assert parse_mask("1") == {0}
    assert parse_mask("00000000,00000003\n") == {0, 1}
    assert parse_mask("0") == frozenset()
    assert parse_mask("") == frozenset()


def test_an_unknown_interface_warns_of_nothing():
    rpscheck._cache.clear()
    assert trio.run(rps_warnings, [("p0", None, "tgen-no-such-if")], [(0, ("p0",))]) == []


def _steer(netns: str, mask: str) -> None:
    for ifn in ("p0", "p1"):
        subprocess.run(
            ["ip", "netns", "exec", netns, "sh", "-c",
             f"for q in /sys/class/net/{ifn}/queues/rx-*/rps_cpus; do echo {mask} > $q; done"],
            check=True,
        )  # fmt: skip


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs (a worker on each)")
def test_the_lab_steering_to_a_worker_core_is_a_warning_of_the_run(nat_lab, tmp_path):
    tester = f"{nat_lab}-tester"
    _steer(tester, "1")  # the lab's default on 2+ CPUs: receive work on CPU 0
    rpscheck._cache.clear()
    ports = [("p0", tester, "p0"), ("p1", tester, "p1")]
    (w,) = trio.run(rps_warnings, ports, [(0, ("p0",)), (1, ("p1",))])
    assert w.startswith("core 0 runs the worker of p0 and the receive work that RPS steers")
    assert "(p0, p1: RPS to CPU 0;" in w and "tgen lab set --rps-cpus 0" in w
    assert trio.run(rps_warnings, ports, [(1, ("p0", "p1"))]) == []  # tgen's default: off core 0

    # through a real run: the warning is in the result, and gone with RPS off
    prof = tmp_path / "p.yaml"
    prof.write_text(profile_yaml(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=1000)))
    out = tmp_path / "r.json"
    args = [*TGEN, "run", str(prof), "-d", "0.3", "--cores", "0-1", "--no-store", "--quiet"]
    cp = subprocess.run([*args, "--json", str(out)], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    warned = [x for x in json.loads(out.read_text())["warnings"] if "RPS steers" in x]
    assert len(warned) == 1 and warned[0].startswith("core 0 runs the worker of p0")
    _steer(tester, "0")
    cp = subprocess.run([*args, "--json", str(out)], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert not [x for x in json.loads(out.read_text())["warnings"] if "RPS steers" in x]
