"""The engine's rooms without root: the pure Setup, the transport protocol, the contract,
the figures' single definitions, and the layer rule that the engine never imports the
cluster."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tgen_tui.engine import figures as F
from tgen_tui.engine.api import EngineAPI, EngineFeed, RateError
from tgen_tui.engine.controller import Engine
from tgen_tui.engine.options import EngineOptions
from tgen_tui.engine.setup import Setup
from tgen_tui.engine.transport import LocalTransport, WorkerTransport
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile_text

from .engine_helpers import profile_yaml, stream_yaml

ENGINE = Path(__file__).resolve().parents[2] / "tgen_tui" / "engine"


def _compiled(pps: int = 2000):
    streams = stream_yaml("up", "p0", rx_port="p1", pps=pps) + stream_yaml(
        "down", "p1", rx_port="p0", pps=pps
    )
    return compile_profile(load_profile_text(profile_yaml("x", streams)))


def test_engine_never_imports_the_cluster():
    bad = []
    for path in ENGINE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad += [f"{path.name}: {n}" for n in names if n.startswith("tgen_tui.cluster")]
    assert bad == []


def test_the_engine_and_the_transports_satisfy_their_protocols():
    for proto in (EngineAPI, EngineFeed):
        members = [n for n in vars(proto) if not n.startswith("_")]
        assert members
        assert [n for n in members if not hasattr(Engine, n)] == []
    assert isinstance(LocalTransport(EngineOptions()), WorkerTransport)
    from tgen_tui.cluster.transport import ClusterTransport, cluster_transport

    assert cluster_transport(None) is None
    factory = cluster_transport("auto")
    assert factory is not None
    t = factory(EngineOptions(cluster="auto"))
    assert isinstance(t, ClusterTransport) and isinstance(t, WorkerTransport)


def test_setup_is_pure_and_describes_the_plan():
    c = _compiled()
    s = Setup.build(c, EngineOptions(cores=[0]))
    assert s.port_names == ("p0", "p1")
    assert [p.ports for p in s.plans] == [("p0",), ("p1",)]
    assert s.ports["p0"].streams == (0,) and s.ports["p1"].streams == (1,)
    assert s.initial_rates() == {0: 2000.0, 1: 2000.0}
    assert s.finite_total() is None
    assert any("share 1 core" in w for w in s.warnings)
    d = s.describe(s.initial_rates(), set(), {}, "none")
    assert d.stream("up").pps == 2000.0 and d.stream("up").flows == 64
    assert d.port("p0").line_rate_fps > 1e6
    assert s.plan_text()[0] == "worker 0: core 0: port p0: streams up"
    with pytest.raises(RateError, match="exceeds the line rate of port p0"):
        s.check_line_rate("p0", {0: 1e9, 1: 0.0}, "up")
    assert s.rates_only_change(_compiled(pps=3000))
    assert s.rates_of(_compiled(pps=3000)) == {0: 3000.0, 1: 3000.0}
    assert Setup.build(c, EngineOptions(cores=[0], ports=["p1"])).port_names == ("p1",)


def test_achieved_has_one_definition():
    assert F.achieved_pps(1000.0, 990, 1000) == pytest.approx(990.0)
    assert F.achieved_pps(1000.0, 5, 0) == 0.0
    assert F.achieved_pct(990.0, 1000.0) == pytest.approx(99.0)
    assert F.achieved_pct(0.0, 0.0) is None
    assert F.lost_frames(100, 90, -1, 0, settled=True) == 10
    assert F.lost_frames(100, 90, 94, 0, settled=False) == 5  # frames in flight are not lost
