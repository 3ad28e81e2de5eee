"""What a capture is: its spec (ports, filter, direction, stops, bounds, file), the
checks that refuse a bad one up front (exit 2), the capture process's plain
configuration from the engine's Setup, and the frames a stream sent, rebuilt for
comparison with what arrived (engine/capture.py runs the captures)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tgen_tui.diagnostics import BadInput, EnvironmentProblem, check_output_file

SELECTOR_STREAM = "stream "
DIRECTIONS = ("both", "rx", "tx")
TRIGGERS = ("loss", "dut-event")
DEFAULT_BUDGET_PPS = 200_000
DEFAULT_RING_MB = 32


@dataclass(frozen=True)
class CaptureSpec:
    """One capture. ``filter``: a tcpdump expression, ``arpnd``, ``stream NAME`` (that
    stream's test frames) or ``other`` (frames without a signature)."""

    ports: tuple[str, ...]
    file: str
    filter: str = ""
    direction: str = "both"
    count: int = 0  # stop after this many frames kept (0: no limit)
    duration_s: float = 0.0  # stop after this long (0: with the run)
    snaplen: int = 262144
    budget_pps: int = DEFAULT_BUDGET_PPS  # frames kept per second at most (0: no limit)
    ring_mb: int = DEFAULT_RING_MB  # the kernel ring per port, MiB
    stop_on_full: bool = False  # stop when the ring first overflows
    trigger: str | None = None  # loss: when a port first loses a frame; dut-event: when
    # the first --dut-event command runs
    lost: bool = False  # keep only the tx copies of the frames that never arrived
    # lost, while the ports still send (the console): frames sent this long before the
    # stop may still be on their way and are not judged (0: the ports had stopped)
    lost_guard_s: float = 0.0

    @property
    def bpf(self) -> str:
        f = self.filter.strip()
        return "" if f == "other" or f.startswith(SELECTOR_STREAM) else f

    @property
    def stream(self) -> str | None:
        f = self.filter.strip()
        return f[len(SELECTOR_STREAM) :].strip() if f.startswith(SELECTOR_STREAM) else None

    @property
    def other(self) -> bool:
        return self.filter.strip() == "other"

    def describe(self) -> str:
        what = self.filter or "all frames"
        return f"{','.join(self.ports)} {self.direction}: {what}"


def parse_capture_arg(text: str, file: str, **kw: Any) -> CaptureSpec:
    """``PORT[,PORT...][:FILTER]`` (``p1:udp and dst port 7``, ``p0,p1``, ``p1:stream up``)."""
    ports_txt, _, filt = text.partition(":")
    ports = tuple(p.strip() for p in ports_txt.split(",") if p.strip())
    if not ports:
        raise BadInput(f"--capture {text!r}: name a port first (PORT[:FILTER], e.g. p1:udp)")
    return CaptureSpec(ports=ports, file=file, filter=filt.strip(), **kw)


def check_spec(spec: CaptureSpec, port_names: list[str], stream_names: list[str]) -> None:
    """BadInput (exit 2) for a spec that cannot run: unknown port or stream, a filter
    that libpcap rejects, bounds out of range, a file that cannot be written."""
    from tgen_tui.packets.bpf import FilterError, check_filter

    where = f"capture {spec.describe()}"
    bad = [p for p in spec.ports if p not in port_names]
    if bad:
        raise BadInput(f"{where}: unknown port {', '.join(bad)} (ports: {', '.join(port_names)})")
    if spec.direction not in DIRECTIONS:
        raise BadInput(f"{where}: direction must be one of {', '.join(DIRECTIONS)}")
    if spec.stream is not None and spec.stream not in stream_names:
        raise BadInput(
            f"{where}: no stream {spec.stream!r} (streams: {', '.join(stream_names) or 'none'})"
        )
    try:
        msg = check_filter(spec.bpf)
    except FilterError as e:
        raise EnvironmentProblem(str(e)) from None
    if msg:
        raise BadInput(f"{where}: bad filter {spec.bpf!r}: {msg}")
    if spec.count < 0 or spec.duration_s < 0 or spec.budget_pps < 0:
        raise BadInput(f"{where}: count, duration and budget must be >= 0")
    if not 64 <= spec.snaplen <= 262144:
        raise BadInput(f"{where}: snaplen must be 64..262144 bytes")
    if not 1 <= spec.ring_mb <= 4096:
        raise BadInput(f"{where}: ring must be 1..4096 MiB")
    if spec.trigger is not None and spec.trigger not in TRIGGERS:
        raise BadInput(f"{where}: trigger must be one of {', '.join(TRIGGERS)}")
    check_output_file(spec.file, f"{where}: file")


def capture_config(spec: CaptureSpec, setup: Any) -> dict:
    """The capture process's configuration (plain data) for ``spec`` on ``setup``."""
    block = max(1, setup.n_streams // max(1, setup.lanes))
    names = [f"#{i}" for i in range(block)]
    for p in setup.compiled.streams:
        if p.index < block:
            names[p.index] = p.name
    taps = []
    for name in spec.ports:
        ps = setup.ports[name]
        if ps.host is not None:
            raise BadInput(f"capture on {name}: the port is on tester host {ps.host} (--cluster)")
        taps.append(
            {
                "port": name,
                "interface": ps.interface,
                "netns": ps.netns,
                "rx": spec.direction in ("both", "rx"),
                "tx": spec.direction in ("both", "tx") or spec.lost,
                "filter": spec.bpf,
            }
        )
    streams = None
    if spec.stream is not None:
        idx = next(p.index for p in setup.compiled.streams if p.name == spec.stream)
        streams = [idx + k * block for k in range(max(1, setup.lanes))]
    return {
        "file": spec.file,
        "taps": taps,
        "streams": streams,
        "other": spec.other,
        "names": names,
        "block": block,
        "snaplen": spec.snaplen,
        "count": spec.count,
        "duration_s": spec.duration_s,
        "budget_pps": 0 if spec.lost else spec.budget_pps,
        "ring_mb": spec.ring_mb,
        "stop_on_full": spec.stop_on_full,
        "lost": spec.lost,
        "lost_guard_s": spec.lost_guard_s,
        "comment": f"tgen-tui capture {spec.describe()}; timestamps: the kernel's "
        "CLOCK_REALTIME stamps (the ones the latency figures use, on CLOCK_MONOTONIC)",
    }


class SentFrames:
    """The frame a stream sent as sequence number ``seq``, rebuilt by its batch builder
    (the frames are a function of the frame index: the same bytes but the timestamp), so
    a received frame can be shown next to what it was before the DUT rewrote it. A
    stream split over lanes, or without that frame, gives None."""

    def __init__(self) -> None:
        self._builders: dict[tuple[int, str], Any] = {}

    def frame(self, setup: Any, stream: str, seq: int, lane: int = 0) -> bytes | None:
        from tgen_tui.packets.lanes import make_builder

        prog = next((p for p in setup.programs if p.name == stream), None)
        if prog is None or lane != 0 or seq < 0:
            return None
        ps = setup.ports.get(prog.port)
        if ps is not None and getattr(ps, "lanes", 1) > 1:
            return None
        key = (id(setup), stream)
        b = self._builders.get(key)
        if b is None:
            if len(self._builders) > 64:
                self._builders.clear()
            b = self._builders[key] = make_builder(prog, None, 1)
        try:
            return b.frames(int(seq), 1, 0)[0]
        except (ValueError, IndexError, OverflowError):
            return None
