"""The console app: one engine host, six view screens, keys that become engine commands.

A single 10 Hz timer pulls ``engine.latest_snapshot()`` and ``events_since(cursor)``,
keeps short ring buffers (pps per port, conntrack count), and redraws only the visible
screen (CONSOLE.md). Every engine command goes through the host, so a refusal becomes
a notification and a log line, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ScreenStackError

from tgen_tui.engine.api import EngineAPI, EngineDescription, EngineEvent
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.session.exits import signal_exit
from tgen_tui.ui.actions import APP, bindings
from tgen_tui.ui.history import WINDOWS, History
from tgen_tui.ui.host import AsyncioEngineHost, GuestEngineHost
from tgen_tui.ui.palette import PortCommands, ProfileCommands
from tgen_tui.ui.rates import (
    RateTarget,
    Refused,
    flow_target,
    port_has_rate,
    port_target,
    rate_step,
)
from tgen_tui.ui.screens import VIEW_SCREENS, ConfirmQuit, ProfilePicker, RatePrompt, ViewScreen

FORCED_EXIT_S = 8.0  # after SIGTERM/SIGHUP, the most the console may take to close

Host = GuestEngineHost | AsyncioEngineHost
HostBuilder = Callable[[str], "tuple[Host, object]"]  # profile path -> (host, compiled)

HISTORY = 600  # samples kept per ring buffer (60 s at 10 Hz)
# actions that need an engine with a described port (greyed out until then, and on quit)
PORT_ACTIONS = frozenset(
    {"start_selected", "stop_selected", "start_all", "stop_all", "rate_step", "rate_prompt"}
    | {"clear", "select_port"}
)


class TgenApp(App):
    """``tgen tui``: Pktgen-style port columns, keys per port, live DUT conntrack."""

    CSS_PATH = "tgen.tcss"
    TITLE = "tgen-tui"
    BINDINGS = bindings(APP)
    COMMANDS = App.COMMANDS | {PortCommands, ProfileCommands}
    ENABLE_COMMAND_PALETTE = True

    def __init__(
        self,
        host: Host | None = None,
        *,
        compiled=None,
        profile_path: str | None = None,
        host_builder: HostBuilder | None = None,
        keymap: dict[str, str] | None = None,
        json_path: str | None = None,
        profiles_dir: str = "profiles",
        tick_s: float = 0.1,
        results_db: str | None = None,
    ) -> None:
        super().__init__()
        self.host = host
        self.compiled = compiled
        self.profile_path = profile_path
        self.host_builder = host_builder
        self.keymap_overrides = dict(keymap or {})
        self.json_path = json_path
        self.profiles_dir = profiles_dir
        self.results_db = results_db
        self.tick_s = tick_s
        self.selected = 0
        self.desc: EngineDescription | None = None
        self.snap: StatsSnapshot | None = None
        self.port_history: dict[tuple[str, str], deque] = {}
        self.ct_history: deque = deque(maxlen=HISTORY)
        self.history = History()  # the charts' rings (ui/history.py)
        self.window = WINDOWS[0]  # the charts' window: 60 s or 10 min (key g)
        self.log_lines: deque = deque(maxlen=2000)
        self.log_total = 0
        self._cursor = 0
        self._engine_ready = False
        self._setup_done: set[str] = set()
        self._state_sig: tuple = ()
        self.result: dict | None = None  # the session's result (tgen run's shape), on quit
        self.run_result: Any = None  # the same, typed (results.models.RunResult)
        self.stored = False  # filed in the results store (once)
        self.exit_message: str | None = None
        self.quitting = False
        self.signal_name: str | None = None
        self.on_forced_exit: Callable[[dict], object] | None = None  # stores the result (cli)
        self.cli_dut: tuple[str | None, str | None] = (None, None)  # --dut-netns, --dut-ssh

    # ------------------------------------------------------------------ lifecycle
    async def on_mount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):  # stop the ports and write --json, as q does
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal, sig)
        if self.keymap_overrides:
            self.set_keymap(self.keymap_overrides)
        for name, cls in VIEW_SCREENS.items():
            self.install_screen(cls(), name=name)
        if self.host is None:
            files = sorted(str(p) for p in Path(self.profiles_dir).glob("*.yaml"))
            self.push_screen(ProfilePicker(files), self._picked)
            return
        await self._start_host()

    def _picked(self, path: str | None) -> None:
        if not path:
            self.exit()
            return
        assert self.host_builder is not None
        try:
            self.host, self.compiled = self.host_builder(path)
        except Exception as e:  # noqa: BLE001 - bad profile or environment: say it, stay in the picker
            self.notify(str(e), severity="error", timeout=8)
            files = sorted(str(p) for p in Path(self.profiles_dir).glob("*.yaml"))
            self.push_screen(ProfilePicker(files), self._picked)
            return
        self.profile_path = path
        self.call_later(self._start_host)

    async def _start_host(self) -> None:
        assert self.host is not None
        self.host.on_error = self._command_failed
        self.host.on_ready = lambda: setattr(self, "_engine_ready", True)
        self.host.on_failed = self._engine_failed
        if not isinstance(self.screen, ViewScreen):
            self.push_screen("main")
        self.set_interval(self.tick_s, self.tick)
        await self.host.astart()

    def _engine_failed(self, e: BaseException) -> None:
        self.exit_message = f"tgen: error: {e}"
        self.call_later(self.exit, 3)

    def _command_failed(self, e: BaseException) -> None:
        msg = str(e)
        self._log_line(f"refused: {msg}")
        self.notify(msg, severity="error", timeout=5)

    async def on_unmount(self) -> None:
        if self.host is None:
            return
        await self.host.aclose()
        self._build_result()

    def _build_result(self) -> None:
        """The session's result, as the run owner builds it (tgen_tui.session): the final
        snapshot with the counters carried over clears, the hooks' runs, the signal;
        --json written."""
        host = self.host
        s: Any = host.engine if host is not None else None
        if self.result is not None or s is None or not hasattr(s, "conclude_now"):
            return
        s.conclude_now(partial=self.signal_name is not None)  # when trio could not
        if s.report is None:
            return
        info = {
            "front_end": "tgen tui",
            "clears": s.record.clears,
            "sending_s": round(s.record.active_s, 3),
        }
        owner = host.owner if host is not None else None
        if owner is not None:
            owner.signal = owner.signal or self.signal_name
            r = owner.result(s, session=info)
        else:  # the fake: its report as it is
            r = s.report.model_copy(update={"session": info})
        self.run_result = r
        self.result = r.to_doc() if r is not None else None
        if self.result is not None and self.json_path:
            Path(self.json_path).write_text(json.dumps(self.result, indent=2, default=str) + "\n")

    def _forced_exit(self, code: int) -> None:
        """The watchdog after SIGTERM/SIGHUP: Textual's shutdown can block for good writing
        to a terminal that is gone (its writer queue full), so after FORCED_EXIT_S the
        result is built, written and stored from this thread and the process exits (its
        workers die with it: PR_SET_PDEATHSIG)."""
        try:
            self._build_result()
            if self.result is not None and self.on_forced_exit is not None:
                self.on_forced_exit(self.result)
            sys.stderr.write(
                f"tgen tui: {self.signal_name}: the console did not close in "
                f"{FORCED_EXIT_S:.0f} s; exited with the result written\n"
            )
        finally:
            os._exit(code)

    # ------------------------------------------------------------------ the tick
    def tick(self) -> None:
        host = self.host
        if host is None or not self._engine_ready or host.engine is None:
            return
        eng = host.engine
        if self.desc is None:
            self.desc = eng.describe()
            self._log_hooks(host.owner)
            self._setup_done.clear()
        snap = eng.latest_snapshot()  # the session counts its sending time from these
        self._cursor, events = eng.events_since(self._cursor)
        for ev in events:
            self._on_engine_event(ev)
        if snap is None:
            return
        if self.snap is None or snap.seq != self.snap.seq:
            self._remember(snap)
        self.snap = snap
        sig = tuple((p.name, p.state) for p in snap.ports) + tuple(
            (s.name, s.paused) for s in snap.streams
        )
        if sig != self._state_sig:
            self._state_sig = sig
            self.refresh_bindings()
        self.redraw_view()

    def redraw_view(self) -> None:
        try:
            scr = self.screen
        except ScreenStackError:  # shutting down
            return
        if not isinstance(scr, ViewScreen) or self.desc is None or self.snap is None:
            return
        if not scr.is_mounted or not scr.query("#title"):
            return  # switching screens: not composed yet; the next tick draws it
        if scr.VIEW not in self._setup_done or scr.desc is not self.desc:
            scr.setup(self.desc)
            self._setup_done.add(scr.VIEW)
        with self.batch_update():
            scr.set_title(self._title_text(scr.VIEW))
            scr.update_view(self.snap)

    def _title_text(self, view: str) -> Text:
        d, s = self.desc, self.snap
        assert d is not None and s is not None
        t = Text()
        t.append(" tgen-tui ", style="bold reverse")
        t.append(f" {d.profile} ", style="bold")
        names = [p.name for p in d.ports]
        sel = names[self.selected] if self.selected < len(names) else "-"
        t.append(f" port {self.selected}:{sel} ", style="reverse")
        t.append(f" {view} · t {int(s.t)} s · seed {d.seed}")  # whole seconds: one redraw a second
        if s.warnings:
            t.append(f" · {len(s.warnings)} warning(s)", style="yellow")
        return t

    def _remember(self, snap: StatsSnapshot) -> None:
        for p in snap.ports:
            self.port_history.setdefault((p.name, "tx"), deque(maxlen=HISTORY)).append(p.tx_pps)
            self.port_history.setdefault((p.name, "rx"), deque(maxlen=HISTORY)).append(p.rx_pps)
        if snap.dut is not None and snap.dut.conntrack_count is not None:
            self.ct_history.append(float(snap.dut.conntrack_count))
        self.history.add(snap)

    def _on_engine_event(self, ev: EngineEvent) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(ev.wall))
        self._log_line(f"{stamp} {ev.t:7.2f}s {ev.kind:<11} {ev.text()}")
        if ev.kind == "worker_failed":
            self.notify(ev.text(), severity="error", timeout=10)

    def _log_hooks(self, owner: Any) -> None:
        """The DUT hooks the run owner ran before the engine opened (before_run): a log
        line each, as the engine's events are logged."""
        stamp = time.strftime("%H:%M:%S")
        for rec in owner.hooks.records if owner is not None else []:  # None: the fake
            how = "ok" if rec.ok else "timed out" if rec.timed_out else f"exit {rec.returncode}"
            self._log_line(
                f"{stamp} {0.0:7.2f}s {'dut_hook':<11} {rec.hook} `{rec.command}`: "
                f"{how} in {rec.seconds:.2f} s"
            )

    def _log_line(self, line: str) -> None:
        self.log_lines.append(line)
        self.log_total += 1

    # ------------------------------------------------------------------ helpers
    def port_names(self) -> list[str]:
        return [p.name for p in self.desc.ports] if self.desc else []

    def selected_port(self) -> str | None:
        names = self.port_names()
        return names[self.selected] if self.selected < len(names) else None

    def port_state(self, name: str) -> str:
        if self.snap is None:
            return "idle"
        try:
            return self.snap.port(name).state
        except StopIteration:
            return "idle"

    def _eng(self) -> EngineAPI | None:
        return self.host.engine if self.host is not None else None

    def _submit(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Send one engine command through the host (a refusal becomes a notification)."""
        if self.host is not None:
            self.host.submit(fn, *args)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if isinstance(self.screen, ConfirmQuit | RatePrompt) and action != "quit_console":
            return False
        if action in PORT_ACTIONS and (self.desc is None or self._eng() is None or self.quitting):
            return None
        if action == "select_port":
            (i,) = parameters
            return True if isinstance(i, int) and i < len(self.port_names()) else None
        if action == "edit":
            return True if self.profile_path else None
        # a port named in the action (the palette's "start p1"), else the selected one
        port = next((x for x in parameters if isinstance(x, str)), None) or self.selected_port()
        return self._port_action_enabled(action, port)

    def _port_action_enabled(self, action: str, port: str | None) -> bool | None:
        """True when ``action`` applies to ``port`` now; None greys it out."""
        states = [self.port_state(n) for n in self.port_names()]
        if action == "start_selected":
            return True if port and self.port_state(port) in ("idle", "stopped") else None
        if action == "stop_selected":
            return True if port and self.port_state(port) in ("running", "starting") else None
        if action == "start_all":
            return True if any(s in ("idle", "stopped") for s in states) else None
        if action == "stop_all":
            return True if any(s in ("running", "starting") for s in states) else None
        if action in ("rate_step", "rate_prompt"):
            if self._highlighted_flow() is not None:
                return True  # a TCP flow's refusal is said when the key is pressed
            if not port or self.desc is None:
                return None
            sends = port_has_rate(self.desc, port) and self.port_state(port) != "failed"
            return True if sends else None
        return True

    # ------------------------------------------------------------------ actions
    def action_select_port(self, i: int) -> None:
        if i < len(self.port_names()):
            self.selected = i
            self.refresh_bindings()
            self.redraw_view()

    def action_start_selected(self, port: str | None = None) -> None:
        if (p := port or self.selected_port()) and (eng := self._eng()):
            self._submit(eng.start, [p])

    def action_stop_selected(self, port: str | None = None) -> None:
        if (p := port or self.selected_port()) and (eng := self._eng()):
            self._submit(eng.stop, [p])

    def action_start_all(self) -> None:
        if eng := self._eng():
            self._submit(eng.start, None)

    def action_stop_all(self) -> None:
        if eng := self._eng():
            self._submit(eng.stop, None)

    def _highlighted_flow(self) -> str | None:
        """The flow highlighted on the Flows screen (None on any other screen)."""
        scr = self.screen
        return scr.selected_flow() if hasattr(scr, "selected_flow") else None

    def _rate_target(self, port: str | None = None) -> RateTarget | None:
        """What the rate keys change (ui/rates.py): the highlighted flow on the Flows
        screen, else ``port`` or the selected port. A refusal is said, and None returned."""
        if self.desc is None:
            return None
        flow = None if port else self._highlighted_flow()
        try:
            if flow is not None:
                return flow_target(self.desc, self.snap, flow)
            p = port or self.selected_port()
            return port_target(self.desc, self.snap, p) if p else None
        except Refused as e:
            self._command_failed(e)
            return None

    def action_rate_step(self, direction: int) -> None:
        if (target := self._rate_target()) and (eng := self._eng()):
            new = rate_step(target.current, direction)
            if new > 0:
                self._submit(eng.set_rate, target.name, new)

    def action_rate_prompt(self, port: str | None = None) -> None:
        target = self._rate_target(port)
        if target is None:
            return

        def done(text: str | None) -> None:
            if text and (eng := self._eng()):
                self._submit(eng.set_rate, target.name, text)

        self.push_screen(RatePrompt(target.label, target.shown(), target.hint), done)

    def action_clear(self) -> None:
        if eng := self._eng():  # the session keeps what the counters held (its result)
            self._submit(eng.clear, None, None)

    def action_toggle_pause(self) -> None:
        scr = self.screen
        eng = self._eng()
        if eng is None or not hasattr(scr, "selected_stream"):
            return
        name = scr.selected_stream()
        if not name or self.snap is None:
            return
        paused = self.snap.stream(name).paused
        self._submit(eng.resume if paused else eng.pause, name)

    def action_view(self, name: str) -> None:
        if isinstance(self.screen, ViewScreen) and self.screen.VIEW == name:
            return
        if isinstance(self.screen, ViewScreen):
            self.switch_screen(name)
        else:
            self.push_screen(name)
        self.call_later(self.redraw_view)

    def action_chart_window(self) -> None:
        """Charts: switch between the last 60 s and the last 10 min."""
        self.window = WINDOWS[(WINDOWS.index(self.window) + 1) % len(WINDOWS)]
        self.notify(f"charts show the last {self.window.name}", timeout=2)
        self.redraw_view()

    def action_results(self) -> None:
        """The results store: recent runs, trends per build, regressions marked."""
        from tgen_tui.ui.results_screen import ResultsScreen

        self.push_screen(ResultsScreen(self.results_db))

    def action_dut_event(self) -> None:
        from tgen_tui.ui.dut_events import run_named_event

        run_named_event(self)

    def dut_event_done(self, line: str, rec: dict) -> None:
        """A DUT event finished (ui.dut_events): log it and say so."""
        self._log_line(line)
        self.notify(line, severity="information" if rec.get("ok") else "error")

    def action_edit(self) -> None:
        from tgen_tui.ui.editor import EditorScreen

        if self.profile_path:
            self.push_screen(EditorScreen(self.profile_path))

    def action_quit_console(self) -> None:
        if self.quitting:
            return
        running = [n for n in self.port_names() if self.port_state(n) in ("running", "starting")]
        if running:
            if isinstance(self.screen, ConfirmQuit):
                return

            def answer(yes: bool | None) -> None:
                if yes:
                    self.run_worker(self._stop_and_exit(), exclusive=True)

            self.push_screen(ConfirmQuit(running), answer)
            return
        self.run_worker(self._stop_and_exit(), exclusive=True)

    def _on_signal(self, sig: signal.Signals) -> None:
        if not self.quitting:
            self.signal_name = signal.Signals(sig).name
            if self.host is not None and self.host.owner is not None:
                self.host.owner.signal = self.signal_name  # the run ends partial
            self._log_line(f"{self.signal_name}: stopping every port and quitting")
            code = signal_exit(self.signal_name)  # one rule: tgen_tui.session.exits
            dog = threading.Timer(FORCED_EXIT_S, self._forced_exit, (code,))
            dog.daemon = True
            dog.start()
            self.run_worker(self._stop_and_exit(code), exclusive=True)

    async def _stop_and_exit(self, return_code: int = 0) -> None:
        self.quitting = True
        eng = self._eng()
        if eng is not None and self.host is not None and not self.host.closed:
            try:
                await asyncio.wait_for(self.host.call(eng.stop, None), timeout=10)
            except Exception as e:  # noqa: BLE001 - the host's close stops them anyway
                self._log_line(f"stop on quit: {e}")
        self.exit(return_code)


__all__ = ["TgenApp", "rate_step"]
