"""The Capture screen on the fake engine: ``P`` opens it, a filter is typed, enter starts
a capture of the selected port, the frames are listed as decoded, one in full, space
stops it; a bad filter is one red line; the list stays bounded without a refill. And the
fake's captures themselves: libpcap's programs run over the frames, a pcapng file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static

from tgen_tui.packets.bpf import compile_filter
from tgen_tui.ui.screens import CaptureScreen
from tgen_tui.ui.widgets import RowList

from .conftest import FrozenClock, make_app, settle


def run(coro):
    return asyncio.run(coro)


def frames(app) -> RowList:
    return app.screen.query_one("#cap-frames", RowList)


def rows(app) -> list[list[str]]:
    t = frames(app)
    return [[c.strip() for c in t.texts(i)] for i in range(t.row_count)]


def status(app) -> str:
    return str(app.screen.query_one("#cap-status").render())


def detail(app) -> str:
    return str(app.screen.query_one("#cap-detail", Static).render())


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Captures write under ./captures: here, a temporary directory."""
    monkeypatch.chdir(tmp_path)


def test_P_filter_enter_lists_decoded_frames_detail_and_space_stops(tmp_path) -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("S", "1", "P")
            await settle(pilot, app, lambda: isinstance(app.screen, CaptureScreen))
            assert "p1: no capture" in status(app)
            assert "captures/tgen-p1-" in status(app)  # the file it will write
            await pilot.press("slash", *"udp and dst port 7", "enter")
            await settle(pilot, app, lambda: len(rows(app)) >= 40)  # 3 status lines at least
            assert ("start_capture", ("p1",), "udp and dst port 7", "both") in eng.calls
            assert "p1 running" in status(app) and "ring full 0" in status(app)
            # dst port 7: only the up stream's frames, received on p1, addresses decoded
            for time_, where, stream, addr, length in rows(app):
                assert where == "p1 rx", where
                assert stream.startswith("up #"), stream
                assert addr.startswith("198.18.0.2:1") and addr.endswith("> 198.19.0.2:7 udp")
                assert length == "60" and time_.count(":") == 2
            seqs = [int(r[2].split("#")[1]) for r in rows(app)]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # added, not refilled
            # the cursor follows the newest row; up: the one before, in full
            assert frames(app).cursor_row == frames(app).row_count - 1
            await pilot.press("up")
            await pilot.pause(0.2)
            t = frames(app)
            chosen = rows(app)[t.cursor_row]
            text = detail(app)
            assert f"stream up seq {chosen[2].split('#')[1]} lane 0" in text
            assert "###[ Ethernet ]###" in text and "###[ UDP ]###" in text
            assert "src       = 198.18.0.2" in text and "dst       = 198.19.0.2" in text
            frame = app.screen.selected_frame()
            assert frame is not None and frame.port == "p1" and frame.direction == "rx"
            await pilot.press("space")
            await settle(pilot, app, lambda: "done (stopped)" in status(app))
            assert eng.calls[-1] == ("stop_capture", 1)
            assert "kept" in str(app.screen.query_one("#cap-status").render())
            assert frames(app).row_count >= 10  # kept
        files = list((tmp_path / "captures").glob("tgen-p1-*.pcapng"))
        assert len(files) == 1 and files[0].stat().st_size > 100

    run(go())


def test_a_bad_filter_is_one_red_line_and_nothing_crashes() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("1", "P")
            await settle(pilot, app, lambda: isinstance(app.screen, CaptureScreen))
            await pilot.press("slash", *"udp and")
            await pilot.pause(0.1)
            # checked as it is typed ...
            assert "filter: " in status(app) and "syntax error" in status(app)
            # ... and refused by the engine when started anyway: its line, red
            await pilot.press("enter")
            await settle(pilot, app, lambda: "bad filter" in status(app))
            line = status(app).splitlines()[-1]
            assert line.startswith("capture p1 both: udp and") and "syntax error" in line
            msg = app.screen._msg
            assert msg.plain == line and "red" in str(msg.style)
            assert eng.capture_views() == [] and app.is_running
            # an unknown stream: the engine's line too
            inp = app.screen.query_one("#cap-filter", Input)
            inp.value = "stream sideways"
            await pilot.press("slash", "enter")
            await settle(pilot, app, lambda: "no stream 'sideways'" in status(app))
            assert eng.capture_views() == []
            # fixed: it starts
            inp.value = "stream down"
            await pilot.pause(0.1)
            assert "no stream" not in status(app)  # the typed check passes: the line clears
            await pilot.press("slash", "enter")
            await settle(pilot, app, lambda: "p1 running" in status(app))
            assert [v.spec.filter for v in eng.capture_views()] == ["stream down"]

    run(go())


def test_v_direction_stream_selector_and_restart_with_a_new_filter() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("S", "1", "P", "v", "v")  # both -> rx -> tx
            await settle(pilot, app, lambda: isinstance(app.screen, CaptureScreen))
            assert app.screen.direction == "tx"
            await pilot.press("slash", *"stream down", "enter")
            await settle(pilot, app, lambda: len(rows(app)) >= 5)
            assert {(r[1], r[2].split("#")[0]) for r in rows(app)} == {("p1 tx", "down ")}
            assert all(r[3].startswith("198.19.0.2:7 > 198.19.0.1:1") for r in rows(app))
            # keys typed into the filter are the filter's: "v" does not change direction
            await pilot.press("slash", "end", "v")
            await pilot.pause(0.1)
            assert app.screen.direction == "tx"
            assert app.screen.query_one("#cap-filter", Input).value == "stream downv"
            # enter with a new filter while it runs: stopped, then started again with it
            app.screen.query_one("#cap-filter", Input).value = "udp and src port 7"
            await pilot.press("enter")
            await settle(pilot, app, lambda: len(eng.capture_views()) == 2)
            first, second = eng.capture_views()
            assert first.state == "done" and second.state == "running"
            assert eng.calls[-2:] == [
                ("stop_capture", 1),
                ("start_capture", ("p1",), "udp and src port 7", "tx"),
            ]
            await settle(pilot, app, lambda: any(r[1] == "p1 tx" for r in rows(app)))
            assert app.focused is frames(app)

    run(go())


def test_the_list_stays_bounded_by_adding_and_removing_rows(monkeypatch) -> None:
    """Many status lines on a frozen clock moved by hand: the table holds FRAME_ROWS
    rows, the oldest leave, and it is never cleared on a tick."""
    from tgen_tui.ui.screens.capture import FRAME_ROWS

    clock = FrozenClock()
    app, eng = make_app(clock=clock, tick_s=3600)

    async def go():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            app.tick()
            await pilot.press("S", "1", "P")
            await pilot.pause(0.1)
            app.tick()
            await pilot.press("slash", "enter")  # no filter: every frame
            await pilot.pause(0.1)
            t = frames(app)
            clears = []
            monkeypatch.setattr(t, "clear", lambda *a, **k: clears.append(a))
            firsts = []
            for _ in range(30):
                clock.t += 0.25
                app.tick()
                await pilot.pause(0.01)
                if t.row_count:
                    firsts.append(t.texts(0)[2])
            assert t.row_count == FRAME_ROWS
            assert len(set(firsts)) > 5  # the oldest rows left as new ones came
            assert clears == []
            assert len(app.screen._rows) == FRAME_ROWS
            # full and following: the cursor stays on the last row, whose frame changes
            newest = next(reversed(app.screen._rows.values()))[0]
            assert t.cursor_row == t.row_count - 1
            assert app.screen.selected_frame() is newest
            assert f"{newest.comment}" in detail(app)
            # off the last row the cursor stays on its frame while old rows leave
            t.move_cursor(row=t.row_count - 5)
            await pilot.pause(0.1)
            chosen = app.screen.selected_frame()
            text = detail(app)
            for _ in range(3):
                clock.t += 0.25
                app.tick()
                await pilot.pause(0.05)
            assert t.cursor_row < t.row_count - 5  # rows left above it
            assert app.screen.selected_frame() is chosen and detail(app) == text

    run(go())


def test_help_and_palette_list_the_capture_screen() -> None:
    from tgen_tui.ui.palette import PortCommands

    async def go():
        app, _ = make_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            texts = [t for t, _, _ in PortCommands(app.screen)._commands()]
            assert "show Capture" in texts
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            t = app.screen.query_one("#help", DataTable)
            assert t.get_row("view.capture")[0] == "P"
            assert t.get_row("capture.toggle")[0] == "space"
            assert t.get_row("capture.filter")[0] == "/"
            assert t.get_row("capture.direction")[0] == "v"

    run(go())


# ---------------------------------------------------------------------- the fake's captures
def test_bpf_match_runs_libpcaps_programs_as_tcpdump_means_them() -> None:
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    from tgen_tui.ui.fake_capture import bpf_match

    cases = [
        (
            Ether() / IP(src="1.1.1.1", dst="2.2.2.2") / UDP(sport=10005, dport=7) / (b"x" * 10),
            ["udp", "udp and dst port 7", "src port 10005", "host 2.2.2.2", "greater 40",
             "udp[8:1] = 0x78", "ip[9] = 17", "not tcp", ""],
            ["tcp", "dst port 8", "src host 9.9.9.9", "ip6", "greater 100", "arp", "vlan"],
        ),
        (Ether() / IPv6() / TCP(sport=1, dport=80), ["ip6", "tcp port 80"], ["udp", "ip"]),
        (Ether() / ARP(), ["arp", "arpnd"], ["ip", "udp"]),
        (Ether() / Dot1Q(vlan=5) / IP() / UDP(), ["vlan 5", "vlan and udp"], ["vlan 6", "ip"]),
        (Ether() / IP(frag=5) / UDP(dport=7), [], ["udp dst port 7"]),  # a later fragment
    ]  # fmt: skip
    for pkt, yes, no in cases:
        b = bytes(pkt)
        for e in yes:
            assert bpf_match(compile_filter(e), b), (e, pkt.summary())
        for e in no:
            assert not bpf_match(compile_filter(e), b), (e, pkt.summary())
    assert not bpf_match(compile_filter("udp[100:4] = 1"), bytes(cases[0][0]))  # out of bounds


def test_the_fake_capture_counts_budget_and_writes_a_pcapng(tmp_path) -> None:
    from scapy.utils import PcapNgReader

    from tgen_tui.diagnostics import BadInput
    from tgen_tui.engine.capture import CaptureSpec

    clock = FrozenClock()
    app, eng = make_app(clock=clock)

    async def go():
        await eng.start(None)
        clock.t += 1.0
        f = str(tmp_path / "c.pcapng")
        with pytest.raises(BadInput, match="unknown port p7"):
            await eng.start_capture(CaptureSpec(ports=("p7",), file=f))
        with pytest.raises(BadInput, match="does not exist"):
            await eng.start_capture(CaptureSpec(ports=("p1",), file="/nonexistent/x.pcapng"))
        v = await eng.start_capture(CaptureSpec(ports=("p1",), file=f, budget_pps=5000))
        assert v.state == "running" and v.kept == 0
        clock.t += 2.0
        (v,) = eng.capture_views()
        # 2 s of 20 kfps up (rx) and 20 kfps down (tx) on p1: 80,000 seen, 3 s of budget kept
        assert v.seen == 80_000 and v.kept == 15_000 and v.over_budget == 65_000
        assert {(r.port, r.direction) for r in v.recent} == {("p1", "rx"), ("p1", "tx")}
        assert len(v.recent) == 16 and "over the budget of 5,000/s: 65,000 not kept" in v.line()
        final = await eng.stop_capture(v.id)
        assert final.state == "done" and final.reason == "stopped"
        return f, v

    f, v = run(go())
    got = list(PcapNgReader(f))
    assert len(got) == 16
    assert [bytes(p) for p in got] == [r.data for r in v.recent]
    assert Path(f).read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"


def test_L_keeps_the_lost_frames_of_every_port_and_L_again_stops_it() -> None:
    async def go():
        app, eng = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("S", "P")
            await settle(pilot, app, lambda: isinstance(app.screen, CaptureScreen))
            await pilot.press("L")
            await settle(pilot, app, lambda: any(c[0] == "start_capture" for c in eng.calls))
            (start,) = [c for c in eng.calls if c[0] == "start_capture"]
            assert set(start[1]) == {"p0", "p1"}  # every port a stream uses
            (v,) = eng.capture_views()
            assert (
                v.spec.lost and v.spec.lost_guard_s == 0.5 and "captures/tgen-lost-" in v.spec.file
            )
            await pilot.press("L")
            await settle(pilot, app, lambda: ("stop_capture", v.id) in eng.calls)

    run(go())
