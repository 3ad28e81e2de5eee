"""The profile editor: errors next to the field (tgen validate's words), no save while
invalid, a saved rate change keeps comments, passes validation and applies live."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from textual.widgets import Input, OptionList

from tgen_tui.profiles.loader import load_profile
from tgen_tui.ui.editor import EditorScreen, FieldRow, rate_only_changes

from .conftest import make_app, settle


async def _open_stream_up(pilot, app) -> EditorScreen:
    await settle(pilot, app, lambda: app.snap is not None)
    await pilot.press("e")
    await pilot.pause(0.2)
    scr = app.screen
    assert isinstance(scr, EditorScreen)
    scr.query_one("#sections", OptionList).highlighted = [s[0] for s in scr.sections].index(
        "stream up"
    )
    await pilot.pause(0.3)
    return scr


def _row(scr: EditorScreen, *path) -> FieldRow:
    return next(r for r in scr.query(FieldRow) if r.path == path)


def test_invalid_vlan_and_rate_show_errors_next_to_the_field_and_cannot_be_saved(lab_copy) -> None:
    before = lab_copy.read_text()

    async def go():
        app, _ = make_app(lab_copy)
        async with app.run_test(size=(100, 30)) as pilot:
            scr = await _open_stream_up(pilot, app)
            vlan = _row(scr, "streams", 0, "vlan")
            vlan.query_one(Input).value = "[{id: 5000}]"
            await pilot.pause(0.2)
            assert vlan.error == "streams[0].vlan[0].id: must be ≤ 4094"
            assert not scr.valid
            await pilot.press("ctrl+s")
            await pilot.pause(0.1)
            assert lab_copy.read_text() == before
            vlan.query_one(Input).value = "[{id: 35}, {id: 76}]"  # QinQ: needs a bigger frame
            await pilot.pause(0.2)
            assert vlan.error == ""
            size = _row(scr, "streams", 0, "size")
            assert "need at least 66 B" in size.error
            size.query_one(Input).value = "66"
            await pilot.pause(0.2)
            assert size.error == "" and scr.valid
            vlan.query_one(Input).value = ""
            rate = _row(scr, "streams", 0, "rate")
            rate.query_one(Input).value = "{pps: 99999999}"
            await pilot.pause(0.2)
            assert rate.error.startswith(
                "streams[0].rate: 99,999,999 fps exceeds the line rate of port p0"
            )
            rate.query_one(Input).value = "fast"
            await pilot.pause(0.2)
            assert "ambiguous rate 'fast'" in rate.error
            rate.query_one(Input).value = "{pps: [1"
            await pilot.pause(0.2)
            assert rate.error.startswith("YAML:")
            assert not scr.action_save()
            assert lab_copy.read_text() == before

    asyncio.run(go())


def test_saved_rate_change_keeps_comments_validates_and_applies_live(lab_copy) -> None:
    async def go():
        app, eng = make_app(lab_copy)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("0", "s")
            await settle(pilot, app, lambda: app.port_state("p0") == "running")
            scr = await _open_stream_up(pilot, app)
            rate = _row(scr, "streams", 0, "rate")
            assert rate.query_one(Input).value == "{pps: 20000}"
            rate.query_one(Input).value = "{pps: 30000}"
            await pilot.pause(0.2)
            assert scr.valid
            derived = str(scr.query_one("#derived").render())
            assert "distinct flows      256" in derived and "30.0 kpps" in derived
            assert "frame size          mean 64.0 B incl. FCS" in derived
            await pilot.press("ctrl+r")
            await settle(pilot, app, lambda: app.snap.port("p0").requested_pps == 30_000)
            assert ("set_rate", "up", 30000.0) in eng.calls
            assert not any(c[0] == "reload" for c in eng.calls)

    asyncio.run(go())
    text = lab_copy.read_text()
    assert "rate: {pps: 30000}" in text
    assert text.startswith("# lab.yaml: the default demo.")  # comments kept
    assert "# starts 0.5 s later" in text or "starts 0.5 s later" in text
    assert load_profile(lab_copy).streams[0].rate.pps == 30000
    cp = subprocess.run(
        [sys.executable, "-m", "tgen_tui", "validate", str(lab_copy)],
        capture_output=True,
        text=True,
    )
    assert cp.returncode == 0, cp.stderr


def test_non_rate_change_reloads_the_engine(lab_copy) -> None:
    async def go():
        app, eng = make_app(lab_copy)
        async with app.run_test(size=(100, 30)) as pilot:
            scr = await _open_stream_up(pilot, app)
            size = _row(scr, "streams", 0, "size")
            size.query_one(Input).value = "128"
            await pilot.pause(0.2)
            await pilot.press("ctrl+r")
            await settle(pilot, app, lambda: any(c[0] == "reload" for c in eng.calls))
            assert ("reload", "lab") in eng.calls

    asyncio.run(go())
    assert "size: 128" in lab_copy.read_text()


def test_rate_only_changes() -> None:
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile_text

    base = open("profiles/lab.yaml").read()
    a = compile_profile(load_profile_text(base))
    b = compile_profile(
        load_profile_text(
            base.replace("rate: {pps: 20000}\n  - name: down", "rate: {pps: 5000}\n  - name: down")
        )
    )
    assert rate_only_changes(a, b) == {"up": 5000.0}
    c = compile_profile(load_profile_text(base.replace("size: 64", "size: 65", 1)))
    assert rate_only_changes(a, c) is None


def test_an_imix_shows_each_sizes_share_of_the_line_rate() -> None:
    """The editor's derived figures name an IMIX's sizes by the bits each puts on the wire
    (with preamble and gap): classic 7 x 84, 4 x 614, 1 x 1538 bits-bytes of 4,582."""
    from tgen_tui.profiles import models as m
    from tgen_tui.ui.editor import mix_share

    assert mix_share(m.ImixSize(imix="classic")) == "64 B 12.8 %, 594 B 53.6 %, 1518 B 33.6 %"
    custom = m.ImixSize.model_validate(
        {"imix": [{"size": 64, "weight": 1}, {"size": 1518, "weight": 1}]}
    )
    assert mix_share(custom) == "64 B 5.2 %, 1518 B 94.8 %"
    assert mix_share(m.FixedSize(fixed=64)) == ""
