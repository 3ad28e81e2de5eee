"""Command palette providers: every port ("start p1", "set rate of p0…") and every profile."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from textual.command import DiscoveryHit, Hit, Hits, Provider


class PortCommands(Provider):
    """Per-port commands and every console action, named as an operator would type them."""

    def _commands(self) -> list[tuple[str, object, str]]:
        app = self.app
        out: list[tuple[str, object, str]] = []
        for i, name in enumerate(app.port_names()):  # type: ignore[attr-defined]
            out += [
                (f"start {name}", partial(self._port, "start", name), f"start sending on port {i}"),
                (f"stop {name}", partial(self._port, "stop", name), f"stop port {i}"),
                (
                    f"set rate of {name}…",
                    partial(app.action_rate_prompt, name),
                    "50kpps, 200Mbit, 10%",
                ),  # type: ignore[attr-defined]
                (f"select {name}", partial(app.action_select_port, i), f"same as key {i}"),  # type: ignore[attr-defined]
            ]
        for text, action, helptext in (
            ("start all ports", "start_all", "S"),
            ("stop all ports", "stop_all", "T"),
            ("clear counters", "clear", "c"),
            ("raise rate of the selected port", "rate_step(1)", "+"),
            ("lower rate of the selected port", "rate_step(-1)", "-"),
            ("edit profile", "edit", "e"),
            ("show Main", "view('main')", "m"),
            ("show Streams", "view('streams')", "f"),
            ("show DUT", "view('dut')", "d"),
            ("show Workers", "view('workers')", "w"),
            ("show Log", "view('log')", "l"),
            ("show Help", "view('help')", "?"),
            ("quit", "quit_console", "q"),
        ):
            out.append((text, partial(app.run_action, action), f"key {helptext}"))
        return out

    def _port(self, verb: str, name: str) -> None:
        app = self.app
        eng = app._eng()  # type: ignore[attr-defined]
        if eng is not None:
            app.host.submit(eng.start if verb == "start" else eng.stop, [name])  # type: ignore[attr-defined]

    async def discover(self) -> Hits:
        for text, cb, helptext in self._commands():
            yield DiscoveryHit(text, cb, help=helptext)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cb, helptext in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, help=helptext)  # type: ignore[arg-type]


class ProfileCommands(Provider):
    """Every profile in profiles/: open it in the editor."""

    def _profiles(self) -> list[str]:
        d = Path(getattr(self.app, "profiles_dir", "profiles"))
        return sorted(str(p) for p in d.glob("*.yaml"))

    def _open(self, path: str) -> None:
        from tgen_tui.ui.editor import EditorScreen

        self.app.push_screen(EditorScreen(path))

    async def discover(self) -> Hits:
        for p in self._profiles():
            yield DiscoveryHit(f"profile {p}", partial(self._open, p), help="open in the editor")

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for p in self._profiles():
            text = f"profile {p}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(text),
                    partial(self._open, p),
                    help="open in the editor",
                )


__all__ = ["PortCommands", "ProfileCommands"]
