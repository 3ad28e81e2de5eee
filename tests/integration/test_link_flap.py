"""A short fault run (issue 36, the CI version of its soak): profiles/lab.yaml through the
NAT lab for 6 s at its 2 x 20 kpps, the DUT's d1 set down 2 s after sending began and
up again at 3 s (``--dut-event``, as a user would). One run (about 10 s), judged by:

- the flap is an event at its time: "p1: carrier lost" when d1 went down, "p1: carrier
  back after ~1 s" when it came up (NDJSON and the result's events);
- ``up`` recovers within 2 s of the link coming back (the lab's keeper restores the
  DUT's neighbours and routes), and its outage is the true one: the time p1 had no
  carrier, measured by those events, within a tolerance of twice the sample interval;
- the frames p1 sent without a carrier are a tester-side loss cause of ``down`` (the
  stream p1 sends), equal to p1's frames sent minus its interface's, never the DUT's;
- (a second run, 4 s, d1 left down at 2 s) a gap that lasts to the end is the outage,
  "not recovered";
- every stream's counts are at most its interface's: received, in the result and in every
  snapshot on the way; sent, once the port stopped (live, frames in the port's pacing
  qdisc are handed to the kernel and not yet sent), less the frames it could not send.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tgen_tui.worker.pacing import QDISC_LIMIT_S

TGEN = [sys.executable, "-m", "tgen_tui"]
ROOT = Path(__file__).resolve().parents[2]
INTERVAL_S = 0.1  # tgen run's default snapshot interval
TOL_S = 2 * INTERVAL_S  # the outage against the carrier's absence, and event times
DOWN_AT, UP_AT = 2.0, 3.0


@pytest.fixture(scope="module")
def flap_lab(make_lab, tmp_path_factory):
    """(lab prefix, profiles/lab.yaml moved to it)."""
    tmp = tmp_path_factory.mktemp("flap")
    with make_lab("nat", "f") as prefix:
        _links_up(prefix)
        text = (ROOT / "profiles" / "lab.yaml").read_text()
        prof = tmp / "lab.yaml"
        prof.write_text(
            text.replace("tgen-tester", f"{prefix}-tester").replace("tgen-dut", f"{prefix}-dut")
        )
        yield prefix, prof


def _run(prof: Path, duration: str, *events: str) -> tuple[dict, list[dict], str]:
    """(result, NDJSON lines, stdout) of ``tgen run`` with these ``--dut-event``s."""
    out, nd = prof.parent / f"r{duration}.json", prof.parent / f"r{duration}.ndjson"
    argv = [*TGEN, "run", str(prof), "-d", duration, "--json", str(out), "--ndjson", str(nd)]
    for ev in events:
        argv += ["--dut-event", ev]
    cp = subprocess.run([*argv, "--no-store"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    lines = [json.loads(x) for x in nd.read_text().splitlines()]
    return json.loads(out.read_text()), lines, cp.stdout


@pytest.fixture(scope="module")
def flap(flap_lab):
    """The run with its flap: d1 down at 2 s, up at 3 s."""
    _, prof = flap_lab
    return _run(prof, "6s", f"{DOWN_AT}s: ip link set d1 down", f"{UP_AT}s: ip link set d1 up")


def _links_up(prefix: str) -> None:
    """Wait until every lab interface's operstate is UP: the kernel may report a veth's
    carrier up to a second after it came (and the run would say "no carrier at open")."""
    import time

    from tgen_tui.lab import topology

    deadline = time.monotonic() + 5
    while not topology.status(prefix)["up"]:
        assert time.monotonic() < deadline, topology.status(prefix)
        time.sleep(0.05)


def _link_events(lines: list[dict]) -> list[dict]:
    return [e for e in lines if e.get("event") == "link"]


def _t_running(lines: list[dict]) -> float:
    """The engine's time (s since it opened) at which sending began (p0 running)."""
    return next(e["t"] for e in lines if e.get("event") == "port_state" and e["new"] == "running")


def test_the_flap_is_an_event_at_its_time(flap):
    res, lines, _ = flap
    ev = _link_events(lines)
    assert [(e["port"], e["old"], e["new"]) for e in ev] == [
        ("p1", "up", "no carrier"),
        ("p1", "no carrier", "up"),
    ], ev
    down, up = (r for r in res["dut_events"])
    t0 = _t_running(lines)
    # heard when the command ran (rtnetlink), not at the next poll
    assert down["at_s"] - 0.05 <= ev[0]["t"] - t0 <= down["end_s"] + TOL_S, (ev, down)
    assert up["at_s"] - 0.05 <= ev[1]["t"] - t0 <= up["end_s"] + TOL_S, (ev, up)
    away = ev[1]["away_s"]
    assert abs(away - (up["at_s"] - down["at_s"])) < TOL_S
    texts = [e for e in res["events"] if "p1: carrier" in e]
    assert len(texts) == 2 and texts[0].endswith("p1: carrier lost")
    assert texts[1].endswith(f"p1: carrier back after {away:.2f} s")


def test_up_recovers_within_2_s_and_its_outage_is_the_true_one(flap):
    res, lines, stdout = flap
    up = res["streams"]["up"]
    away = _link_events(lines)[1]["away_s"]  # how long p1 had no carrier
    back_at = res["dut_events"][1]["end_s"]  # s from the start of sending
    assert up["outage_recovered"] is True
    assert up["outage_at_s"] + up["outage_ms"] / 1000 - back_at < 2.0  # frames came back
    assert abs(up["outage_ms"] / 1000 - away) <= TOL_S, (up["outage_ms"], away)
    assert abs(up["outage_at_s"] - res["dut_events"][0]["at_s"]) <= TOL_S
    assert up["rx_frames"] > up["tx_frames"] * 0.7  # it kept going after the flap
    assert "not recovered" not in stdout


def test_frames_sent_without_carrier_are_the_testers_cause(flap):
    res, lines, stdout = flap
    p1, down = res["ports"]["p1"], res["streams"]["down"]
    unsent = p1["tx_unsent"]
    assert unsent == p1["tx_frames"] - p1["if_tx_frames"] > 0
    away = _link_events(lines)[1]["away_s"]
    # lab.yaml's down: 20 kpps, sent and dropped for the time without carrier, plus (our
    # reading of the 34,502 and 34,689 seen for about 1 s away, not traced in the kernel)
    # what p1's pacing TBF held when the carrier went: at most QDISC_LIMIT_S of frames
    assert 0.5 * 20_000 * away < unsent < 20_000 * (1.5 * away + QDISC_LIMIT_S), (unsent, away)
    causes = {(c["cause"], c["where"]): c["frames"] for c in down["loss_causes"]}
    # the veth counts a frame it dropped at both ends: what d1 counted (sent in the
    # instant before p1's qdisc stopped, d1 already down) is d1's (losscauses.once_on_veth)
    table = {(c["cause"], c["where"]): c["frames"] for c in res["dut"]["counters"]}
    d1_rx = table.get(("dut_rx_drop", "d1"), 0)
    assert d1_rx < unsent / 10
    assert causes[("tester_tx_unsent", "tester p1")] == unsent - d1_rx
    assert not any(c["cause"] == "neighbour_unresolved" for c in down["loss_causes"])
    up_unsent = [c for c in res["streams"]["up"]["loss_causes"] if c["cause"] == "tester_tx_unsent"]
    assert all(c["where"] == "tester p0" for c in up_unsent)  # p0's own, if any: never p1's
    assert "not put on the wire by the tester" in stdout


def test_every_streams_counts_are_within_its_interfaces(flap):
    res, lines, _ = flap
    snaps = [x for x in lines if "ports" in x]
    assert len(snaps) > 40
    for snap in [*snaps, res]:
        ports = snap["ports"]
        for s in snap["streams"].values():
            rx_port = ports[s["rx_port"]]
            assert s["rx_frames"] <= rx_port["if_rx_frames"], (snap.get("seq"), s["name"])
            assert s["rx_frames"] <= rx_port["rx_frames"], (snap.get("seq"), s["name"])
        for p in ports.values():  # sent: once settled (live, a pacing qdisc holds some)
            if p["state"] != "stopped":
                continue
            sent = sum(s["tx_frames"] for s in snap["streams"].values() if s["port"] == p["name"])
            assert sent - p["tx_unsent"] == p["if_tx_frames"], (snap.get("seq"), p["name"])
    for name, s in res["streams"].items():  # and the final figures add up exactly
        assert s["lost"] == s["tx_frames"] - s["rx_frames"], name


def test_a_gap_that_lasts_to_the_end_is_the_outage_not_recovered(flap, flap_lab):
    """d1 set down at 2 s of a 4 s run and left down: up's outage is the last 2 s, "not
    recovered" (the issue's soak said 4,076 ms, a gap before, for 178 s without a frame)."""
    prefix, prof = flap_lab
    try:
        res, _, stdout = _run(prof, "4s", f"{DOWN_AT}s: ip link set d1 down")
    finally:
        subprocess.run(["ip", "-n", f"{prefix}-dut", "link", "set", "d1", "up"], check=True)
    up = res["streams"]["up"]
    down_at = res["dut_events"][0]["at_s"]
    assert up["outage_recovered"] is False
    assert abs(up["outage_at_s"] - down_at) <= TOL_S
    assert abs(up["outage_ms"] / 1000 - (4.0 - down_at)) <= TOL_S, up["outage_ms"]
    assert f"stream up: longest receive gap {up['outage_ms']:.1f} ms" in stdout
    assert "(not recovered)" in stdout
    assert re.search(r"ip link set d1 down; outage [\d.]+ ms \((up|down), not recovered\)", stdout)
