"""Clock offsets, cross-host latency notes and the receiver's skew: no Ray, no root.

Also Must show 4 of issue 14: without --cluster nothing imports Ray.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tgen_tui.cluster import clock as K
from tgen_tui.engine.snapshot import Latency, StatsSnapshot, StreamStats
from tgen_tui.worker import counters as C
from tgen_tui.worker.rxstats import RxStats


def test_estimate_picks_the_least_delay_round_and_bounds_the_offset():
    # agent clock = engine clock + 1000 ns; paths 100/300 ns (asymmetric), then 50/50 ns
    off = 1000
    samples = [
        (0, 100 + off, 110 + off, 410),  # delay 400: offset estimate 1000 - 100
        (1000, 1050 + off, 1060 + off, 1110),  # delay 100: the winner, exact here
    ]
    est, unc, delay = K.estimate(samples)
    assert delay == 100
    assert unc == 50
    assert est == off
    # whatever the asymmetry, the truth is within the uncertainty
    est2, unc2, _ = K.estimate([samples[0]])
    assert abs(est2 - off) <= unc2


def test_estimate_on_one_clock_is_within_its_uncertainty():
    # t1 <= t2 <= t3 <= t4 on one clock: |offset| <= delay / 2 by construction
    c = K.measure("h", lambda: (K.time.monotonic_ns(), K.time.monotonic_ns()), rounds=8)
    assert abs(c.offset_ns) <= c.uncertainty_ns
    assert c.rounds == 8
    with pytest.raises(ValueError):
        K.estimate([])


def test_stream_clocks_and_notes():
    port_host = {"p0": "a", "p1": "b", "p2": "a", "p3": None}
    offs = {
        None: K.LOCAL_CLOCK,
        "a": K.ClockOffset("a", 5_000, 300, 600, 16),
        "b": K.ClockOffset("b", -2_000, 200, 400, 16),
    }
    streams = [
        ("ab", "p0", "p1"),
        ("ba", "p1", "p0"),
        ("same", "p0", "p2"),
        ("none", "p0", None),
        ("local", "p3", "p1"),
    ]
    cl = K.stream_clocks(streams, port_host, offs)
    assert set(cl) == {"ab", "ba", "local"}  # same host and rx-less streams need nothing
    assert cl["ab"].skew_ns == -7_000 and cl["ab"].usable
    assert cl["ba"].skew_ns == 7_000
    assert "+/- 0.5 us" in cl["ab"].note and "host a" in cl["ab"].note
    assert cl["local"].skew_ns == -2_000 and "engine's host" in cl["local"].note
    # an unmeasured host: no latency, and the note says why
    offs["b"] = None
    cl = K.stream_clocks(streams, port_host, offs, {"b": "agent did not answer"})
    assert not cl["ab"].usable and "agent did not answer" in cl["ab"].note
    snap = StatsSnapshot(
        t=1.0,
        seq=1,
        ports=(),
        streams=(
            StreamStats("ab", 0, "p0", "p1", latency_ns=Latency(min=1.0, avg=2.0)),
            StreamStats("same", 2, "p0", "p2", latency_ns=Latency(min=1.0)),
        ),
        workers=(),
    )
    out = K.apply_to_snapshot(snap, cl)
    assert out.stream("ab").latency_ns == Latency()
    assert out.stream("ab").latency_note.startswith("no latency")
    assert out.stream("same").latency_ns.min == 1.0 and out.stream("same").latency_note is None
    assert out.to_dict()["streams"]["ab"]["latency_note"] == cl["ab"].note


def test_receiver_subtracts_the_skew_of_a_stream_from_another_host():
    table = np.zeros((2, C.RX_STRIDE), dtype=np.int64)
    table[:, C.R_MAX_SEQ] = -1
    table[:, C.R_LAT_MIN] = C.INT64_MAX
    table[:, C.R_LAT_MAX] = -1
    # stream 1 was sent on a host whose clock is 3 s behind the receiver's: skew +3e9
    rs = RxStats(table, skew={"1": 3_000_000_000})
    n = 4
    stream = np.array([0, 0, 1, 1], dtype=np.uint16)
    seq = np.array([0, 1, 0, 1], dtype=np.uint32)
    rx_ns = np.full(n, 10_000_000_000, dtype=np.int64)
    tx_true = rx_ns - 50_000  # 50 us on the wire
    ts = tx_true.copy()
    ts[2:] -= 3_000_000_000  # the sender's clock is behind
    ts = (ts & 0xFFFFFFFF).astype(np.uint32)
    rs.account(stream, seq, ts, rx_ns, np.full(n, -1), np.full(n, 60))
    assert table[0, C.R_LAT_MIN] == 50_000 and table[0, C.R_LAT_MAX] == 50_000
    assert table[1, C.R_LAT_MIN] == 50_000 and table[1, C.R_LAT_MAX] == 50_000
    assert table[:, C.R_NEG_LAT].sum() == 0


def test_engine_import_does_not_import_ray():
    """Must show 4: -X importtime of the engine (and of tgen run's module) has no ray."""
    cp = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "import tgen_tui.engine, tgen_tui.engine.controller, tgen_tui.commands.run_cmd, tgen_tui.cli",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    mods = [line.rsplit("|", 1)[-1].strip() for line in cp.stderr.splitlines() if "|" in line]
    assert "tgen_tui.engine.controller" in mods
    assert not [m for m in mods if m == "ray" or m.startswith("ray.")], "ray was imported"
    assert not [m for m in mods if m.startswith("tgen_tui.cluster")]


def test_cluster_option_without_ray_is_an_environment_error(monkeypatch):
    import importlib.util

    from tgen_tui.diagnostics import BadInput, EnvironmentProblem
    from tgen_tui.engine.cli_options import check_cluster_option

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(EnvironmentProblem, match=r"pip install 'tgen-tui\[cluster\]'"):
        check_cluster_option("auto")
    with pytest.raises(BadInput, match="--cluster"):
        check_cluster_option(" ")
    check_cluster_option(None)  # absent: nothing to check, nothing imported


def test_host_in_profile_is_validated(tmp_path):
    from tgen_tui.diagnostics import BadInput
    from tgen_tui.profiles.loader import load_profile

    p = tmp_path / "p.yaml"
    p.write_text("ports:\n  p0: {interface: p0, host: 'bad host'}\nstreams: []\n", encoding="utf-8")
    with pytest.raises(BadInput) as ei:
        load_profile(str(p))
    assert "host" in str(ei.value)


def test_cluster_modules_import_no_textual_and_the_agent_no_trio():
    code = (
        "import sys, json\n"
        "import tgen_tui.cluster.agent\n"
        "a = sorted({k.split('.')[0] for k in sys.modules})\n"
        "import tgen_tui.cluster.remote\n"
        "b = sorted({k.split('.')[0] for k in sys.modules})\n"
        "print(json.dumps([a, b]))"
    )
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import json

    agent, remote = json.loads(cp.stdout)
    assert "trio" not in agent and "textual" not in agent and "ray" not in agent
    assert "textual" not in remote and "ray" not in remote  # ray only once --cluster connects
