"""Request/response (app) flows without a lab: the profile's app/load/clients rules, the
compiled AppProgram, the bytes on the wire (decoded by scapy), the load's due times, the
figures from a counter row, the result's app metrics, and the worker's AppFlow driving
real kernel sockets on loopback (127.0.0.0/8: every address is local, so 50 clients need
no setup)."""

from __future__ import annotations

import selectors
import socket
import time
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.dns import DNS
from scapy.layers.http import HTTPRequest, HTTPResponse

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine import appfigures as AF
from tgen_tui.engine.flowresult import flow_result, run_metrics
from tgen_tui.engine.flowsample import FlowCtx, flow_stats
from tgen_tui.packets import appprogram as AP
from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.flowprogram import FlowProgram, flow_from_dict, flow_to_dict
from tgen_tui.packets.program import Schedule
from tgen_tui.profiles.loader import load_profile, load_profile_text
from tgen_tui.worker import flowcounters as FC
from tgen_tui.worker.appflows import AppFlow, fail_slot
from tgen_tui.worker.rxstats import lat_bucket

from .test_transport_units import BASE  # two transport hosts, `transport:` to follow

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
WEB = "{name: w, port: p0, rx_port: p1, "


@pytest.mark.parametrize(
    ("entry", "where", "words"),
    [
        (WEB + "app: {kind: http}}", "transport[0]", "needs a load"),
        (WEB + "app: {}, load: {concurrent: 5, connections_per_s: 9}}", "load", "exactly one"),
        (WEB + "app: {}, load: {}}", "load", "exactly one of connections_per_s"),
        (WEB + "load: {concurrent: 5}}", "transport[0]", "only for a request/response"),
        (WEB + "app: {}, load: {concurrent: 5}, clients: {count: 9}}", "clients", "first"),
        (WEB + "app: {kind: http, request: 90}, load: {concurrent: 5}}", "request", "own size"),
        (WEB + "protocol: udp, app: {kind: http}, load: {concurrent: 5}}", "", "over tcp"),
        (WEB + "app: {kind: dns}, load: {concurrent: 5}}", "", "runs over udp"),
        (WEB + "app: {close: bye}, load: {concurrent: 5}}", "app.close", "'fin' or 'rst'"),
        (WEB + "app: {}, load: {concurrent: 5}, clients: {count: 2, first: 1.2.3}}", "first", ""),
        (WEB + "protocol: udp, rate: 1M, app: {}, load: {concurrent: 5}}", "rate", "load"),
    ],
)
def test_bad_app_entries_are_one_line_naming_the_field(entry, where, words):
    with pytest.raises(BadInput) as e:
        load_profile_text(BASE + f"  - {entry}\n")
    lines = e.value.lines()
    assert len(lines) == 1, lines
    assert where in lines[0] and words in lines[0], lines[0]


def test_http_cps_compiles_to_one_flow_with_a_thousand_clients():
    flows = compile_profile(load_profile(PROFILES / "http-cps.yaml")).flows
    assert len(flows) == 1
    f = flows[0]
    assert (f.name, f.protocol, f.dst_port, f.dst_ip) == ("web", "tcp", 80, "198.19.100.2")
    a = f.app
    assert a is not None and (a.kind, a.mode, a.target, a.per_connection) == (
        "http",
        "cps",
        2000,
        1,
    )
    ips = a.client_addresses()
    assert len(ips) == len(set(ips)) == 1000
    assert (ips[0], ips[-1]) == ("198.18.104.1", "198.18.107.232")
    assert flow_from_dict(flow_to_dict(f)) == f  # plain data to the worker and back
    dns = compile_profile(load_profile(PROFILES / "dns-udp.yaml")).flows[0]
    assert (dns.protocol, dns.dst_port, dns.app.kind, dns.app.clients_count) == (
        "udp",
        53,
        "dns",
        500,
    )


def test_due_connections_follow_the_rate_and_its_ramp():
    a = AP.AppProgram(
        "request-response", 10, 10, 2, False, 0.0, 1.0, "cps", 1000.0, 2.0, "127.0.0.1", 1
    )
    assert a.due_connections(0.0) == 0
    assert a.due_connections(1.0) == 250  # 1000 x 1^2 / (2 x 2): the ramp's integral
    assert a.due_connections(2.0) == 1000
    assert a.due_connections(3.0) == 2000  # then 1,000 a second
    assert a.target_at(1.0) == 500 and a.target_at(5.0) == 1000
    tps = AP.AppProgram(
        "request-response", 10, 10, 4, False, 0.0, 1.0, "tps", 1000.0, 0.0, "127.0.0.1", 1
    )
    assert tps.conn_rate() == 250 and tps.due_connections(2.0) == 500


def test_http_and_dns_messages_decode_with_scapy():
    a = AP.AppProgram("http", 200, 2000, 1, False, 0.0, 1.0, "cps", 1.0, 0.0, "127.0.0.1", 1)
    req, resp = AP.messages(a, "198.19.100.2")
    r = HTTPRequest(req)
    assert (r.Method, r.Path, r.Host) == (b"GET", b"/tgen/2000", b"198.19.100.2")
    s = HTTPResponse(resp)
    assert s.Status_Code == b"200" and s.Content_Length == b"2000"
    assert resp.endswith(b"\r\n\r\n" + b"x" * 2000)
    d = AP.AppProgram("dns", 1, 1, 1, False, 0.0, 1.0, "cps", 1.0, 0.0, "127.0.0.1", 1)
    q, ans = AP.messages(d, "198.19.100.2")
    dq, da = DNS(q), DNS(ans)
    assert dq.qr == 0 and dq.qd[0].qname == b"www.tgen.test." and dq.qd[0].qtype == 1
    assert da.qr == 1 and da.id == dq.id and da.ancount == 1 and da.an[0].rdata == "198.19.100.2"


def _row(**counts) -> np.ndarray:
    row = np.zeros(FC.FLOW_STRIDE, dtype=np.int64)
    for k, v in counts.items():
        row[getattr(FC, "FC_" + k.upper())] = v
    return row


def _fill(row: np.ndarray, base: int, total: int, lo: int, hi: int, values_ns: list[int]) -> None:
    v = np.array(values_ns, dtype=np.int64)
    np.add.at(row[base : base + FC.HIST_BUCKETS], lat_bucket(v), 1)
    row[total], row[lo], row[hi] = v.sum(), v.min(), v.max()


def test_app_figures_count_failures_by_reason_and_take_percentiles_from_the_histograms():
    row = _row(attempted=1000, established=990, fail_refused=4, fail_reset=1, fail_timeout=10,
               fail_local=0, closed=985, concurrent=5, transactions=1970, served=1970,
               retrans=7, target=2_000_000)  # fmt: skip
    setup = [100_000] * 98 + [5_000_000, 9_000_000]  # p50 100 us, p99 5 ms
    _fill(row, FC.FC_SETUP_HIST, FC.FC_SETUP_SUM_NS, FC.FC_SETUP_MIN_NS, FC.FC_SETUP_MAX_NS, setup)
    _fill(row, FC.FC_TXN_HIST, FC.FC_TXN_SUM_NS, FC.FC_TXN_MIN_NS, FC.FC_TXN_MAX_NS, [300_000])
    before = (800, 790, 1570)
    d = AF.app_figures(row, before, 0.1, udp=False)
    assert (d["attempted"], d["established"], d["failed"]) == (1000, 990, 15)
    assert (d["failed_refused"], d["failed_reset"], d["failed_timeout"]) == (4, 1, 10)
    assert d["established_per_s"] == pytest.approx(2000) and d[
        "transactions_per_s"
    ] == pytest.approx(4000)
    assert d["target"] == 2000 and d["retransmits"] == 7 and d["concurrent"] == 5
    s = d["setup_ns"]
    assert s.p50 == pytest.approx(100_000, rel=0.07) and s.p99 == pytest.approx(5_000_000, rel=0.07)
    assert (s.min, s.max) == (100_000, 9_000_000)
    assert d["transaction_ns"].p99 == 300_000  # clamped to the exact max
    assert AF.app_figures(row, None, 0.1, udp=True)["setup_ns"] is None  # no handshake
    assert "timed out 10" in AF.failure_text(d)


def test_the_result_carries_app_counts_and_run_rates():
    row = _row(attempted=20_000, established=19_990, fail_timeout=10, closed=19_990,
               transactions=19_990, active_ns=10_000_000_000)  # fmt: skip
    _fill(
        row,
        FC.FC_SETUP_HIST,
        FC.FC_SETUP_SUM_NS,
        FC.FC_SETUP_MIN_NS,
        FC.FC_SETUP_MAX_NS,
        [2_000_000],
    )
    ctx = FlowCtx(0, "web", "web", "p0", "p1", "tcp", "cubic", 1, 1, "http", "cps")
    st = flow_stats(ctx, row, (0.0, 0.0), True, None, 0.1)
    assert st.app == "http" and st.failed_timeout == 10
    d = flow_result(st)
    assert d["established_per_s"] == pytest.approx(1999.0) and "attempted_per_s" not in d
    m = run_metrics({"web": d}, None)
    assert (m["app_attempted"], m["app_established"], m["app_failed"]) == (20_000, 19_990, 10)
    assert m["app_setup_p99_ns"] == 2_000_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loop_flow(proto: str, mode: str, target: float, per: int = 2, port: int | None = None):
    kind = "dns" if proto == "udp" else "http"
    app = AP.AppProgram(kind, 200, 3000, per, False, 0.0, 1.0, mode, target, 0.0, "127.0.20.1", 50)
    prog = FlowProgram(0, "w", "w", "p0", "p1", proto, None, port or _free_port(), 1400, None,
                       None, None, "127.0.0.1", "127.0.0.1", Schedule(pps=0.0), app)  # fmt: skip
    cv = FC.FlowCounterView.anonymous([0])
    return AppFlow(prog, cv.rows[0]), cv


def _drive(af: AppFlow, seconds: float, on: bool = True) -> None:
    sel = selectors.DefaultSelector()
    sel.register(af, selectors.EVENT_READ, af)
    end = time.monotonic_ns() + int(seconds * 1e9)
    while time.monotonic_ns() < end and not (not on and af.idle()):
        wait = af.turn(time.monotonic_ns(), on)
        if sel.select(wait):
            af.poll(time.monotonic_ns())
    sel.unregister(af)


def _counts(cv) -> dict[str, int]:
    r = cv.rows[0]
    return {n: int(r[i]) for i, n in enumerate(FC.FLOW_FIELDS) if not n.startswith("reserved")}


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_appflow_runs_request_response_on_loopback_counting_every_connection(proto):
    af, cv = _loop_flow(proto, "cps", 400.0)
    af.open_server()
    af.begin(time.monotonic_ns())
    _drive(af, 0.5)
    af.end()
    _drive(af, 2.0, on=False)  # the open ones finish
    af.flush()
    c = _counts(cv)
    af.close()
    assert 150 <= c["attempted"] <= 210  # 400/s for 0.5 s, as the loop's turns fall
    assert c["due"] >= c["attempted"]  # the asked rate's count (achieved = attempted / due)
    fails = c["fail_refused"] + c["fail_reset"] + c["fail_timeout"] + c["fail_local"]
    assert fails == 0, c
    assert c["established"] == c["closed"] == c["attempted"] and c["concurrent"] == 0
    assert c["transactions"] == c["served"] == 2 * c["attempted"]  # per_connection 2
    resp = len(AP.http_response(3000) if proto == "tcp" else AP.dns_answer("127.0.0.1"))
    assert c["rx_bytes"] == c["transactions"] * resp
    txn = cv.rows[0][FC.FC_TXN_HIST : FC.FC_TXN_HIST + FC.HIST_BUCKETS]
    assert int(txn.sum()) == c["transactions"]  # every transaction in the histogram
    setup = int(cv.rows[0][FC.FC_SETUP_HIST : FC.FC_SETUP_HIST + FC.HIST_BUCKETS].sum())
    assert setup == (c["established"] if proto == "tcp" else 0)
    if proto == "tcp":
        assert c["accepted"] == c["attempted"]


def test_appflow_counts_refused_connections_and_keeps_a_concurrent_target():
    port = _free_port()
    af, cv = _loop_flow("tcp", "cps", 200.0, port=port)  # no server at all: RST to each SYN
    af.begin(time.monotonic_ns())
    _drive(af, 0.3)
    c = _counts(cv)
    af.close()
    assert c["attempted"] > 0 and c["fail_refused"] == c["attempted"] and c["established"] == 0
    assert fail_slot(None) == FC.FC_FAIL_TIMEOUT
    held, cv2 = _loop_flow("tcp", "concurrent", 40.0, per=1_000_000)
    held.think_ns = 50_000_000  # each connection stays open between its transactions
    held.open_server()
    held.begin(time.monotonic_ns())
    _drive(held, 0.5)
    c2 = _counts(cv2)
    held.close()
    assert c2["concurrent"] == 40 and c2["attempted"] == 40 and c2["established"] == 40


def test_parallel_splits_an_app_entry_over_workers_by_load_and_clients():
    from tgen_tui.engine.flowplan import plan_flow_workers

    entry = (
        WEB
        + "app: {}, load: {concurrent: 20000}, clients: {count: 1000, first: 198.18.104.1}, parallel: 3}"
    )
    flows = compile_profile(load_profile_text(BASE + f"  - {entry}\n")).flows
    assert [f.name for f in flows] == ["w.1", "w.2", "w.3"]
    assert {f.dst_port for f in flows} == {5201}  # one server port (SO_REUSEPORT listeners)
    assert [f.app.clients_count for f in flows] == [333, 333, 334]
    assert [f.app.clients_first for f in flows] == [
        "198.18.104.1",
        "198.18.105.78",
        "198.18.106.155",
    ]
    ips = [ip for f in flows for ip in f.app.client_addresses()]
    assert len(set(ips)) == 1000 and ips[-1] == "198.18.107.232"
    assert [f.app.target for f in flows] == [6666, 6667, 6667]  # whole connections
    plans = plan_flow_workers(tuple(flows), [1], first_id=2)
    assert [p.flows for p in plans] == [(0,), (1,), (2,)]  # a worker each
    with pytest.raises(BadInput) as e:
        load_profile_text(BASE + "  - " + WEB + "app: {}, load: {concurrent: 5}, parallel: 2}\n")
    assert "need as many client addresses" in e.value.lines()[0]


def test_fail_on_app_metrics_judge_the_worst_app_flow():
    from tgen_tui.engine.thresholds import evaluate, parse_thresholds
    from tgen_tui.results.models import RunResult

    web = {
        "protocol": "tcp",
        "app": "http",
        "attempted": 2000,
        "failed": 10,
        "established_per_s": 1990.0,
        "setup_ns": {"p99": 6e6},
        "transaction_ns": {"p99": 2e6},
    }
    bulk = {"protocol": "tcp", "goodput_bps": 1e9, "span_s": 1.0}  # fmt: skip
    r = RunResult.model_validate({"transport": {"streams": {"web": web, "bulk": bulk}}})
    ths = parse_thresholds(["conn_failed>0", "conn_failed>1%", "cps<1995", "setup_p99>5ms",
                            "txn_p99>5"])  # fmt: skip
    got = {b["threshold"]: (b["where"], b["value"]) for b in evaluate(ths, r)}
    assert got == {
        "conn_failed>0": ("flow web", 10),
        "cps<1995": ("flow web", 1990.0),
        "setup_p99>5ms": ("flow web", 6e6),
    }  # 0.5 % failed is not above 1 %; txn_p99 2 ms is not above 5 ms
    with pytest.raises(BadInput):
        parse_thresholds(["setup_p99>5M"])


def test_conntrack_states_count_ctnetlink_entries_by_tcp_state_or_protocol():
    import struct as st

    from tgen_tui.dut import ctstates as CS
    from tgen_tui.dut.netlink import attr

    def entry(proto: int, state: int | None = None) -> bytes:
        orig = attr(
            CS.CTA_TUPLE_ORIG, attr(CS.CTA_TUPLE_PROTO, attr(CS.CTA_PROTO_NUM, bytes([proto])))
        )
        info = b""
        if state is not None:
            tcp = attr(CS.CTA_PROTOINFO_TCP, attr(CS.CTA_PROTOINFO_TCP_STATE, bytes([state])))
            info = attr(CS.CTA_PROTOINFO, tcp)
        return st.pack("=BBH", 2, 0, 0) + orig + info

    msgs = [(CS.CT_GET, entry(6, 7))] * 3 + [(CS.CT_GET, entry(6, 3)), (CS.CT_GET, entry(17))]
    assert CS.count_states(msgs) == {"TIME_WAIT": 3, "ESTABLISHED": 1, "udp": 1}
    assert CS.TCP_STATES[7] == "TIME_WAIT" and CS.entry_state(entry(1)) == "icmp"


def test_the_consoles_record_carries_app_counts_over_a_clear():
    import dataclasses

    from tgen_tui.engine.snapshot import FlowStats, StatsSnapshot
    from tgen_tui.session.record import InteractiveRecord

    f = FlowStats("web", "web", "p0", "p1", "tcp", app="http", attempted=100, due=100,
                  established=98, failed=2, failed_timeout=2, closed=98, transactions=98)  # fmt: skip
    snap = StatsSnapshot(t=1.0, seq=1, ports=(), streams=(), workers=(), flows=(f,))
    rec = InteractiveRecord()
    rec.before_clear(snap)
    after = dataclasses.replace(f, attempted=50, due=60, established=50, failed=0,
                                failed_timeout=0, closed=50, transactions=50)  # fmt: skip
    m = rec.merged(dataclasses.replace(snap, flows=(after,))).flows[0]
    assert (m.attempted, m.due, m.established, m.failed_timeout, m.transactions) == (
        150,
        160,
        148,
        2,
        148,
    )
    assert m.achieved_pct == 100.0 * 150 / 160


def test_think_times_drawn_from_a_law_compile_to_a_seeded_cycle_with_its_mean():
    """``think: {dist: LAW, mean: …}``: one cycle of 4,096 draws per flow worker, the
    law's as SciPy has it (KS), clipped to min..max; a constant compiles to no cycle."""
    from scipy import stats

    from tgen_tui.packets.appcompile import THINK_CYCLE

    text = (PROFILES / "http-hold.yaml").read_text()
    old = "think: 2s"
    assert old in text
    laws = {
        "{dist: exponential, mean: 200ms}": stats.expon(scale=0.2),
        "{dist: gamma, mean: 1s, param: 4}": stats.gamma(4, scale=0.25),
        "{dist: lognormal, mean: 500ms, param: 0.8, max: 60s}": stats.lognorm(
            0.8, scale=0.5 * np.exp(-0.32)
        ),
    }
    for law, ref in laws.items():
        (f,) = compile_profile(load_profile_text(text.replace(old, f"think: {law}"))).flows
        cyc = np.array(f.app.think_cycle)
        assert len(cyc) == THINK_CYCLE and f.app.think_s == pytest.approx(ref.mean())
        assert abs(cyc.mean() - ref.mean()) < 0.05 * ref.mean(), (law, cyc.mean())
        assert stats.kstest(cyc, ref.cdf).statistic < 0.03, law
        again = compile_profile(load_profile_text(text.replace(old, f"think: {law}"))).flows[0]
        assert again.app.think_cycle == f.app.think_cycle  # seeded: the same every compile
        back = flow_from_dict(flow_to_dict(f))  # as the worker gets it
        assert tuple(back.app.think_cycle) == f.app.think_cycle
    clipped = text.replace(old, "think: {dist: exponential, mean: 1s, min: 100ms, max: 2s}")
    cyc = np.array(compile_profile(load_profile_text(clipped)).flows[0].app.think_cycle)
    assert cyc.min() == 0.1 and cyc.max() == 2.0
    (const,) = compile_profile(load_profile_text(text)).flows
    assert const.app.think_cycle == () and const.app.think_s == 2.0
    with pytest.raises(BadInput) as e:
        load_profile_text(text.replace(old, "think: {dist: exponential, mean: 1s, param: 2}"))
    assert "param" in e.value.lines()[0] and len(e.value.lines()) == 1


def test_appflow_pauses_each_connection_by_the_laws_next_draw():
    """Each pause is the cycle's next draw, and drawn pauses end out of order: a short
    pause queued after a long one wakes its connection first (the thinkers are a heap;
    a FIFO would hold it behind the long one)."""
    from tgen_tui.worker import appflows as W

    af, _ = _loop_flow("tcp", "concurrent", 2.0, per=1_000_000)
    af.think_law = [200_000_000, 5_000_000, 7_000_000]
    assert [af._think() for _ in range(4)] == [5_000_000, 7_000_000, 200_000_000, 5_000_000]
    woke: list[int] = []
    af._request = lambda c, now: woke.append(c.fd)  # type: ignore[method-assign]
    for fd, pause in ((10, 200), (11, 5), (12, 7)):  # queued in this order, at t = 0
        c = type("C", (), {"gen": 1, "state": W.THINKING, "fd": fd})()
        af.conns[fd] = c
        af._sleep(pause * 1_000_000, fd, 1)
    af._wake_thinkers(10_000_000)  # at 10 ms: the two short pauses are over
    assert woke == [11, 12]
    af._wake_thinkers(250_000_000)
    assert woke == [11, 12, 10] and not af.thinking
    af.conns.clear()
    af.close()


@pytest.mark.parametrize("kind", ["http", "request-response"])
def test_drawn_response_sizes_are_asked_by_each_request_and_served_on_loopback(kind):
    """``response: {dist: …}``: each request names the next drawn size (http: its path,
    scapy reads it; request-response: 8 leading digits), the server answers that many
    bytes, and the client reads each response whole: no failures, and the bytes read are
    the drawn sizes' responses, in turn, over every transaction."""
    from tgen_tui.packets.appcompile import response_cycle

    law = (
        load_profile_text(
            (PROFILES / "http-cps.yaml")
            .read_text()
            .replace(
                "response: 2000", "response: {dist: lognormal, mean: 3000, param: 1.0, max: 60000}"
            )
        )
        .transport[0]
        .app.response
    )
    cyc = response_cycle(law, "w/0/response")
    assert len(cyc) == 4096 and min(cyc) >= 1 and max(cyc) <= 60000
    assert abs(np.mean(cyc) - 3000) < 0.1 * 3000
    af, cv = _loop_flow("tcp", "cps", 300.0, per=3)
    af.app = app = AP.AppProgram(kind, 200, 3000, 3, False, 0.0, 2.0, "cps", 300.0, 0.0,
                                 "127.0.20.1", 50, response_cycle=cyc)  # fmt: skip
    af.prog = FlowProgram(**{**af.prog.__dict__, "app": app})
    af.req, af.resp = AP.messages(app, "127.0.0.1")
    af.resp_law, af.size_end = list(cyc), AP.SIZE_FIELD[kind][1]
    req = AP.sized_request(app, "127.0.0.1", 4321)
    assert len(req) == len(af.req) and AP.size_asked(app, req) == 4321
    if kind == "http":
        assert HTTPRequest(req).Path == b"/tgen/0004321"
    af.open_server()
    af.begin(time.monotonic_ns())
    _drive(af, 0.4)
    af.end()
    _drive(af, 3.0, on=False)
    af.flush()
    c = _counts(cv)
    af.close()
    fails = c["fail_refused"] + c["fail_reset"] + c["fail_timeout"] + c["fail_local"]
    assert fails == 0 and c["transactions"] == c["served"] == 3 * c["attempted"] > 0, c
    want = sum(AP.response_length(app, cyc[i]) for i in range(c["transactions"]))
    assert c["rx_bytes"] == want
