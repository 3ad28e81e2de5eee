"""Keymap file (remap by binding id; footer and Help show the new key), bad keymaps, and
the command palette (ports, actions, profiles)."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey

from tgen_tui.diagnostics import BadInput
from tgen_tui.ui.keymap import load_keymap

from .conftest import make_app, settle


def test_keymap_file_remaps_start_and_footer_and_help_show_it(tmp_path) -> None:
    km = tmp_path / "keymap.toml"
    km.write_text('# my keys\n"port.start" = "x"\n[keymap]\n"view.streams" = "F,f2"\n')
    keymap = load_keymap(km)
    assert keymap == {"port.start": "x", "view.streams": "F,f2"}

    async def go():
        app, eng = make_app(keymap=keymap)
        async with app.run_test(size=(100, 24)) as pilot:
            # the footer composes its keys a moment after the screen: wait for them too
            await settle(
                pilot, app, lambda: app.snap is not None and bool(app.screen.query(FooterKey))
            )
            footer = {k.action: k.key_display for k in app.screen.query(FooterKey)}
            assert footer.get("start_selected") == "x"
            first = next(iter(app.screen.query(FooterKey)))  # still first: visible at 80 columns
            assert (first.action, first.key_display) == ("start_selected", "x")
            await pilot.press("s")  # the old key does nothing now
            await pilot.pause(0.2)
            assert eng.calls == []
            await pilot.press("0", "x")
            await settle(pilot, app, lambda: app.port_state("p0") == "running")
            assert eng.calls == [("start", ["p0"])]
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            t = app.screen.query_one("#help", DataTable)
            assert t.get_row("port.start")[0] == "x"
            assert t.get_row("view.streams")[0] == "F, f2"
            await pilot.press("f2")
            await pilot.pause(0.2)
            assert app.screen.VIEW == "streams"

    asyncio.run(go())


def test_bad_keymaps_are_bad_input(tmp_path) -> None:
    bad = tmp_path / "k.toml"
    bad.write_text('"port.launch" = "x"\n')
    with pytest.raises(BadInput, match="unknown binding id 'port.launch'"):
        load_keymap(bad)
    bad.write_text('"port.start" = \n')
    with pytest.raises(BadInput, match=str(bad)):
        load_keymap(bad)
    with pytest.raises(BadInput, match="no such file"):
        load_keymap(tmp_path / "missing.toml")


def test_palette_lists_ports_actions_and_profiles_and_runs_start_p1() -> None:
    async def go():
        from tgen_tui.ui.palette import PortCommands, ProfileCommands

        app, eng = make_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            texts = [t for t, _, _ in PortCommands(app.screen)._commands()]
            for want in (
                "start p0",
                "start p1",
                "stop p1",
                "set rate of p0…",
                "start all ports",
                "clear counters",
                "show DUT",
                "quit",
            ):
                assert want in texts
            profiles = ProfileCommands(app.screen)._profiles()
            assert any(p.endswith("nat44-stateful.yaml") for p in profiles)
            await pilot.press("ctrl+p")
            await pilot.pause(0.3)
            await pilot.press(*"start p1")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await settle(pilot, app, lambda: app.port_state("p1") == "running")
            assert eng.calls == [("start", ["p1"])]

    asyncio.run(go())


def test_after_a_remap_palette_and_help_show_the_effective_key() -> None:
    """Remap port.start (and a digit): the palette's help lines and Help's Keys column
    show the new keys, not the defaults; the palette's command still starts the port."""
    from textual.command import CommandList

    async def go():
        app, eng = make_app(keymap={"port.start": "ctrl+g", "port.select1": "f7"})
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, lambda: app.snap is not None)
            await pilot.press("ctrl+p")
            await pilot.pause(0.3)
            await pilot.press(*"start p1")
            await pilot.pause(0.5)
            shown = [o.prompt.plain for o in app.screen.query_one(CommandList).options]
            line = next(x for x in shown if x.startswith("start p1"))
            assert "keys f7 then ctrl+g" in line, shown
            assert not any("then s" in x for x in shown), shown
            await pilot.press("enter")
            await settle(pilot, app, lambda: app.port_state("p1") == "running")
            assert eng.calls == [("start", ["p1"])]
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            t = app.screen.query_one("#help", DataTable)
            assert t.get_row("port.start")[0] == "ctrl+g"
            assert t.get_row("digits")[0].startswith("0, f7, 2 …")
            assert t.get_row("port.stop")[0] == "t"  # the others keep their defaults

    asyncio.run(go())


def test_one_table_builds_bindings_help_palette_and_keymap_ids(tmp_path) -> None:
    """Every action id is a binding, a Help row (the digits as one) and a valid keymap id."""
    from textual.binding import Binding

    from tgen_tui.ui.actions import (
        ACTION_IDS,
        ACTIONS,
        APP,
        bindings,
        help_rows,
        palette_commands,
    )

    scopes = {APP} | {a.scope for a in ACTIONS}  # the app's, the Streams and Capture screens'
    assert scopes == {APP, "streams", "capture"}
    bound = {b.id for scope in scopes for b in bindings(scope) if isinstance(b, Binding)}
    assert bound == {a.id for a in ACTIONS}  # every action is bound in its screen's scope
    assert len(ACTIONS) == len(ACTION_IDS)  # ids are unique
    # every id of the table is a valid keymap id; an id the table lacks is not
    keymap = tmp_path / "keymap.toml"
    keymap.write_text("".join(f'"{a.id}" = "f{n % 12 + 1}"\n' for n, a in enumerate(ACTIONS)))
    assert set(load_keymap(keymap)) == {a.id for a in ACTIONS}
    keymap.write_text('"port.launch" = "x"\n')
    with pytest.raises(BadInput, match="unknown binding id 'port.launch'"):
        load_keymap(keymap)
    helped = {i for _, _, i in help_rows({})}
    assert helped == (ACTION_IDS - {f"port.select{i}" for i in range(10)}) | {"port.select0 … 9"}
    cmds = {c.text: c for c in palette_commands(["p0", "p1"], {"counters.clear": "x"})}
    assert cmds["clear counters"].help == "key x"
    assert cmds["start p0"].action == "start_selected('p0')"
    assert cmds["select p1"].action == "select_port(1)"
    assert "select p2" not in cmds
