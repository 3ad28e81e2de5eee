"""Every console binding on the fake engine: keys become engine commands, impossible
actions are disabled, refusals are shown (never a crash), q asks when traffic runs."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Input

from tgen_tui.ui.app import rate_step
from tgen_tui.ui.screens import (
    CaptureScreen,
    ConfirmQuit,
    DutScreen,
    FlowsScreen,
    HelpScreen,
    LogScreen,
    MainScreen,
    RatePrompt,
    StreamsScreen,
    WorkersScreen,
)
from tgen_tui.ui.widgets import Grid

from .conftest import make_app, settle


def run(coro):
    return asyncio.run(coro)


def test_digits_select_and_s_t_start_stop_the_selected_port() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("1", "s")
            await settle(pilot, app, lambda: app.port_state("p1") == "running")
            assert app.selected == 1
            assert eng.calls == [("start", ["p1"])]
            assert app.port_state("p0") == "idle"
            # the Main screen marks the selected port's column
            label = str(app.screen.query_one("#ports", Grid).headers["p1"])
            assert "◀" in label
            await pilot.press("s")  # start on a running port is disabled: no second call
            await pilot.pause(0.1)
            assert eng.calls == [("start", ["p1"])]
            await pilot.press("t")
            await settle(pilot, app, lambda: app.port_state("p1") == "stopped")
            assert eng.calls[-1] == ("stop", ["p1"])
            await pilot.press("9")  # no port 9: selection stays
            assert app.selected == 1
            await pilot.press("0")
            assert app.selected == 0

    run(go())


def test_S_T_start_and_stop_every_port() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("S")
            await settle(
                pilot, app, lambda: all(app.port_state(p) == "running" for p in ("p0", "p1"))
            )
            assert ("start", None) in eng.calls
            snap = eng.latest_snapshot()
            assert all(p.state == "running" for p in snap.ports)
            await pilot.press("T")
            await settle(
                pilot, app, lambda: all(app.port_state(p) == "stopped" for p in ("p0", "p1"))
            )
            assert eng.calls[-1] == ("stop", None)

    run(go())


def test_plus_minus_step_the_rate_and_r_sets_an_exact_rate() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("0", "plus")
            await settle(pilot, app, lambda: app.snap.port("p0").requested_pps == 50_000)
            assert eng.calls[-1] == ("set_rate", "p0", 50_000.0)
            # one step at a time: a step starts from the rate the console last saw (a second
            # key pressed before the snapshot shows the first step steps from the old rate)
            await pilot.press("minus")
            await settle(pilot, app, lambda: app.snap.port("p0").requested_pps == 20_000)
            await pilot.press("minus")
            await settle(pilot, app, lambda: app.snap.port("p0").requested_pps == 10_000)
            assert eng.calls[-2:] == [("set_rate", "p0", 20_000.0), ("set_rate", "p0", 10_000.0)]
            await pilot.press("r")
            await pilot.pause(0.1)
            assert isinstance(app.screen, RatePrompt)
            await pilot.press(*"25kpps", "enter")
            await settle(pilot, app, lambda: app.snap.port("p0").requested_pps == 25_000)
            assert eng.calls[-1] == ("set_rate", "p0", "25kpps")
            # a refused rate is a notification and a log line, not a crash
            await pilot.press("r", *"fast", "enter")
            await settle(pilot, app, lambda: any("refused" in x for x in app.log_lines))
            assert app.is_running
            assert any("p0:" in x and "refused" in x for x in app.log_lines)
            # percent of line rate
            await pilot.press("r", *"1%", "enter")
            await settle(pilot, app, lambda: app.snap.port("p0").requested_pps > 100_000)
            assert (
                round(app.snap.port("p0").requested_pps) == 148_810
            )  # 1 % of 14.88 Mpps (10G, 64 B)

    run(go())


def test_rate_step_follows_the_1_2_5_series() -> None:
    assert rate_step(20_000, 1) == 50_000
    assert rate_step(20_000, -1) == 10_000
    assert rate_step(30_000, 1) == 50_000
    assert rate_step(30_000, -1) == 20_000
    assert rate_step(1_000, -1) == 500


def test_view_keys_switch_screens_and_help_lists_every_key() -> None:
    async def go():
        app, _ = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            for key, cls in (
                ("f", StreamsScreen),
                ("n", FlowsScreen),
                ("d", DutScreen),
                ("w", WorkersScreen),
                ("l", LogScreen),
                ("P", CaptureScreen),
                ("question_mark", HelpScreen),
                ("m", MainScreen),
            ):
                await pilot.press(key)
                await pilot.pause(0.15)
                assert isinstance(app.screen, cls), key
            await pilot.press("question_mark")
            await pilot.pause(0.1)
            help_table = app.screen.query_one("#help", DataTable)
            ids = {
                help_table.get_row(k)[2]
                for k in help_table.rows
                if k.value not in ("digits", "palette")
            }
            assert {
                "port.start",
                "port.stop",
                "port.start_all",
                "port.stop_all",
                "rate.up",
                "rate.down",
                "rate.set",
                "counters.clear",
                "profile.edit",
                "view.main",
                "view.streams",
                "view.flows",
                "view.dut",
                "view.workers",
                "view.log",
                "view.help",
                "app.quit",
                "stream.pause",
                "view.capture",
                "capture.toggle",
            } <= ids

    run(go())


def test_p_pauses_and_resumes_the_highlighted_stream_and_c_clears() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(100, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("S", "f")
            await settle(pilot, app, lambda: app.port_state("p0") == "running")
            await pilot.press("p")
            await settle(pilot, app, lambda: app.snap.stream("up").paused)
            assert eng.calls[-1] == ("pause", "up")
            assert "PAUSED" in str(
                app.screen.query_one("#streams", DataTable).get_cell("up", "state")
            )
            await pilot.press("p")
            await settle(pilot, app, lambda: not app.snap.stream("up").paused)
            assert eng.calls[-1] == ("resume", "up")
            await pilot.press("c")
            await settle(pilot, app, lambda: eng.calls[-1][0] == "clear")
            assert eng.calls[-1] == ("clear", None, None)
            assert any("counters cleared" in x for x in app.log_lines)

    run(go())


def test_log_screen_shows_typed_events() -> None:
    async def go():
        app, _ = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("0", "s", "l")
            await settle(pilot, app, lambda: app.log_total >= 1)
            await pilot.pause(0.2)
            lines = list(app.screen.query_one("#log").lines)
            assert any("port_state" in x and "port p0: idle -> starting" in x for x in lines)

    run(go())


def test_q_when_idle_quits_at_once() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("q")
            await pilot.pause(0.3)
        assert app.return_code == 0

    run(go())


def test_q_when_running_asks_n_keeps_running_y_stops_and_quits() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("0", "s")
            await settle(pilot, app, lambda: app.port_state("p0") == "running")
            await pilot.press("q")
            await pilot.pause(0.1)
            assert isinstance(app.screen, ConfirmQuit)
            await pilot.press("n")
            await pilot.pause(0.1)
            assert app.is_running and app.port_state("p0") == "running"
            await pilot.press("ctrl+c")  # same path as q
            await pilot.pause(0.1)
            assert isinstance(app.screen, ConfirmQuit)
            await pilot.press("y")
            await pilot.pause(0.5)
        assert ("stop", None) in eng.calls
        assert eng.latest_snapshot().port("p0").state == "stopped"

    run(go())


def test_e_opens_the_editor_and_escape_closes_it(lab_copy) -> None:
    async def go():
        from tgen_tui.ui.editor import EditorScreen

        app, _ = make_app(lab_copy)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("e")
            await pilot.pause(0.2)
            assert isinstance(app.screen, EditorScreen)
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert isinstance(app.screen, MainScreen)

    run(go())


def test_rate_prompt_escape_cancels() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("r")
            await pilot.pause(0.1)
            assert isinstance(app.screen.query_one(Input), Input)
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert not any(c[0] == "set_rate" for c in eng.calls)

    run(go())


def test_without_a_profile_the_picker_opens_the_chosen_one_idle() -> None:
    from textual.widgets import OptionList

    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile
    from tgen_tui.ui.app import TgenApp
    from tgen_tui.ui.fake import FakeEngine
    from tgen_tui.ui.host import AsyncioEngineHost, fake_engine_cm
    from tgen_tui.ui.screens import ProfilePicker

    from .conftest import PROFILES

    picked: list[str] = []

    def build(path: str):
        picked.append(path)
        compiled = compile_profile(load_profile(path))
        eng = FakeEngine(compiled)
        return AsyncioEngineHost(lambda: fake_engine_cm(eng)), compiled

    async def go():
        app = TgenApp(None, host_builder=build, profiles_dir=str(PROFILES))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.2)
            assert isinstance(app.screen, ProfilePicker)
            files = app.screen.files
            assert any(f.endswith("nat44-stateful.yaml") for f in files)
            app.screen.query_one(OptionList).highlighted = files.index(
                next(f for f in files if f.endswith("nat44-stateful.yaml"))
            )
            await pilot.press("enter")
            await settle(pilot, app, lambda: app.snap is not None)
            assert picked and picked[0].endswith("nat44-stateful.yaml")
            assert isinstance(app.screen, MainScreen)
            assert app.desc.profile == "nat44-stateful"
            assert all(p.state == "idle" for p in app.snap.ports)

    run(go())
