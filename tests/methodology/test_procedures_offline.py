"""Every procedure end to end without root: the registry's run, its typed report, the
text, tables and store records, against a DUT simulated behind TrialRunner.run (it
forwards at most CAP frames/s per direction and holds TABLE conntrack entries).

What the real trial runner measures is tested on the lab (test_lab_*.py); here the
procedures, the kit around them and the reports are, in simulated time."""

from __future__ import annotations

import json

import pytest
import trio

from tgen_tui.methodology import registry
from tgen_tui.methodology.kit.params import Params
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.trial import TrialRunner
from tgen_tui.methodology.kit.verdict import judge
from tgen_tui.methodology.procedures.mlr.goals import goals_for, quick
from tgen_tui.methodology.procedures.mlr.run import SearchConfig
from tgen_tui.methodology.procedures.rfc9693 import phase2, tcpflow
from tgen_tui.results import models

CAP = 30_000  # frames/s per direction the DUT forwards
TABLE = 3_000  # conntrack entries it holds
LAB = "profiles/lab.yaml"
STATEFUL = "profiles/nat44-stateful.yaml"
QUICK = dict(duration_s=1.0, timeout_s=0.0, settle_s=0.0, repeats=2, quick=True, error=2000.0)


async def fake_run(self, rate, kind, *, duration_s=None, count=None, reset_dut=False,
                   clear_at_s=None, early_stop=None, learn=None):  # fmt: skip
    """A trial as the runner records it: every direction's streams sent in full, what
    exceeds CAP (or a table of TABLE entries) lost, conntrack counted."""
    d = duration_s if duration_s is not None else count / rate
    self.trials_run += 1
    streams, tx, lost = {}, 0, 0
    for progs in self.groups.values():
        want = count or round(rate * d)
        drop = max(0, round((rate - CAP) * d), (count or 0) - 2 * TABLE)
        for i, p in enumerate(progs):
            w, ls = (want, min(drop, want)) if i == 0 else (0, 0)
            lat = models.Latency(min=5e3, p50=8e3 + rate / 10, p999=3e4 + rate, max=4e4 + rate)
            streams[p.name] = models.StreamCounts(
                requested_pps=rate, count=w, tx_frames=w, rx_frames=w - ls, lost=ls,
                latency_ns=lat, latency_source="signature",
            )  # fmt: skip
            tx, lost = tx + w, lost + ls
    t = models.Trial(rate_pps=rate, kind=kind, duration_s=d, tx_frames=tx,
                     rx_frames=tx - lost, lost=lost, achieved_pps=rate)  # fmt: skip
    t.extra.streams, t.extra.sent_by_deadline = streams, tx
    t.extra.ports = {
        "p0": models.PortCounts(tx_frames=tx, if_tx_frames=tx),
        "p1": models.PortCounts(rx_frames=tx - lost, if_rx_frames=tx - lost),
    }
    if lost:
        t.extra.drops = [
            models.DropCounter(where="d1", counter="qdisc tbf 1: drops", cause="qdisc_drop",
                               frames=lost, matched=lost, excess=0)
        ]  # fmt: skip
        t.extra.loss_unexplained = {name: 0 for name in streams}
    if self.dut is not None:
        rise = min(tx - lost, TABLE) if count else 0
        t.extra.conntrack = models.ConntrackCounts(before=0, after=rise, rise=rise)
    if learn:
        t.extra.learned_report = {port: {"tuples": min(tx - lost, TABLE)} for port in learn}
    return judge(t, self.loss_tolerance)


@pytest.fixture
def simulated(monkeypatch):
    from tgen_tui.dut.control import DutControl
    from tgen_tui.engine import cli_options
    from tgen_tui.session import learned

    last_n = [0]
    resets = iter([0.02, 0.005] * 1000)
    monkeypatch.setattr(TrialRunner, "run", fake_run)
    monkeypatch.setattr(cli_options, "check_environment", lambda compiled, cluster=None: None)
    monkeypatch.setattr(DutControl, "settings", lambda self: {"source": self.describe()})
    monkeypatch.setattr(DutControl, "count", lambda self: 1000)
    monkeypatch.setattr(DutControl, "reset", lambda self: next(resets))
    spec = phase2.ResponderSpec("p1", "02:00:00:00:00:01", "02:00:00:00:00:02")
    monkeypatch.setattr(phase2, "veth_responder", lambda *a: spec)
    monkeypatch.setattr(tcpflow, "tcp_states", lambda channel: {"ESTABLISHED": last_n[0]})
    monkeypatch.setattr(learned, "learned_count", lambda path: last_n[0])
    real_batch = tcpflow._batch

    async def batch(tr, ph, n, rate, kind, lrn):
        last_n[0] = n
        return await real_batch(tr, ph, n, rate, kind, lrn)

    monkeypatch.setattr(tcpflow, "_batch", batch)


def run(test: str, params: Params, sig: str | None = None, **body) -> RunState:
    state = RunState(test=test, params=params)
    state.body.update(body)
    trio.run(registry.procedure(test).run, state)
    return state


def check(state: RunState, partial: bool = False):
    """The report is its test's model, reads back as stored with the same document, and
    counts its flat trials; returns (report, text)."""
    report = registry.build_report(state, partial=partial)
    assert type(report) is models.model_for(state.test)
    assert not any("does not fit" in w for w in report.warnings)
    doc = json.loads(json.dumps(report.to_doc(), default=str))
    assert models.parse_result(state.test, doc).to_doc() == doc
    flat = registry.flat_trials(state)
    assert all(isinstance(t, models.TrialRecord | models.SearchOutcome) for t in flat)
    if isinstance(report, models.Report):
        assert report.trials_flat_count == len(flat)
    return report, registry.render(report)


def test_throughput_finds_the_cap_at_every_frame_size(simulated):
    s = run("rfc2544-throughput", Params(profile=LAB, max_rate=100_000, frame_sizes=[64, 128],
                                         **QUICK))  # fmt: skip
    report, text = check(s)
    for fs in report.by_frame_size:
        assert [x.l_pps <= CAP < x.h_pps for x in fs.searches] == [True, True]
        assert all(x.confirmed for x in fs.searches)
    assert report.metrics["throughput_fps"] == report.by_frame_size[0].summary.median
    assert report.drops[0].frames == sum(t.lost for x in report.searches for t in x.trials)
    assert (
        "| frame size (B) | 64 | 128 |" in text
        and "  128 B search 4: l 29,687  h 31,250  ok" in text
    )
    assert "Drops per interface and counter" in text


def test_loss_latency_and_pdv(simulated):
    report, text = check(run("rfc2544-loss", Params(profile=LAB, max_rate=60_000, **QUICK)))
    (curve,) = report.frame_loss
    assert [p.load_pct for p in curve.points][:2] == [100.0, 90.0]
    assert curve.points[0].flr_pct == 50.0 and curve.points[-1].flr_pct == 0.0
    assert "| frame loss (%) | 50 |" in text
    lat = run("rfc2544-latency", Params(profile=LAB, max_rate=100_000, delay_s=0.5, **QUICK))
    report, text = check(lat)
    (fs,) = report.by_frame_size
    assert fs.rate_pps <= CAP and len(fs.trials) == 2 and report.throughput_searches
    assert fs.trials[0].figures.wcl_ns == 3e4 + fs.rate_pps
    assert report.metrics["wcl_ns"] == fs.summary["wcl_ns"].median
    assert "RFC 8219 latency" in text and "latency source: signature" in text
    report, text = check(run("rfc2544-pdv", Params(profile=LAB, rate=20_000, **QUICK)))
    assert report.by_frame_size[0].trials[0].figures.pdv_ns == 3e4 + 20_000 - 5e3
    assert "| PDV, median (us) | 45 |" in text


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_cps_with_phase_2_or_tcp_handshakes(simulated, proto):
    dut = {"dut_reset": "true"} if proto == "udp" else {"dut_netns": "x-dut"}
    p = Params(profile=STATEFUL, n=2000, max_rate=100_000, proto=proto, **dut, **QUICK)
    report, text = check(run("rfc9693-cps", p))
    assert report.connections == 2000 and len(report.searches) == 2
    final = report.searches[0].trials[-1]
    if proto == "udp":
        assert final.kind == "confirm" and final.extra.phase2.through_nat
        assert final.extra.learned == models.LearnedTuples(tuples=2000, max=2000, port="p1")
        assert "phase 2 at" in text and "back through the NAT 2,000, lost 0: pass" in text
    else:
        tcp = report.searches[0].trials[0].extra.tcp
        assert tcp.teardown == "fin" and tcp.phases["syn"].tx == 2000
    assert all(x.l_pps <= CAP < x.h_pps for x in report.searches)


def test_capacity_teardown_and_sweep(simulated):
    st = dict(QUICK, n=2000, dut_reset="true", max_rate=100_000, repeats=1)
    report, text = check(run("rfc9693-capacity", Params(profile=STATEFUL, c0=2000, e=500, **st)))
    assert report.summary.capacity <= TABLE < report.summary.h_connections
    assert report.metrics["capacity"] == report.summary.capacity
    assert "  R0      C      2,000" in text
    report, text = check(run("rfc9693-teardown", Params(profile=STATEFUL, **st)))
    assert report.teardown[0].rate_per_s == pytest.approx(1000 / 0.015)
    s = run("sweep", Params(profile=STATEFUL, **dict(st, n=None)), sessions=[1000, 4000])
    report, text = check(s)
    assert [r.sessions for r in report.rows] == [1000, 4000]
    assert report.rows[0].cps_search.l_pps == report.rows[0].cps <= CAP
    assert report.rows[1].filled == TABLE and "the fill opened 3000 of 4,000" in text


def test_scaleup_of_an_interrupted_run(simulated):
    p = Params(profile=STATEFUL, n=2000, dut_reset="true", max_rate=100_000, **QUICK)
    s = run("scaleup-rfc9693-cps", p, counts=[1, 2], avail=[0, 1], over="lanes")
    report, text = check(s, partial=True)
    assert [type(r.report) for r in report.runs] == [models.CpsReport] * 2
    stored = models.parse_result(s.test, json.loads(json.dumps(report.to_doc())))
    assert [type(r.report) for r in stored.runs] == [models.CpsReport] * 2  # read typed
    assert [r.report.partial for r in report.runs] == [False, True]
    assert [r.relative_scaleup for r in report.rows] == [1.0, 0.5]
    assert "relative scale-up | 1 | 0.500 |" in text and "with k sender lanes" in text


def test_search_and_its_latency_ladder(simulated):
    goals, text = quick(goals_for("csit", [], None))
    cfg = SearchConfig(goals=goals, preset="csit", quick_text=text, warmup_s=0.5)
    s = run("search", Params(profile=LAB, max_rate=100_000, **QUICK), config=cfg)
    report, text = check(s)
    assert [g.name for g in report.goals] == ["ndr", "pdr"] and all(g.regular for g in report.goals)
    ndr, pdr = report.goals  # pdr allows 0.5 % loss: 0.5 % above CAP
    assert ndr.relevant_lower_bound_pps <= CAP and pdr.relevant_lower_bound_pps <= 1.005 * CAP
    assert [r.step for r in report.ladder] == ["low", "10%", "50%", "90%"]
    assert report.ladder[0].latency["forward"].source == "signature"
    assert report.trials[0].kind == "warmup" and report.trials[1].directions["forward"]
    assert "Latency ladder (worst stream per direction)" in text
    flat = registry.flat_trials(s)
    assert flat[-1].to_doc()["ladder_step"] == "90%"


def test_an_interrupted_search_before_its_first_trial_renders(simulated):
    cfg = SearchConfig(goals=goals_for("csit", [], None), preset="csit")
    state = RunState(test="search", params=Params(profile=LAB, **QUICK))
    state.body["config"] = cfg
    report, text = check(state, partial=True)
    assert [g.name for g in report.goals] == ["ndr", "pdr"] and report.trials == []
    assert "(PARTIAL: interrupted)" in text and "| goal | ndr | pdr |" in text
