"""The port page (``o`` or enter): everything about the selected port on one screen.

Its link, speed, MAC (the interface's own, ``mac`` on the port's snapshot; the source MAC
of its streams when the engine gives none, e.g. a port on another host), its gateways
(IPv4, IPv6) with their resolved MACs (``gateway_mac``, ``gateway6_mac``), the workers
that serve it, the streams and socket flows it sends with their figures, and its charts
(pps, lost frames/s, latency and spacing of its streams, goodput and RTT of its flows; sparkline rows
at 80x24). The digits switch the page to another port.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from tgen_tui import fmt
from tgen_tui.engine.api import EngineDescription
from tgen_tui.engine.flowstats import short_text
from tgen_tui.engine.snapshot import PortStats, StatsSnapshot, StreamStats
from tgen_tui.ui.charts import (
    Chart,
    charts_fit,
    goodput_lines,
    latency_lines,
    lost_lines,
    pps_lines,
    rtt_lines,
    timebase,
)
from tgen_tui.ui.history import port_goodput
from tgen_tui.ui.screens.base import ViewScreen
from tgen_tui.ui.screens.flows import FLOW_COLS
from tgen_tui.ui.screens.streams import spaced_text
from tgen_tui.ui.widgets import Grid, OrderedFooter, Spark, TextWidget, state_text

NONE = "—"

# (key, label, value of a stream): the rows of the page's stream table, each with its unit
STREAM_ROWS: tuple[tuple[str, str, Any], ...] = (
    ("to", "Rx port", lambda s: s.rx_port or NONE),
    ("req", "Requested", lambda s: fmt.pps(s.requested_pps)),
    ("tx_pps", "Tx rate", lambda s: fmt.pps(s.tx_pps)),
    ("rx_pps", "Rx rate", lambda s: fmt.pps(s.rx_pps)),
    ("tx", "Tx frames", lambda s: fmt.count(s.tx_frames)),
    ("rx", "Rx frames", lambda s: fmt.count(s.rx_frames)),
    ("lost", "Lost frames", lambda s: Text(fmt.count(s.lost), style="bold red" if s.lost else "")),
    ("loss", "Loss", lambda s: fmt.pct(s.loss_pct, 3)),
    ("p50", "Latency p50", lambda s: fmt.ns(s.latency_ns.p50)),
    ("p99", "Latency p99", lambda s: fmt.ns(s.latency_ns.p99)),
    ("spaced", "Spaced ±10%", lambda s: spaced_text(s.spacing)),  # engine/spacing.py
    ("gap", "Gap mean/MAE", lambda s: _gap(s.spacing.mean_gap_ns, s.spacing.mae_ns)),
    ("gap99", "Gap p99", lambda s: fmt.ns(s.spacing.p99_ns)),
    ("flows", "Flows", short_text),  # verified/sent, or L learned (engine/flowstats.py)
)
# rows shown only on a terminal at least 30 lines tall (80x24 keeps its sparklines; a
# port that also sends flows has a goodput sparkline more there, and drops "spaced" too)
TALL_ROWS = frozenset({"gap", "gap99"})


def _gap(mean: float | None, mae: float | None) -> str:
    """'100.2µs/3.1µs': a stream's mean gap and its mean error against the asked one."""
    if mean is None:
        return NONE
    err = fmt.ns(mae).replace(" ", "") if mae is not None else "-"
    return fmt.ns(mean).replace(" ", "") + "/" + err


def gateway_lines(port: PortStats) -> list[str]:
    """One line per gateway the port has (IPv4, IPv6) with its MAC as resolved at start."""
    return [
        f" {label} {gw}   MAC {mac or 'not resolved'}"
        for label, gw, mac in (
            ("gateway ", getattr(port, "gateway", None), port.gateway_mac),
            ("gateway6", getattr(port, "gateway6", None), port.gateway6_mac),
        )
        if gw
    ]


def port_mac(compiled: Any, port: PortStats) -> tuple[str, str]:
    """The port's MAC and where it comes from: the engine's reading if it gives one, else
    the source MAC its streams send from (the profile's ``eth.src``)."""
    mac = getattr(port, "mac", None)
    if mac:
        return str(mac), "interface"
    streams = [s for s in getattr(compiled, "streams", ()) if s.port == port.name]
    if streams and len(streams[0].template) >= 12:
        return ":".join(f"{b:02x}" for b in streams[0].template[6:12]), "its streams' eth.src"
    return NONE, ""


def info_text(port: PortStats, index: int, compiled: Any) -> Text:
    """The page's head: identity, state, link, speed, MAC, gateway."""
    t = Text()
    t.append(f" {index}:{port.name} ", style="bold reverse")
    t.append(f"  {port.interface}" + (f" in netns {port.netns}" if port.netns else ""))
    t.append("  state ")
    t.append_text(state_text(port.state))
    if port.failure:
        t.append(f" ({port.failure})", style="red")
    t.append(f"\n link {port.link}   speed {fmt.bps(port.speed_bps)}")
    t.append(f"   worker {port.worker if port.worker is not None else NONE}")
    t.append(f" on core {port.core if port.core is not None else NONE}")
    mac, src = port_mac(compiled, port)
    t.append(f"\n MAC {mac}" + (f" ({src})" if src else ""))
    gws = gateway_lines(port)
    for line in gws:
        t.append("\n" + line)
    if not gws:
        t.append(f"   gateway {NONE}   gateway MAC {NONE}")
    return t


def workers_text(snap: StatsSnapshot, port: str, compact: bool = False) -> str:
    """Two lines per worker that serves the port (they fit in 80 columns): a frame
    worker's rates and send path, a flow worker's flows; ``compact``: the first only."""
    lines: list[str] = []
    for w in snap.workers:
        if port not in w.ports:
            continue
        alive = "alive" if w.alive else (w.exit_reason or "dead")
        if w.kind == "flows":
            two = (
                f" flow worker {w.id} on core {w.core} · flows {', '.join(w.streams)}",
                f"   core CPU {w.core_cpu_pct:.0f} % · process {w.proc_cpu_pct:.0f} %"
                f" · kernel sockets · {alive}",
            )
        else:
            two = (
                f" worker {w.id} on core {w.core} · Tx {fmt.pps(w.tx_pps)}"
                f" · Rx {fmt.pps(w.rx_pps)}",
                f"   core CPU {w.core_cpu_pct:.0f} % · busy {w.busy_pct:.0f} %"
                f" · sends with {w.tx_path or NONE} · {alive}",
            )
        lines += two[:1] if compact else two
    return "\n".join(lines) or " no worker serves this port"


_FLOW_VALUE = {key: value for key, _, _, _, value in FLOW_COLS}
# (key of FLOW_COLS, label, from 30 lines up only): the rows of the page's flow table
FLOW_ROWS: tuple[tuple[str, str, bool], ...] = (
    ("proto", "Protocol", True),
    ("state", "State", False),
    ("good", "Goodput", False),
    ("run", "Run mean", True),
    ("rtt", "RTT", False),
    ("min", "min RTT", True),
    ("cwnd", "cwnd", True),
    ("retr", "Retransmits", False),
    ("loss", "UDP loss", False),
    ("jit", "UDP jitter", True),
)


def _chart_row(port: str, desc: EngineDescription) -> dict[str, bool]:
    """Which charts the page shows for ``port``: the pps chart when the profile sends
    frames, lost frames and latency unless the port sends flows but no frame stream,
    goodput and RTT when it sends flows."""
    flows = bool(desc.port_flows(port))
    frames_here = bool(desc.port(port).streams) or not flows
    return {
        "pps": bool(desc.streams) or not desc.flows,
        "lost": frames_here,
        "lat": frames_here,
        "good": flows,
        "rtt": flows,
    }


class PortScreen(ViewScreen):
    """One port: identity, workers, streams, socket flows and charts."""

    VIEW = "port"

    def compose(self) -> ComposeResult:
        yield self.compose_title()
        yield TextWidget("", id="port-info")
        with Horizontal(id="port-tables"):
            yield Grid(label_width=14, id="port-streams")
            yield Grid(label_width=14, corner="flows", id="port-flows")
        yield TextWidget("", id="port-workers", classes="dim")
        yield Vertical(id="port-sparks")
        with Horizontal(id="port-charts"):
            yield Chart("Rate", "pps", id="pchart-pps")
            yield Chart("Lost", "frames/s", id="pchart-lost")
            yield Chart("Latency", "µs", id="pchart-lat")
            yield Chart("Goodput", "bit/s", id="pchart-good")
            yield Chart("RTT", "ms", id="pchart-rtt")
        yield OrderedFooter()

    def setup(self, desc: EngineDescription) -> None:
        super().setup(desc)
        self._port: str | None = None

    def on_resize(self) -> None:
        self._port = None  # rebuild for the new size at the next tick

    def _build(self, port: str, snap: StatsSnapshot) -> None:
        assert self.desc is not None
        self._port = port
        self._streams = [s.name for s in snap.streams if s.port == port]
        self._flows = [f.name for f in self.desc.port_flows(port)]
        g = self.query_one("#port-streams", Grid)
        tall = self.app.size.height >= 30
        drop = set() if tall else TALL_ROWS | ({"spaced"} if self._flows else set())
        self._rows = [(k, lb, v) for k, lb, v in STREAM_ROWS if k not in drop]
        g.define([(s, s) for s in self._streams] or [("-", "(sends nothing)")],
                 [(k, label) for k, label, _ in self._rows])  # fmt: skip
        g.display = bool(self._streams) or not self._flows
        wide = g.label_width + g.col_width * len(g.columns) + 1
        g.styles.width = wide if self._flows else "1fr"  # beside the flows, or the page's
        self._build_flows()
        info = 3 + len(gateway_lines(snap.port(port)))
        self.query_one("#port-info").styles.height = info
        self._charts_on = charts_fit(self.app.size.width, self.app.size.height)
        self._workers_box(port, snap, info)
        self.query_one("#port-charts").display = self._charts_on
        for key, on in _chart_row(port, self.desc).items():
            self.query_one(f"#pchart-{key}").display = on
        sparks = self.query_one("#port-sparks", Vertical)
        sparks.remove_children()
        if not self._charts_on:
            kinds = ["tx", "rx"] + (["goodput"] if self._flows else [])
            for kind in kinds:
                label = f"{port} goodput" if kind == "goodput" else f"{port} {kind} pps"
                sparks.mount(
                    Horizontal(
                        Label(label, classes="spark-label"),
                        Spark(id=f"pspark-{kind}"),
                        classes="spark-row",
                    )
                )
        self._tick = 0

    def _workers_box(self, port: str, snap: StatsSnapshot, info: int) -> None:
        """Two lines per worker, or one each where the page would not fit its terminal."""
        serving = sum(port in w.ports for w in snap.workers)
        tables = max(len(self._rows), len(self._flow_rows) if self._flows else 0) + 2
        sparks = 0 if self._charts_on else 2 + bool(self._flows)
        free = self.app.size.height - 2 - info - tables - 1 - sparks
        self._compact = serving > 1 and free < 2 * serving
        rows = serving if self._compact else 2 * serving
        self.query_one("#port-workers").styles.height = max(1, rows)

    def _build_flows(self) -> None:
        """The table of the socket flows the port sends (hidden when it sends none)."""
        g = self.query_one("#port-flows", Grid)
        tall = self.app.size.height >= 30
        self._flow_rows = [(k, label) for k, label, large in FLOW_ROWS if tall or not large]
        g.define([(f, f) for f in self._flows] or [("-", "-")], self._flow_rows)
        g.display = bool(self._flows)
        g.styles.width = g.label_width + g.col_width * max(1, len(self._flows)) + 1

    def update_view(self, snap: StatsSnapshot) -> None:
        app: Any = self.app
        names = [p.name for p in snap.ports]
        if not names:
            return
        port = names[min(app.selected, len(names) - 1)]
        if port != self._port:
            self._build(port, snap)
        p = snap.port(port)
        self.query_one("#port-info", TextWidget).show_text(
            info_text(p, names.index(port), app.compiled)
        )
        self.query_one("#port-workers", TextWidget).show_text(
            workers_text(snap, port, self._compact)
        )
        g = self.query_one("#port-streams", Grid)
        for s in snap.streams:
            if s.name in self._streams:
                self._stream_cells(g, s)
        g.flush()
        fg = self.query_one("#port-flows", Grid)
        for f in snap.flows:
            if f.name in self._flows:
                for key, _ in self._flow_rows:
                    fg.set(key, f.name, _FLOW_VALUE[key](f))
        fg.flush()
        self._tick += 1
        every = 5 if self._charts_on else 3  # charts ~2 Hz, sparklines ~3 Hz
        moved = getattr(self, "_chart_window", None) is not app.window  # g: at once
        if self._tick <= 3 or self._tick % every == 1 or moved:  # and after a (re)build
            self._chart_window = app.window
            self._history(port, app)

    def _stream_cells(self, g: Grid, s: StreamStats) -> None:
        for key, _, value in self._rows:
            g.set(key, s.name, value(s))

    def _history(self, port: str, app: Any) -> None:
        hist, win = app.history, app.window
        if not self._charts_on:
            for kind in ("tx", "rx", "goodput"):
                found = self.query(f"#pspark-{kind}")
                if found:
                    key = port_goodput(port) if kind == "goodput" else (kind, port)
                    found.first(Spark).set_data([v or 0.0 for v in hist.values(key, win)])
            return
        n = timebase(hist, win)
        self.query_one("#pchart-pps", Chart).plot(pps_lines(hist, [port], win), n, win.name)
        self.query_one("#pchart-lost", Chart).plot(lost_lines(hist, [port], win), n, win.name)
        lat = latency_lines(hist, self._streams, win)
        self.query_one("#pchart-lat", Chart).plot(lat, n, win.name)
        if self._flows:
            good = goodput_lines(hist, self._flows, win)
            self.query_one("#pchart-good", Chart).plot(good, n, win.name)
            rtt = rtt_lines(hist, self._flows, win)
            note = "" if rtt else "no TCP flow"
            self.query_one("#pchart-rtt", Chart).plot(rtt, n, win.name, note=note)


__all__ = ["FLOW_ROWS", "PortScreen", "info_text", "port_mac", "workers_text"]
