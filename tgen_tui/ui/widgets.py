"""Small widgets of the console: the conntrack gauge and the helpers that fill tables."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

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


class ConntrackGauge(Static):
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


__all__ = ["ConntrackGauge", "STATE_STYLE", "bar", "state_text"]
