"""Command palette providers: every action and port ("start p1", "set rate of p0…") and every profile."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tgen_tui.ui.actions import palette_commands


class PortCommands(Provider):
    """Every console action with palette text (:data:`~tgen_tui.ui.actions.ACTIONS`), per
    port where it takes one, each with the keys that do it after the keymap."""

    def _commands(self) -> list[tuple[str, Callable[[], Awaitable[object]], str]]:
        app = self.app
        ports: list[str] = getattr(app, "port_names", list)()
        keymap: dict[str, str] = getattr(app, "keymap_overrides", {})
        return [
            (c.text, partial(self._run, c.action, c.text), c.help)
            for c in palette_commands(ports, keymap)
        ]

    async def _run(self, action: str, text: str) -> None:
        """Run the command's action; say so when it does not apply now (the footer greys
        out the same action), e.g. "start p0" while p0 runs."""
        if not await self.app.run_action(action):
            self.app.notify(f"{text}: not possible now", severity="warning", timeout=4)

    async def discover(self) -> Hits:
        for text, cb, helptext in self._commands():
            yield DiscoveryHit(text, cb, help=helptext)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, cb, helptext in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), cb, help=helptext)


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
