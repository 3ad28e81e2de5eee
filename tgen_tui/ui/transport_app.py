"""The console for transport profiles: the Streams table and goodput charts of kernel flows.

``tgen tui PROFILE`` opens this app when the profile's streams are ``transport:`` flows.
``s`` starts the run (the flows connect, then send for the profile's duration), ``t``
stops it early, ``q`` quits. Per flow, per interval: goodput, TCP RTT, cwnd, retransmits
and delivery rate, UDP loss and jitter, and whether the schedule has the flow on. Under
the table, one chart line per flow: its goodput over time on a scale shared by all flows,
so an on/off background flow shows as dents in the others. At the end: Jain's index,
Mathis's prediction for Reno flows, and the result (stored like ``tgen run``'s).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer

from tgen_tui.ui.widgets import BLOCKS, TextWidget

COLUMNS = (
    "stream", "proto", "on", "goodput Mbit/s", "rtt ms", "cwnd", "retrans", "delivery Mbit/s",
    "loss %", "jitter ms",
)  # fmt: skip


def _num(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def row_cells(name: str, f: dict, proto: str) -> list[str]:
    """One Streams row for flow ``name`` from its interval figures."""
    dr = f.get("delivery_rate_bps")
    return [
        name,
        proto,
        "on" if f.get("on") else "off",
        _num(f["goodput_bps"] / 1e6, ".3f"),
        _num(f.get("rtt_ms"), ".1f"),
        _num(f.get("cwnd"), "d"),
        _num(f.get("retransmits"), "d"),
        _num(dr / 1e6 if dr is not None else None, ".3f"),
        _num(f.get("loss_pct"), ".2f"),
        _num(f.get("jitter_ms"), ".3f"),
    ]


def chart_line(values: list[float], top: float, width: int) -> str:
    """Goodput history as block characters on a scale shared by every flow (``top``)."""
    vals = values[-width:] if width > 0 else []
    if top <= 0:
        return "▁" * len(vals)
    return "".join(BLOCKS[max(1, min(8, round(8 * v / top)))] if v > 0 else " " for v in vals)


class TransportApp(App):
    """Runs one transport profile and shows its flows live."""

    CSS = """
    #head { height: 1; }
    #streams { height: auto; max-height: 12; }
    #charts { height: auto; }
    #foot { height: auto; }
    """
    BINDINGS = [
        Binding("s", "start", "start", id="transport.start"),
        Binding("t", "stop", "stop", id="transport.stop"),
        Binding("q", "quit", "quit", id="transport.quit"),
    ]

    def __init__(self, prof, *, make_run=None, on_result=None, **kw) -> None:
        super().__init__(**kw)
        self.prof = prof
        self.make_run = make_run  # () -> TransportRun, None in tests that feed snapshots
        self.on_result = on_result
        self.run_obj: Any = None
        self.history: dict[str, list[float]] = {}
        self.protos: dict[str, str] = {}
        self.state = "idle"
        self.result: dict | None = None
        self.last_t = 0.0

    def compose(self) -> ComposeResult:
        with Vertical():
            yield TextWidget(self._head(), id="head")
            yield DataTable(id="streams", show_cursor=False)
            yield TextWidget("", id="charts")
            yield TextWidget("s starts the flows", id="foot")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#streams", DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)

    def _head(self) -> str:
        return f"{self.prof.name}: transport streams  t={self.last_t:.1f}s  {self.state}"

    # -- the run
    def action_start(self) -> None:
        if self.state != "idle" or self.make_run is None:
            return
        self.state = "starting"
        self.query_one("#head", TextWidget).update(self._head())
        self.run_worker(self._drive, thread=True, exclusive=True)

    def action_stop(self) -> None:
        if self.run_obj is not None and self.state == "running":
            self.state = "stopping"
            self.run_obj.stop()

    def _drive(self) -> None:
        try:
            run = self.make_run()
        except Exception as e:  # noqa: BLE001 - shown, not raised in a thread
            self.call_from_thread(self._failed, str(e))
            return
        self.run_obj = run
        self.state = "running"
        try:
            while (snap := run.next_snapshot()) is not None:
                self.call_from_thread(self.show_snapshot, snap)
        finally:
            run.kill()
        self.call_from_thread(self.finish)

    def _failed(self, why: str) -> None:
        self.state = "failed"
        self.query_one("#head", TextWidget).update(self._head())
        self.query_one("#foot", TextWidget).update(Text(why, style="red"))

    # -- drawing (also driven directly by tests)
    def show_snapshot(self, snap: dict) -> None:
        self.last_t = snap["t"]
        table = self.query_one("#streams", DataTable)
        for name, f in snap["flows"].items():
            proto = self.protos.setdefault(
                name, "tcp" if "rtt_ms" in f else "udp" if "loss_pct" in f else "?"
            )
            cells = row_cells(name, f, proto)
            if name not in self.history:
                self.history[name] = []
                table.add_row(*cells, key=name)
            else:
                for col, val in zip(COLUMNS[1:], cells[1:], strict=True):
                    table.update_cell(name, col, val)
            self.history[name].append(f["goodput_bps"])
        self._draw_charts()
        jain = snap.get("fairness_jain")
        self.query_one("#head", TextWidget).update(
            self._head() + (f"  Jain {jain:.3f}" if jain is not None else "")
        )

    def _draw_charts(self) -> None:
        top = max((v for h in self.history.values() for v in h), default=0.0)
        width = max(10, self.size.width - 26)
        lines = [f"goodput over time (full block = {top / 1e6:.2f} Mbit/s)"]
        for name, h in self.history.items():
            last = h[-1] / 1e6 if h else 0.0
            lines.append(f"{name[:12]:<12} {last:7.2f} │{chart_line(h, top, width)}")
        self.query_one("#charts", TextWidget).update("\n".join(lines))

    def finish(self) -> None:
        self.state = "done"
        self.query_one("#head", TextWidget).update(self._head())
        if self.run_obj is None:
            return
        summary = self.run_obj.summary(self.last_t)
        if self.on_result is not None:
            self.result = self.on_result(self.run_obj, summary)
        lines = [
            f"total goodput {summary['metrics'].get('goodput_bps', 0) / 1e6:.3f} Mbit/s, "
            f"Jain {_num(summary['metrics'].get('fairness_jain'), '.3f')}"
        ]
        for name, s in summary["streams"].items():
            if s.get("mathis_bps"):
                lines.append(
                    f"Mathis (Reno) {name}: predicted {s['mathis_bps'] / 1e6:.3f} Mbit/s, "
                    f"measured {s['goodput_bps'] / 1e6:.3f}, ratio {s['mathis_ratio']:.2f}"
                )
        self.query_one("#foot", TextWidget).update("\n".join(lines))


def run_transport_console(args, prof) -> int:
    """``tgen tui`` of a transport profile: the app, then the result stored as ``tui``."""
    import datetime as _dt

    from tgen_tui.diagnostics import BadInput
    from tgen_tui.engine.transport_run import TransportRun, plan_flows, result_doc

    if prof.streams:
        raise BadInput(
            f"{args.profile}: streams: and transport: in one profile are not supported yet"
        )
    if prof.duration is None:
        raise BadInput(f"{args.profile}: a transport profile needs duration: in the console")
    from tgen_tui.engine.transport_run import refuse_options

    refuse_options(
        ("--lanes", getattr(args, "lanes", None)),
        ("--preflight", getattr(args, "preflight", False)),
        ("--cluster", getattr(args, "cluster", None)),
        ("--dut-netns", getattr(args, "dut_netns", None)),
        ("--dut-ssh", getattr(args, "dut_ssh", None)),
    )
    from tgen_tui.engine.cli_options import parse_cores_option

    cores = parse_cores_option(getattr(args, "cores", None))
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")

    def make_run():
        run = TransportRun(plan_flows(prof), duration=prof.duration, interval=1.0, cores=cores)
        run.start()
        return run

    def on_result(run, summary):
        return result_doc(prof, args.profile, run, summary, run.t_end or prof.duration, started)

    app = TransportApp(prof, make_run=make_run, on_result=on_result)
    app.run()
    if app.result is not None:
        from tgen_tui.results.record import record_from_args

        record_from_args(args, app.result, test="tui")
        if getattr(args, "json", None):
            import json
            from pathlib import Path

            Path(args.json).write_text(json.dumps(app.result, indent=2, default=str) + "\n")
    return 0
