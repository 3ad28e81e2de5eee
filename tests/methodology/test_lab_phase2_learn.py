"""RFC 9693 phase 2 against a NAT that rewrites every source port (root, lab).

The lab's DUT is set to ``snat ... fully-random`` (``tgen lab up --nat-ports random``):
the Initiator's source ports are translated to random public ports, so a Responder that
assumed port preservation would reply to tuples that have no conntrack entry, and every
reply would be dropped. The Responder learns the translated tuples from its receive ring
in phase 1 instead (at most -M of them), and all of phase 2's replies come back to the
Initiator's port through the NAT. Numbers are counts, never timings.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .lab_profiles import cps_until_phase2, unique_profile

pytestmark = pytest.mark.root

FAST = ["--duration", "1s", "--timeout", "200ms", "--settle", "100ms", "--no-store"]


def tgen(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tgen_tui", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def random_port_lab(make_lab):
    """A NAT lab whose DUT picks a random public source port for every new flow."""
    with make_lab("nat", "m", nat_ports="random") as prefix:
        yield prefix


def rewritten_ports(dut_netns: str) -> tuple[int, int]:
    """(entries, entries whose public port differs from the private one) in the DUT."""
    cp = subprocess.run(
        ["ip", "netns", "exec", dut_netns, "conntrack", "-L", "-p", "udp"],
        capture_output=True,
        text=True,
        check=True,
    )
    n = moved = 0
    for line in cp.stdout.splitlines():
        kv = [w.split("=", 1) for w in line.split() if "=" in w]
        sports = [v for k, v in kv if k == "sport"]
        dports = [v for k, v in kv if k == "dport"]
        if len(sports) == 2 and len(dports) == 2:
            n += 1
            moved += sports[0] != dports[1]  # original source port vs the reply's destination
    return n, moved


def test_phase2_replies_to_learned_tuples_through_a_port_rewriting_nat(
    random_port_lab, tmp_path: Path
):
    prof = tmp_path / "p.yaml"
    prof.write_text(unique_profile(random_port_lab))  # 100 x 50 = 5,000 unique tuples
    out = tmp_path / "r.json"
    tables_before = set(Path("/dev/shm").glob("tgen-learn-*"))
    cp, doc, s, final = cps_until_phase2(
        tgen, prof, out, "-M", "4000", "-D", "2500ms", "--responder-order", "increasing", *FAST
    )
    assert final["kind"] == "confirm" and final["extra"]["conntrack"]["rise"] == 5000
    assert final["extra"]["learned"] == {"tuples": 4000, "max": 4000, "port": "p1"}  # -M
    p2 = final["extra"]["phase2"]
    assert p2["order"] == "increasing" and p2["learned_tuples"] == 4000
    assert p2["tx_frames"] == 5000 and p2["rx_frames"] == 5000 and p2["lost"] == 0
    assert p2["verdict"] == "pass" and p2["through_nat"] is True
    assert p2["extra"]["ports"]["p0"]["if_rx_frames"] == 5000  # back on the Initiator's port
    assert p2["d_ms"] >= 2500 and p2["d_ms_min"] <= 2500  # -D honoured (a lower bound)
    assert s["confirmed"] is True
    assert "to 4,000 learned tuples" in cp.stdout and "predicted" not in cp.stdout
    assert doc["dut"]["lab"]["nat_ports"] == "random"
    # the NAT really rewrote the ports: predicted replies would have missed every entry
    n, moved = rewritten_ports(f"{random_port_lab}-dut")
    assert n >= 5000 and moved >= 0.99 * n
    assert not set(Path("/dev/shm").glob("tgen-learn-*")) - tables_before  # removed


def test_m_above_n_is_bad_input(tmp_path: Path):
    prof = tmp_path / "p.yaml"
    prof.write_text(unique_profile("nolab"))
    cp = tgen("rfc9693", "cps", str(prof), "-N", "1000", "-M", "2000", *FAST)
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.strip().count("\n") == 0 and "-M" in cp.stderr
