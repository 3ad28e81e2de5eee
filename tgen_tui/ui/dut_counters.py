"""The DUT screen's drop counters table and per-core CPU, and the Streams screen's "why"
line: what :mod:`tgen_tui.engine.losscauses` put in the snapshot, drawn as text (one
widget, redrawn only when its text changes)."""

from __future__ import annotations

from rich.text import Text

import tgen_tui.fmt as fmt
from tgen_tui.dut.attribution import why_line
from tgen_tui.engine.snapshot import DutStats, StreamStats
from tgen_tui.ui.widgets import TextWidget

MAX_ROWS = 8  # counters shown (the ones that explain loss first, then by frames)


def stream_why(s: StreamStats) -> str:
    """``lost 912: 640 nft rule drop on dut (...), 272 qdisc drop on d1 (...); unexplained 0``."""
    return why_line(s.lost, s.loss_causes, s.loss_unexplained)


def counters_text(d: DutStats | None, width: int = 80) -> Text:
    """The counters that moved since the start (frames, rate, matched to loss, excess),
    then one line of CPU per core and whose CPUs they are."""
    out = Text()
    if d is None:
        return out
    name_w = max(20, width - 46)
    out.append(
        f"{'drop counter (since start)':<{name_w}} {'where':<9}{'frames':>9}{'/s':>8}"
        f"{'matched':>9}{'excess':>8}\n",
        style="bold",
    )
    rows = sorted(d.counters, key=lambda r: (not r.loss_cause, -r.frames))
    for r in rows[:MAX_ROWS]:
        style = "red" if r.matched else ("dim" if not r.loss_cause else "")
        name = r.counter if len(r.counter) <= name_w else r.counter[: name_w - 1] + "…"
        out.append(
            f"{name:<{name_w}} {r.where[:9]:<9}{fmt.count(r.frames):>9}{r.per_s:>8,.0f}"
            f"{(fmt.count(r.matched) if r.loss_cause else '-'):>9}"
            f"{(fmt.count(r.excess) if r.loss_cause else '-'):>8}\n",
            style=style,
        )
    if not rows:
        out.append("no drop counter moved\n", style="dim")
    elif len(rows) > MAX_ROWS:
        out.append(f"… {len(rows) - MAX_ROWS} more (tgen run --json: dut.counters)\n", style="dim")
    if d.counters_excess:
        out.append(
            f"counters exceed the loss by {fmt.count(d.counters_excess)} frames "
            "(other traffic on the DUT)\n",
            style="yellow",
        )
    for e in d.counters_errors[:2]:
        out.append(f"counter read error: {e}\n", style="yellow")
    cores = "  ".join(
        f"c{c.core} {c.softirq_pct:.0f}/{c.system_pct:.0f}/{c.idle_pct:.0f}" for c in d.cpu
    )
    out.append("DUT CPU % softirq/system/idle ", style="bold")
    out.append(cores or "-")
    if d.cpu_note:
        out.append(f"\n  ({d.cpu_note})", style="dim")
    return out


class DutCounters(TextWidget):
    """The counters table and CPU lines under the DUT screen's settings."""

    DEFAULT_CSS = """
    DutCounters { height: auto; max-height: 14; width: 1fr; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("", **kw)
        self._last: str | None = None

    def show(self, d: DutStats | None) -> None:
        text = counters_text(d, self.size.width or 80)
        if text.plain != self._last:
            lines = None if self._last is None else self._last.count("\n")
            self._last = text.plain
            self.show_text(text)
            if lines != text.plain.count("\n"):
                self.refresh(layout=True)  # height: auto follows the number of lines
