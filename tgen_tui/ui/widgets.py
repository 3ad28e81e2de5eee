"""Small widgets of the console: the conntrack gauge and the helpers that fill tables."""

from __future__ import annotations

from collections import deque
from functools import lru_cache
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer

from tgen_tui import fmt

STATE_STYLE = {
    "idle": "dim",
    "starting": "yellow",
    "running": "bold green",
    "stopping": "yellow",
    "stopped": "cyan",
    "failed": "bold red",
}


def state_text(state: str) -> Text:
    return Text(state, style=STATE_STYLE.get(state, ""))


def bar(fraction: float, width: int) -> str:
    """A text bar of ``width`` cells filled to ``fraction`` (eighths for a smooth edge)."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    s = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")
    return s + "·" * (width - len(s))


class TextWidget(Widget):
    """Renders one stored Text; ``show_text`` redraws without a layout pass (``Static.update``
    re-runs layout on every call, which at 10 Hz costs more than the drawing)."""

    def __init__(self, text: Text | str = "", **kw) -> None:
        super().__init__(**kw)
        self._text: Text | str = text

    def render(self) -> Text | str:
        return self._text

    def show_text(self, text: Text | str) -> None:
        self._text = text
        self.refresh()

    def update(self, text: Text | str) -> None:  # Static's name, kept for callers
        self.show_text(text)


class ConntrackGauge(TextWidget):
    """One line: ``conntrack 1,234 / 65,536 [████····] 1.9 %  +256/s  full at 3.21 s``."""

    DEFAULT_CSS = """
    ConntrackGauge { height: 1; width: 1fr; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("conntrack: no DUT probe", **kw)
        self._last: tuple | None = None

    def show(self, dut) -> None:
        if dut is None:
            key: tuple = ("none",)
        else:
            key = (
                dut.conntrack_count,
                dut.conntrack_max,
                round(dut.new_per_s),
                dut.full_at_s,
                dut.error,
                self.size.width,
            )
        if key == self._last:
            return
        self._last = key
        if dut is None:
            self.update(Text("conntrack: no DUT probe (profile has no dut:)", style="dim"))
            return
        if dut.error:
            self.update(Text(f"conntrack: {dut.error}", style="red"))
            return
        count, mx = dut.conntrack_count, dut.conntrack_max
        frac = (count or 0) / mx if mx else 0.0
        head = f"conntrack {fmt.count(count)} / {fmt.count(mx)} "
        tail = f" {fmt.pct(100 * frac, 1)}  +{dut.new_per_s:,.0f}/s"
        if dut.full_at_s is not None:
            tail += f"  FULL at {fmt.seconds(dut.full_at_s)}"
        width = max(8, self.size.width - len(head) - len(tail) - 2)
        style = "red" if frac >= 0.95 else "yellow" if frac >= 0.75 else "green"
        t = Text(head)
        t.append("[" + bar(frac, width) + "]", style=style)
        t.append(tail, style="bold red" if dut.full_at_s is not None else "")
        self.update(t)


__all__ = ["ConntrackGauge", "RowList", "STATE_STYLE", "bar", "state_text"]


BLOCKS = " ▁▂▃▄▅▆▇█"


def spark_text(values: list[float], width: int) -> str:
    """Values as one line of block characters, ``width`` cells, scaled from 0 to the max.

    The newest values are on the right; with more values than cells, each cell shows the
    maximum of its bucket (a short burst stays visible)."""
    if width <= 0:
        return ""
    vals = values[-width * 4 :]
    if len(vals) > width:
        n = len(vals)
        vals = [
            max(vals[i * n // width : max((i + 1) * n // width, i * n // width + 1)])
            for i in range(width)
        ]
    top = max(vals, default=0.0)
    if top <= 0:
        s = "▁" * len(vals)
    else:
        s = "".join(BLOCKS[max(1, min(8, round(8 * v / top)))] if v > 0 else "▁" for v in vals)
    return s.rjust(width)


class Spark(TextWidget):
    """A one-line sparkline drawn as text: cheap to redraw at 10 Hz (Textual's Sparkline
    re-renders per cell; this widget renders one string and only when it changes)."""

    DEFAULT_CSS = """
    Spark { height: 1; width: 1fr; color: $accent; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("", **kw)
        self._last = ""

    def set_data(self, values: list[float]) -> None:
        s = spark_text(values, self.size.width)
        if s != self._last:
            self._last = s
            self.update(s)


@lru_cache(maxsize=256)
def _style(spec: str) -> Style:
    return Style.parse(spec) if spec else Style()


class Grid(Widget):
    """A fixed-width table drawn with the Line API: each row is one Strip of pre-styled
    segments, rebuilt only when one of its cells changed. A DataTable re-renders every cell
    through Rich on each update (measured ~70 ms a frame for the 21-row Main table under
    load); this costs well under a millisecond. ``set`` changes a cell, ``flush`` redraws
    the changed rows."""

    DEFAULT_CSS = """
    Grid { height: 1; width: 1fr; }
    """

    def __init__(self, label_width: int = 13, col_width: int = 14, corner: str = "", **kw) -> None:
        super().__init__(**kw)
        self.label_width = label_width
        self.col_width = col_width
        self.corner = corner  # the header row's label cell (what the columns are)
        self.columns: list[str] = []
        self.headers: dict[str, Text] = {}
        self.rows: list[tuple[str, str]] = []  # (key, label)
        self.cells: dict[tuple[str, str], Text | str] = {}
        self._strips: dict[int, Strip] = {}  # line -> strip; missing = rebuild
        self._dirty_lines: set[int] = set()

    def define(self, columns: list[tuple[str, str]], rows: list[tuple[str, str]]) -> None:
        self.columns = [k for k, _ in columns]
        self.headers = {k: Text(h, style="bold") for k, h in columns}
        self.rows = list(rows)
        self._row_index = {k: i + 1 for i, (k, _) in enumerate(self.rows)}
        self.cells = {}
        self._strips = {}
        self.styles.height = len(self.rows) + 1
        self.refresh()

    def header(self, column: str, text: Text) -> None:
        if self.headers.get(column) != text:
            self.headers[column] = text
            self._strips.pop(0, None)
            self._dirty_lines.add(0)

    def set(self, row: str, column: str, value: Text | str) -> None:
        if self.cells.get((row, column)) != value:
            self.cells[(row, column)] = value
            y = self._row_index.get(row)
            if y is not None:
                self._strips.pop(y, None)
                self._dirty_lines.add(y)

    def flush(self) -> None:
        if not self._dirty_lines:
            return
        w = self.size.width
        for y in sorted(self._dirty_lines):
            self.refresh(Region(0, y, w, 1))
        self._dirty_lines.clear()

    def _cell(self, v: Text | str, width: int, base: Style) -> Segment:
        if isinstance(v, Text):
            text, style = v.plain, v.style
            spec = style if isinstance(style, str) else ""
            st = base + (style if isinstance(style, Style) else _style(spec))
        else:
            text, st = v, base
        return Segment(" " + text[: width - 1].ljust(width - 1), st)

    def _build(self, y: int, base: Style | None = None) -> Strip:
        base = self.rich_style if base is None else base
        if y % 2 == 0 and y:
            base = base + _style("on grey11")
        cw, lw = self.col_width, self.label_width
        if y == 0:
            segs = [Segment(f" {self.corner}"[:lw].ljust(lw) if self.corner else " " * lw, base)]
            segs += [self._cell(self.headers[c], cw, base) for c in self.columns]
        else:
            key, label = self.rows[y - 1]
            segs = [Segment(f" {label}"[:lw].ljust(lw), base + _style("bold"))]
            segs += [self._cell(self.cells.get((key, c), "-"), cw, base) for c in self.columns]
        return Strip(segs)

    def render_line(self, y: int) -> Strip:
        if y > len(self.rows):
            return Strip.blank(self.size.width, self.rich_style)
        w = self.size.width
        if w != getattr(self, "_strips_w", None):
            self._strips, self._strips_w = {}, w
        strip = self._strips.get(y)
        if strip is None:  # stored at the width: rich_style resolves CSS on every call
            base = self.rich_style
            strip = self._strips[y] = self._build(y, base).adjust_cell_length(w, base)
        return strip


class OrderedFooter(Footer):
    """The footer in the order of the console's bindings, also after a keymap: Textual
    re-adds remapped bindings at the end of its map, which at 80 columns pushes a remapped
    ``s`` (Start) off the screen."""

    def compose(self) -> ComposeResult:
        from tgen_tui.ui.actions import FOOTER_ORDER as order

        items = list(super().compose())
        palette = [w for w in items if w.has_class("-command-palette")]
        ours = sorted(
            (w for w in items if getattr(w, "action", None) in order),
            key=lambda w: order[getattr(w, "action", "")],
        )
        others = [
            w for w in items if w not in palette and w not in ours
        ]  # the screen's own (editor)
        yield from others + ours + palette


class RowList(ScrollView, can_focus=True):
    """A bounded list of fixed-width rows with a cursor, drawn with the Line API: a header
    line, then the rows; each row's Strip is built once when it is added (a DataTable
    re-renders every visible cell through Rich after each added or removed row: ~40 ms a
    update for a 200-row list that scrolls). ``add`` appends rows and removes the oldest
    beyond ``max_rows``; while the cursor is on the last row it follows new rows, else it
    stays on its row. :class:`RowList.Highlighted` says which row the cursor is on."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "rowlist--header",
        "rowlist--cursor",
        "rowlist--even",
    }
    DEFAULT_CSS = """
    RowList { height: 1fr; background: $surface; }
    RowList > .rowlist--header { text-style: bold; background: $panel; color: $foreground; }
    RowList > .rowlist--even { background: $surface-lighten-1 50%; }
    RowList > .rowlist--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
    }
    RowList:focus > .rowlist--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """

    class Highlighted(Message):
        """The cursor is on another row (moved, or a new row came under it)."""

        def __init__(self, row_list: RowList, key: str) -> None:
            super().__init__()
            self.row_list = row_list
            self.key = key

        @property
        def control(self) -> RowList:
            return self.row_list

    def __init__(self, max_rows: int = 200, **kw) -> None:
        super().__init__(**kw)
        self.max_rows = max_rows
        self.columns: list[tuple[str, str, int]] = []  # key, label, width
        self._keys: deque[str] = deque()
        self._rows: dict[str, tuple[list[tuple[str, str]], int]] = {}  # key -> cells, serial
        self._strips: dict[str, Strip] = {}
        self._serial = 0
        self.cursor_row = 0
        self._announced: str | None = None

    # ------------------------------------------------------------------ contents
    def define(self, columns: list[tuple[str, str, int]]) -> None:
        """New columns (key, label, width incl. a leading space); the rows stay."""
        self.columns = list(columns)
        self._strips.clear()
        self._resize()

    def clear(self) -> None:
        """No rows (a new layout refills it: never on a tick)."""
        self._keys.clear()
        self._rows.clear()
        self._strips.clear()
        self.cursor_row = 0
        self._announced = None
        self._resize()

    @property
    def row_count(self) -> int:
        return len(self._keys)

    def key_at(self, row: int) -> str | None:
        return self._keys[row] if 0 <= row < len(self._keys) else None

    def texts(self, row: int) -> list[str]:
        """The row's cells as plain text."""
        key = self.key_at(row)
        return [t for t, _ in self._rows[key][0]] if key is not None else []

    def add(self, rows: list[tuple[str, list[tuple[str, str]]]]) -> None:
        """Append rows (key, cells as (text, style)); the oldest beyond ``max_rows`` go."""
        if not rows:
            return
        follow = not self._keys or self.cursor_row >= len(self._keys) - 1
        for key, cells in rows:
            self._keys.append(key)
            self._rows[key] = (cells, self._serial)
            self._serial += 1
        removed = 0
        while len(self._keys) > self.max_rows:
            old = self._keys.popleft()
            del self._rows[old]
            self._strips.pop(old, None)
            removed += 1
        self._resize()
        if follow:
            self.cursor_row = len(self._keys) - 1
        else:  # the same row under the cursor, and the same rows in view
            self.cursor_row = max(0, self.cursor_row - removed)
            self.scroll_to(y=max(0, self.scroll_offset.y - removed), animate=False, immediate=True)
        self._cursor_moved()

    def move_cursor(self, row: int) -> None:
        self.cursor_row = min(max(0, row), max(0, len(self._keys) - 1))
        self._cursor_moved()

    def _resize(self) -> None:
        width = sum(w for _, _, w in self.columns)
        self.virtual_size = Size(width, len(self._keys) + 1)  # + the header line
        self.refresh()

    def _cursor_moved(self) -> None:
        """Keep the cursor's row in view; say so when another row is under it."""
        view = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + view:
            self.scroll_to(y=self.cursor_row - view + 1, animate=False, immediate=True)
        self.refresh()
        key = self.key_at(self.cursor_row)
        if key is not None and key != self._announced:
            self._announced = key
            self.post_message(self.Highlighted(self, key))

    # ------------------------------------------------------------------ keys, mouse
    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step * max(1, self.size.height - 2))

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self._keys) - 1)

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self.move_cursor(self.scroll_offset.y + event.y - 1)

    # ------------------------------------------------------------------ drawing
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def on_resize(self) -> None:
        self._strips.clear()
        self._cursor_moved()

    def _strip(self, cells: list[tuple[str, str]], base: Style) -> Strip:
        segs = []
        for (text, style), (_, _, w) in zip(cells, self.columns, strict=False):
            segs.append(Segment(text[:w].ljust(w), base + _style(style)))
        return Strip(segs)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, top = self.scroll_offset
        if y == 0:
            base = self.get_component_rich_style("rowlist--header")
            head = [(label, "") for _, label, _ in self.columns]
            return self._strip(head, base).crop_extend(scroll_x, scroll_x + width, base)
        row = top + y - 1
        key = self.key_at(row)
        if key is None:
            return Strip.blank(width, self.rich_style)
        cells, serial = self._rows[key]
        if row == self.cursor_row:
            base = self.get_component_rich_style("rowlist--cursor")
            strip = self._strip([(t, "") for t, _ in cells], base)
        else:
            cached = self._strips.get(key)
            if cached is None:
                base = self.rich_style
                if serial % 2:
                    base = base + self.get_component_rich_style("rowlist--even")
                cached = self._strips[key] = self._strip(cells, base)
            strip, base = cached, self.rich_style
        return strip.crop_extend(scroll_x, scroll_x + width, base)
