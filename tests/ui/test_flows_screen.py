"""The Flows screen and the socket flows on Main and the port page, on the fake engine
(it simulates every flow of the profile: ui/fake_flows.py), on a frozen clock moved by
hand: ``n`` opens it, ``r``/``+``/``-`` set the highlighted UDP flow's rate and refuse a
TCP flow's, ``s``/``t`` of a port start and stop its flows' goodput, a port with only UDP
flows steps their bit/s on Main, and Main and the port page show the flows' goodput."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable

from tgen_tui.ui.actions import ACTIONS, VIEW_KEYS, help_rows
from tgen_tui.ui.rates import rate_step
from tgen_tui.ui.screens import FlowsScreen, MainScreen, PortScreen, RatePrompt
from tgen_tui.ui.widgets import Grid, TextWidget

from .conftest import PROFILES, FrozenClock, make_app

CC = PROFILES / "cc-regression.yaml"  # cubic-a, cubic-b (5-25 s), reno, background (UDP on/off)
MIXED = PROFILES / "tcp-under-load.yaml"  # a frame stream and a TCP flow from p0


def run(coro) -> None:
    asyncio.run(coro)


async def ticks(pilot, app, clock: FrozenClock, seconds: float) -> None:
    """Move the clock by ``seconds`` at 10 Hz, one tick each (the history fills)."""
    for _ in range(round(seconds * 10)):
        clock.t += 0.1
        app.tick()
    await pilot.pause(0.05)


async def press(pilot, app, *keys: str) -> None:
    """Press keys, then let the commands they submit run and the screen redraw."""
    await pilot.press(*keys)
    await pilot.pause(0.1)
    app.tick()
    await pilot.pause(0.05)


def _cell(app, flow: str, col: str) -> str:
    t = app.screen.query_one("#flows", DataTable)
    return str(t.get_cell(flow, col)).strip()


def _highlight(app, flow: str) -> None:
    t = app.screen.query_one("#flows", DataTable)
    t.move_cursor(row=t.get_row_index(flow))


async def _start_then_flows(pilot, app, clock: FrozenClock, seconds: float) -> DataTable:
    """``S``, ``seconds`` of the fake's flows, then ``n``: the Flows screen's table."""
    await pilot.pause(0.1)
    app.tick()
    await press(pilot, app, "S")
    await ticks(pilot, app, clock, seconds)
    await press(pilot, app, "n")
    assert isinstance(app.screen, FlowsScreen)
    return app.screen.query_one("#flows", DataTable)


def test_n_opens_the_flows_screen_with_every_flow_and_its_figures() -> None:
    async def go():
        clock = FrozenClock()
        app, _ = make_app(CC, clock=clock, tick_s=3600)
        async with app.run_test(size=(120, 36)) as pilot:
            t = await _start_then_flows(pilot, app, clock, 6.0)
            assert [r.value for r in t.rows] == ["cubic-a", "cubic-b", "reno", "background"]
            assert _cell(app, "cubic-a", "state") == "sending"
            assert _cell(app, "cubic-a", "good").endswith("Mbit/s")
            assert _cell(app, "cubic-a", "rtt").endswith("ms")
            assert _cell(app, "cubic-a", "loss") == "-"  # a TCP flow has no UDP loss
            assert _cell(app, "background", "rtt") == "-"
            assert _cell(app, "background", "loss").endswith("%")
            fair = str(app.screen.query_one("#flow-fairness", TextWidget).render())
            assert "live 0.9" in fair, fair
            _highlight(app, "reno")
            await ticks(pilot, app, clock, 0.3)
            detail = str(app.screen.query_one("#flow-detail", TextWidget).render())
            assert "reno  tcp reno  p0 → p1" in detail and "Mathis" in detail, detail
            assert "Mbit/s for Reno (MSS/RTT × 1.22/√p)" in detail  # from the snapshot

    run(go())


def test_the_flows_key_is_declared_once_for_bindings_help_and_palette() -> None:
    flows = next(a for a in ACTIONS if a.id == "view.flows")
    assert (flows.key, flows.action) == ("n", "view('flows')")
    assert ("n", "flows") in VIEW_KEYS
    assert any(r[2] == "view.flows" and r[0] == "n" for r in help_rows({}))
    assert flows.palette == "show Flows"


def test_r_plus_minus_set_the_highlighted_udp_flows_rate() -> None:
    async def go():
        clock = FrozenClock()
        app, eng = make_app(CC, clock=clock, tick_s=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await press(pilot, app, "S", "n")
            await ticks(pilot, app, clock, 1.0)
            _highlight(app, "background")
            await press(pilot, app, "r")
            assert isinstance(app.screen, RatePrompt)
            assert "a bit rate" in app.screen.hint and app.screen.port == "flow background"
            await press(pilot, app, *"5M", "enter")
            assert eng.calls[-1] == ("set_rate", "background", "5M")
            await ticks(pilot, app, clock, 0.5)
            assert app.snap.flow("background").requested_bps == 5e6
            assert eng.describe().flow("background").rate_bps == 5e6
            await press(pilot, app, "plus")
            assert eng.calls[-1] == ("set_rate", "background", rate_step(5e6, 1))
            await press(pilot, app, "minus")  # 10 M -> 5 M (each step from the snapshot's)
            await press(pilot, app, "minus")  # -> 2 M
            await ticks(pilot, app, clock, 0.2)
            assert app.snap.flow("background").requested_bps == 2e6
            assert any("flow background on p0: rate" in x for x in app.log_lines)

    run(go())


def test_rate_keys_refuse_a_tcp_flow_and_send_nothing() -> None:
    async def go():
        clock = FrozenClock()
        app, eng = make_app(CC, clock=clock, tick_s=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await press(pilot, app, "S", "n")
            _highlight(app, "cubic-a")
            before = list(eng.calls)
            for key in ("r", "plus", "minus"):
                await press(pilot, app, key)
                assert isinstance(app.screen, FlowsScreen), key  # no rate prompt
            assert eng.calls == before  # nothing reached the engine
            refusals = [x for x in app.log_lines if x.startswith("refused: cubic-a")]
            assert len(refusals) == 3 and "congestion control" in refusals[0], refusals
            notes = [n.message for n in app._notifications]
            assert any("cubic-a is a TCP flow" in m for m in notes), notes

    run(go())


def test_stop_and_start_of_a_port_stop_and_start_its_flows_goodput() -> None:
    async def go():
        clock = FrozenClock()
        app, eng = make_app(MIXED, clock=clock, tick_s=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await press(pilot, app, "S", "n")
            await ticks(pilot, app, clock, 2.0)
            assert app.snap.flow("goodput").goodput_bps > 100e6
            assert _cell(app, "goodput", "state") == "sending"
            await press(pilot, app, "0", "t")  # the flow's port
            assert eng.calls[-1] == ("stop", ["p0"])
            await ticks(pilot, app, clock, 1.0)
            f = app.snap.flow("goodput")
            assert (f.state, f.goodput_bps) == ("stopped", 0.0)
            assert _cell(app, "goodput", "good") == "0 bit/s"
            assert app.port_state("p1") == "running"  # the other port goes on
            await press(pilot, app, "s")
            await ticks(pilot, app, clock, 1.0)
            f = app.snap.flow("goodput")
            assert f.state == "sending" and f.goodput_bps > 100e6 and f.connections == 2

    run(go())


UDP_PORT = """\
name: udp-port
ports:
  p0: {interface: p0, netns: tgen-tester, speed: 10G}
  p1: {interface: p1, netns: tgen-tester, speed: 10G}
streams: []
hosts:
  p0: {netns: tgen-h0, ipv4: 198.18.100.2}
  p1: {netns: tgen-h1, ipv4: 198.19.100.2}
transport:
  - {name: bulk, port: p0, rx_port: p1, protocol: tcp}
  - {name: back, port: p1, rx_port: p0, protocol: udp, rate: 2M, parallel: 2}
"""


def test_on_main_a_port_with_only_udp_flows_steps_their_bit_rate(tmp_path: Path) -> None:
    prof = tmp_path / "udp-port.yaml"
    prof.write_text(UDP_PORT)

    async def go():
        clock = FrozenClock()
        app, eng = make_app(prof, clock=clock, tick_s=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await press(pilot, app, "1", "plus")  # back.1 + back.2 = 4 Mbit/s -> 5
            assert eng.calls[-1] == ("set_rate", "p1", 5e6)
            app.tick()
            assert [f.requested_bps for f in app.snap.flows][1:] == [2.5e6, 2.5e6]
            await press(pilot, app, "r")
            assert isinstance(app.screen, RatePrompt) and "a bit rate" in app.screen.hint
            await press(pilot, app, "escape")
            # p0 sends only a TCP flow: the rate keys are greyed out there
            await press(pilot, app, "0")
            assert app.check_action("rate_step", (1,)) is None
            await press(pilot, app, "plus")
            assert eng.calls[-1] == ("set_rate", "p1", 5e6)

    run(go())


def test_main_and_the_port_page_show_the_flows_goodput() -> None:
    async def go():
        clock = FrozenClock()
        app, _ = make_app(MIXED, clock=clock, tick_s=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await press(pilot, app, "S")
            await ticks(pilot, app, clock, 2.0)
            assert isinstance(app.screen, MainScreen)
            g = app.screen.query_one("#ports", Grid)
            good = float(str(g.cells[("goodput", "p0")]).replace(",", ""))
            assert good == round(app.snap.flow("goodput").goodput_bps / 1e6, 2) > 100
            assert g.cells[("goodput", "p1")] == "-"  # p1 sends no flow
            assert app.screen.query("#spark-goodput-p0")  # a goodput sparkline at 80x24
            await press(pilot, app, "0", "o")
            assert isinstance(app.screen, PortScreen)
            fg = app.screen.query_one("#port-flows", Grid)
            assert fg.display and fg.columns == ["goodput"]
            assert str(fg.cells[("good", "goodput")]).endswith("Mbit/s")
            assert app.history.values(("goodput", "port:p0"), app.window)[-1] > 100e6

    run(go())


def test_a_profile_without_flows_has_no_goodput_row_and_an_empty_flows_screen() -> None:
    async def go():
        app, _ = make_app(clock=FrozenClock(), tick_s=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await pilot.pause(0.05)
            g = app.screen.query_one("#ports", Grid)
            assert "goodput" not in [k for k, _ in g.rows]
            await press(pilot, app, "n")
            assert app.screen.query_one("#flows", DataTable).row_count == 0
            text = str(app.screen.query_one("#flow-fairness", TextWidget).render())
            assert "no socket flows" in text

    run(go())


def test_the_rtt_history_has_gaps_while_a_flow_is_off() -> None:
    async def go():
        clock = FrozenClock()
        app, _ = make_app(CC, clock=clock, tick_s=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await press(pilot, app, "S")
            await ticks(pilot, app, clock, 3.0)  # cubic-b starts at 5 s
            rtt_b = app.history.values(("rtt", "cubic-b"), app.window)
            rtt_a = app.history.values(("rtt", "cubic-a"), app.window)
            assert all(v is None for v in rtt_b) and rtt_a[-1] is not None
            assert ("rtt", "background") not in app.history.series  # UDP: no RTT
            await ticks(pilot, app, clock, 3.0)
            assert app.history.values(("rtt", "cubic-b"), app.window)[-1] is not None

    run(go())


HTTP = PROFILES / "http-cps.yaml"  # one request/response flow: 2,000 conn/s, 1,000 clients


def test_an_app_flow_shows_connections_per_second_and_open_connections_as_charts() -> None:
    async def go():
        clock = FrozenClock()
        app, _ = make_app(HTTP, clock=clock, tick_s=3600)
        async with app.run_test(size=(120, 36)) as pilot:
            t = await _start_then_flows(pilot, app, clock, 4.0)
            assert [str(c.label).strip() for c in t.columns.values()][:8] == [
                "Flow", "Proto", "State", "Conn/s", "Open", "Failed", "Txn/s", "Setup p99",
            ]  # fmt: skip
            assert _cell(app, "web", "proto") == "http tcp"
            assert _cell(app, "web", "cps") == "2,000"  # the fake's connections, as asked
            assert _cell(app, "web", "fail") == "0"
            assert _cell(app, "web", "setup").endswith("µs")
            detail = str(app.screen.query_one("#flow-detail", TextWidget).render())
            assert (
                "2,000 conn/s asked · achieved 100.0 %" in detail
                and "refused 0, reset 0, timed out 0" in detail
            )
            cps, conc = app.screen.query_one("#fchart-good"), app.screen.query_one("#fchart-rtt")
            assert (cps.title, conc.title) == ("Connections/s", "Concurrent")
            series = [v for v in app.history.values(("cps", "web"), app.window) if v]
            assert series and round(max(series)) == 2000, series
            assert any(v for v in app.history.values(("open", "web"), app.window))
            rendered = "".join(s.text for s in cps._strips)
            assert "web" in rendered  # the line's legend is drawn

    run(go())
