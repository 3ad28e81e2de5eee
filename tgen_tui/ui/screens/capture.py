"""The Capture screen (Pktgen's ``page pcap``): capture the selected port's frames into a
pcapng file, with a filter, and read the last ones decoded.

- the filter line: a tcpdump expression, or tgen's selectors ``stream NAME``, ``other``,
  ``arpnd``; checked as it is typed, and by the engine when the capture starts (its
  refusal is shown here, red, in one line); ``/`` goes to it, enter starts (a running
  capture of the port starts again with the new filter), escape leaves it;
- space starts or stops the selected port's capture (digits select the port); ``v``
  picks the direction (both, rx, tx); the file is ``captures/tgen-PORT-TIME.pcapng``
  under the current directory;
- the status of the port's capture: its state, frames kept, frames not kept (ring full,
  over the budget), the file;
- the frames the capture reports (its last few, four times a second), one line each as
  decoded (time, port and direction, stream and sequence number from the frame's
  comment, addresses and ports, length), bounded to FRAME_ROWS rows: new rows are added
  and the oldest removed, never a refill on a tick (a RowList: each row drawn once, where
  a DataTable re-renders every visible cell after each added row); while the cursor is
  on the last row it follows the new ones;
- the frame under the cursor in full: scapy's layers and the bytes.

scapy decodes only these frames (ui/frames.py). Below 120 columns the detail pane is
under the list; from 120 beside it, wider from 150.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Horizontal, VerticalScroll
from textual.widgets import Input, Label, Static

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.capture import DIRECTIONS, CaptureSpec, CaptureView, RecentFrame
from tgen_tui.engine.snapshot import StatsSnapshot
from tgen_tui.ui.actions import ACTIONS, bindings, effective_keys
from tgen_tui.ui.frames import (
    default_file,
    filter_problem,
    hexdump,
    layers,
    parse_comment,
    stamp,
    summary,
)
from tgen_tui.ui.screens.base import ViewScreen
from tgen_tui.ui.widgets import OrderedFooter, RowList, TextWidget

FRAME_ROWS = 200  # rows the list keeps; the oldest leave
ACTIVE = ("waiting", "starting", "running")
SIDE_WIDTH = 120  # from here the detail pane is beside the list
WIDE_WIDTH = 150  # from here it is wide enough for 16 bytes a hex line
DETAIL_W = {False: 42, True: 76}  # the detail pane's width beside the list (tgen.tcss)
STATE_STYLE = {
    "waiting": "yellow",
    "starting": "yellow",
    "running": "bold green",
    "done": "cyan",
    "failed": "bold red",
}


class CaptureScreen(ViewScreen):
    """Start and stop a capture on the selected port, its status, its last frames."""

    VIEW = "capture"
    BINDINGS = bindings("capture")
    AUTO_FOCUS = "#cap-frames"

    def __init__(self) -> None:
        super().__init__()
        self.direction = "both"
        self.now: Callable[[], float] = time.time  # the default file's time (tests fix it)
        self._rows: OrderedDict[str, tuple[RecentFrame, str]] = OrderedDict()
        self._pending: set[str] = set()  # ports with a start or stop on its way
        self._msg = Text("")
        self._msg_error = False
        self._shown: dict[str, object] = {}
        self._sig: tuple = ()
        self._detail_key: str | None = None
        self._mode: tuple[bool, bool, int] | None = None

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        with Horizontal(id="cap-filter-row"):
            yield Label("Filter ", id="cap-filter-label")
            yield Input(
                placeholder="all frames (/ to type: udp, stream up, other, arpnd)",
                id="cap-filter",
            )
            yield TextWidget("", id="cap-dir")
        yield TextWidget("", id="cap-status")
        with Container(id="cap-body"):
            yield RowList(max_rows=FRAME_ROWS, id="cap-frames")
            with VerticalScroll(id="cap-detail-box"):
                yield Static(Text("no frame selected", style="dim"), id="cap-detail")
        yield OrderedFooter()

    def on_mount(self) -> None:
        self._show_direction()
        self.run_worker(_import_scapy, thread=True, group="capture-scapy", exit_on_error=False)

    # ------------------------------------------------------------------ layout
    def _layout(self) -> tuple[bool, bool, int]:
        """(detail beside the list, wide detail, the list's width) for this size."""
        w = self.app.size.width
        side, wide = w >= SIDE_WIDTH, w >= WIDE_WIDTH
        return side, wide, (w - DETAIL_W[wide] if side else w)

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        side, wide, width = self._mode = self._layout()
        self.set_class(side, "side")
        self.set_class(wide, "wide")
        t = self.query_one("#cap-frames", RowList)
        fine = width >= 84  # microseconds in the time column
        fixed = [("time", "Time", 16 if fine else 13), ("where", "Port", 7)]
        fixed += [("stream", "Stream", 13), ("len", "Len", 5)]
        addr = max(20, width - sum(w for _, _, w in fixed) - 2)  # 2: the scrollbar
        self._cols = [*fixed[:3], ("addr", "Addresses (as decoded)", addr), fixed[3]]
        self._digits = 6 if fine else 3
        t.define([(key, " " + label, w) for key, label, w in self._cols])
        t.clear()  # a new size: the rows again (their time column), once
        t.add([(key, self._cells(r, summ)) for key, (r, summ) in self._rows.items()])
        self._shown.clear()

    def on_resize(self) -> None:
        if self.desc is not None and self._mode is not None and self._layout() != self._mode:
            self.setup(self.desc)

    # ------------------------------------------------------------------ engine
    def _engine(self) -> Any:
        host = getattr(self.app, "host", None)
        return host.engine if host is not None else None

    def _port(self) -> str | None:
        sel: Callable[[], str | None] | None = getattr(self.app, "selected_port", None)
        return sel() if sel is not None else None

    def _views(self) -> list[CaptureView]:
        eng = self._engine()
        return list(eng.capture_views()) if eng is not None else []

    @staticmethod
    def _of(port: str, views: list[CaptureView]) -> CaptureView | None:
        """The port's newest capture."""
        mine = [v for v in views if port in v.spec.ports]
        return mine[-1] if mine else None

    def _call(self, fn: Callable[..., Any], done: Callable[[Any], None], *args: Any) -> None:
        """Run an engine command through the host; ``done`` gets its result, or the
        refusal is said on the screen (red, one line): never raised."""
        host = getattr(self.app, "host", None)
        if host is None:
            return
        fut = host.call(fn, *args)

        def finished(f: Any) -> None:
            if f.cancelled():
                return
            e = f.exception()
            if e is not None:
                self._pending.clear()
                self._say(_one_line(e), error=True)
            else:
                done(f.result())
            self._refresh_status()

        fut.add_done_callback(finished)

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_capture" and (self._engine() is None or self._port() is None):
            return None
        return True

    def action_toggle_capture(self) -> None:
        port = self._port()
        if port is None or port in self._pending:
            return
        v = self._of(port, self._views())
        if v is not None and v.state in ACTIVE:
            self._stop(port, v)
        else:
            self._start(port)

    def action_toggle_lost(self) -> None:
        """A lost-frames capture over every port that sends or receives a stream: on,
        or off (its file then holds the tx copies of the frames that never came)."""
        eng = self._engine()
        if eng is None or "*lost" in self._pending:
            return
        running = [v for v in self._views() if v.spec.lost and v.state in ACTIVE]
        self._pending.add("*lost")
        if running:
            v = running[-1]
            self._say("stopping the lost-frames capture…")

            def stopped(fv: CaptureView) -> None:
                self._pending.discard("*lost")
                self._say(fv.line())

            self._call(eng.stop_capture, stopped, v.id, "stopped", self._loss_line())
            return
        streams = self.desc.streams if self.desc else ()
        ports = tuple(dict.fromkeys(p for s in streams for p in (s.port, s.rx_port) if p))
        if not ports:
            self._pending.discard("*lost")
            self._say("no stream to watch for lost frames", error=True)
            return
        spec = CaptureSpec(ports=ports, file=default_file("lost", self.now()), lost=True,
                           lost_guard_s=0.5)  # fmt: skip
        try:
            Path(spec.file).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self._pending.discard("*lost")
            self._say(f"lost-frames capture: {e}", error=True)
            return
        self._say(f"keeping the tx copies of lost frames on {', '.join(ports)} → {spec.file}")
        self._call(eng.start_capture, lambda v: self._pending.discard("*lost"), spec)

    def _loss_line(self) -> str:
        """The loss of the streams as the console shows it now, for the file's comment."""
        eng = self._engine()
        snap = eng.latest_snapshot() if eng is not None else None
        if snap is None:
            return "tgen-tui lost frames (console)"
        parts = [f"{s.name}: {s.lost} of {s.tx_frames} lost" for s in snap.streams if s.lost]
        return "tgen-tui lost frames (console). " + ("; ".join(parts) or "no stream counted a loss")

    def action_focus_filter(self) -> None:
        # at once (Widget.focus waits for the queue): keys typed right after "/" are
        # the filter's, even when they were queued behind a busy moment
        self.set_focus(self.query_one("#cap-filter", Input))

    def action_leave_filter(self) -> None:
        self.set_focus(self.query_one("#cap-frames", RowList))

    def action_cycle_direction(self) -> None:
        self.direction = DIRECTIONS[(DIRECTIONS.index(self.direction) + 1) % len(DIRECTIONS)]
        self._show_direction()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_leave_filter()
        port = self._port()
        if port is None or port in self._pending:
            return
        v = self._of(port, self._views())
        self._start(port, restart=v if v is not None and v.state in ACTIVE else None)

    def on_input_changed(self, event: Input.Changed) -> None:
        """The filter checked as it is typed (the engine checks again at the start)."""
        event.stop()
        streams = [s.name for s in self.desc.streams] if self.desc else []
        problem = filter_problem(event.value, streams) if event.value.strip() else None
        if problem:
            self._say(f"filter: {problem}", error=True)
        elif self._msg_error:  # a refusal of the filter as it was: stale now
            self._say("")

    def _start(self, port: str, restart: CaptureView | None = None) -> None:
        eng = self._engine()
        if eng is None:
            return
        spec = CaptureSpec(
            ports=(port,),
            file=default_file(port, self.now()),
            filter=self.query_one("#cap-filter", Input).value.strip(),
            direction=self.direction,
        )
        try:
            Path(spec.file).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self._say(f"capture on {port}: {e}", error=True)
            return
        self._pending.add(port)
        self._say(f"starting a capture on {port} ({spec.describe()})…")

        def started(v: CaptureView) -> None:
            self._pending.discard(port)
            self._say("")  # the status lines say it

        if restart is None:
            self._call(eng.start_capture, started, spec)
            return

        async def again() -> CaptureView:
            await eng.stop_capture(restart.id)
            return await eng.start_capture(spec)

        self._call(again, started)

    def _stop(self, port: str, v: CaptureView) -> None:
        eng = self._engine()
        if eng is None:
            return
        self._pending.add(port)
        self._say(f"stopping capture {v.id} on {port}…")

        def stopped(final: CaptureView) -> None:
            self._pending.discard(port)
            self._say(final.line())

        self._call(eng.stop_capture, stopped, v.id)

    # ------------------------------------------------------------------ drawing
    def _say(self, text: str, error: bool = False) -> None:
        """The screen's message line; red for a refusal (until the filter is edited into
        one that passes, or the next command)."""
        self._msg = Text(text, style="bold red" if error else "")
        self._msg_error = error
        self._refresh_status()

    def _show_direction(self) -> None:
        keymap: dict[str, str] = getattr(self.app, "keymap_overrides", {})
        key = effective_keys(next(a for a in ACTIONS if a.id == "capture.direction"), keymap)
        self.query_one("#cap-dir", TextWidget).show_text(Text(f" dir {self.direction} ({key})"))

    def update_view(self, snap: StatsSnapshot) -> None:
        views = self._views()
        self._refresh_status(views)
        sig = tuple(
            (v.id, v.state, v.seen, v.kept, v.recent[-1].ts_ns if v.recent else 0) for v in views
        )
        if sig != self._sig:  # a new status line of a capture (4 a second at most)
            self._sig = sig
            self._add_frames(views)

    def _refresh_status(self, views: list[CaptureView] | None = None) -> None:
        if not self.is_mounted or not self.query("#cap-status"):
            return
        if views is None:
            views = self._views()
        port = self._port() or "-"
        v = self._of(port, views)
        t = Text()
        if v is None:
            t.append(f"{port}: no capture", style="bold")
            t.append("  (space, or enter in the filter, starts one)", style="dim")
            file_line = Text(f"file {default_file(port, self.now())} (when it starts)", "dim")
        else:
            t.append(f"{port} ", style="bold")
            t.append(v.state, style=STATE_STYLE.get(v.state, ""))
            if v.reason:
                t.append(f" ({v.reason})")
            t.append(f"  kept {fmt.count(v.kept)} of {fmt.count(v.seen)}")
            t.append("  not kept: ")
            t.append(f"ring full {fmt.count(v.ring_drops)}", "bold red" if v.ring_drops else "")
            t.append(", ")
            t.append(f"over budget {fmt.count(v.over_budget)}", "yellow" if v.over_budget else "")
            if v.message:
                t.append(f": {v.message}", style="red")
            file_line = Text(f"file {v.spec.file}  {fmt.nbytes(v.bytes)}")
            if v.spec.filter:
                file_line.append(f"  filter {v.spec.filter}", style="dim")
        third = self._msg
        if not third.plain:
            others = [
                f"{','.join(o.spec.ports)} {o.state} ({fmt.count(o.kept)} kept)"
                for o in views
                if o.state in ACTIVE and port not in o.spec.ports
            ]
            third = Text(
                "also: " + "; ".join(others)
                if others
                else "the list: each capture's last frames, 4 times a second (the file has all)",
                style="dim",
            )
        text = Text("\n").join([t, file_line, third])
        if self._shown.get("status") != text:
            self._shown["status"] = text
            self.query_one("#cap-status", TextWidget).show_text(text)

    def _cells(self, r: RecentFrame, summ: str) -> list[tuple[str, str]]:
        sig = parse_comment(r.comment)
        return [
            (" " + stamp(r.ts_ns, self._digits), ""),
            (f" {r.port} {r.direction}", "green" if r.direction == "rx" else "cyan"),
            (" " + sig.short(), "" if sig.stream else "dim"),
            (" " + summ, ""),
            (f" {r.length}", ""),
        ]

    def _add_frames(self, views: list[CaptureView]) -> None:
        """The frames of the captures' latest status lines that the list does not hold
        yet: decoded (once each) and added at the end; beyond FRAME_ROWS the oldest go."""
        new = []
        for v in views:
            for r in v.recent:
                key = f"{v.id}:{r.port}:{r.direction}:{r.ts_ns}:{r.comment}"
                if key not in self._rows:
                    new.append((r.ts_ns, key, r))
        if not new:
            return
        rows = []
        for _, key, r in sorted(new, key=lambda x: x[0]):
            summ = summary(r.data)
            self._rows[key] = (r, summ)
            rows.append((key, self._cells(r, summ)))
        while len(self._rows) > FRAME_ROWS:
            self._rows.popitem(last=False)
        t = self.query_one("#cap-frames", RowList)
        t.add(rows)  # the list drops its oldest rows as these do
        under = t.key_at(t.cursor_row)
        if under is not None:  # a list that follows: a new frame under the cursor
            self._show_detail(under)

    def on_row_list_highlighted(self, event: RowList.Highlighted) -> None:
        if event.row_list.id == "cap-frames":
            self._show_detail(event.key)

    def _as_sent(self, r: RecentFrame, sig: Any) -> str | None:
        """A received test frame as its stream sent it (rebuilt by the engine), decoded;
        None for a sent frame, one without a signature, or one the engine cannot rebuild."""
        if r.direction != "rx" or not sig.stream or sig.seq is None:
            return None
        eng = self._engine()
        fn = getattr(eng, "sent_frame", None)
        data = fn(sig.stream, sig.seq, sig.lane) if fn is not None else None
        return summary(data) if data else None

    def selected_frame(self) -> RecentFrame | None:
        """The frame under the list's cursor."""
        key = self._detail_key
        return self._rows[key][0] if key is not None and key in self._rows else None

    def _show_detail(self, key: str) -> None:
        if key == self._detail_key or key not in self._rows:
            return
        self._detail_key = key
        r, summ = self._rows[key]
        sig = parse_comment(r.comment)
        side, wide, _ = self._mode or self._layout()
        t = Text(no_wrap=True, overflow="ellipsis")  # wrapping 40 lines costs more than drawing
        t.append(f"{r.port} {r.direction}  {stamp(r.ts_ns, 9)}  {r.length} bytes", style="bold")
        t.append(f"\n{r.comment}" if sig.stream else f"\n{r.comment or 'other'}")
        t.append(f"\n{summ}\n")
        sent = self._as_sent(r, sig)
        if sent is not None and sent != summ:  # what the DUT rewrote: the NAT's translation
            t.append(f"as sent: {sent}\n", style="yellow")
        if len(r.data) < r.length:
            t.append(f"(the first {len(r.data)} of its {r.length} bytes)\n", style="dim")
        t.append(layers(r.data) + "\n")
        t.append(hexdump(r.data, 8 if side and not wide else 16), style="dim")
        self.query_one("#cap-detail", Static).update(t)


def _one_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines() or [type(e).__name__]
    return lines[0]


def _import_scapy() -> None:
    """Import scapy's layers ahead of the first frame (a third of a second) and load
    libpcap for the filter check ahead of the first key, off the UI thread."""
    import scapy.layers.inet  # noqa: F401
    import scapy.layers.inet6  # noqa: F401
    import scapy.layers.l2  # noqa: F401

    from tgen_tui.packets.bpf import check_filter

    check_filter("udp")


__all__ = ["FRAME_ROWS", "CaptureScreen"]
