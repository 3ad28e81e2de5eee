"""Profile editor (placeholder)."""

from textual.screen import Screen


class EditorScreen(Screen):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
