"""Immutable statistics snapshots: what the engine publishes to the console, NDJSON and results.

Workers write monotonically increasing counters; the sampler turns two readings into
rates over the measured interval and freezes everything into a StatsSnapshot (DESIGN
rule 4). Nothing here reads shared memory: a snapshot is plain data, safe to hand to
another thread or to a Textual message.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tgen_tui.dut.attribution import CounterRow, LossCause
from tgen_tui.dut.counters import CoreCpu


@dataclass(frozen=True)
class Latency:
    """Latency summary in nanoseconds (None when no signed frame arrived)."""

    min: float | None = None
    avg: float | None = None
    p50: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    jitter: float | None = None  # RFC 3550-style mean |D(i) - D(i-1)|
    p9999: float | None = None  # 99.99th percentile (tgen search's latency ladder)


@dataclass(frozen=True)
class Spacing:
    """Inter-arrival spacing of a stream at its receiver (kernel receive stamps of frames
    n and n + 1; tgen_tui/engine/spacing.py). Times in ns; None where not measured."""

    asked_gap_ns: float | None = None  # the sender's asked mean gap (None: unknown)
    gaps: int = 0  # gaps measured
    mean_gap_ns: float | None = None
    mae_ns: float | None = None  # mean |gap - asked gap|
    within_10pct: float | None = None  # share (0..1) of gaps within 10 % of the asked gap
    p50_ns: float | None = None
    p99_ns: float | None = None
    ks: float | None = None  # KS distance of the gaps from a random law (None: constant)
    law: str = "constant"  # the schedule's idt; "+burst" / "+on-off" when shaped


@dataclass(frozen=True)
class SetupLatency:
    """Time to first reply of the verified flows, in ns (tgen_tui.engine.flowstats); an
    app flow's setup and transaction times use it too (tgen_tui.engine.appfigures)."""

    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    avg: float | None = None


@dataclass(frozen=True)
class PortStats:
    """One tester port: worker counters next to the kernel's interface counters."""

    name: str
    interface: str
    netns: str | None
    state: str  # idle | running | stopping | stopped | failed
    link: str = "unknown"
    failure: str | None = None
    worker: int | None = None
    core: int | None = None
    tx_frames: int = 0
    rx_frames: int = 0  # signed frames of any stream received here
    tx_bytes: int = 0
    rx_bytes: int = 0
    rx_other: int = 0
    tx_errors: int = 0
    rx_drops: int = 0  # RX ring drops reported by the kernel
    late_events: int = 0
    tx_pps: float = 0.0
    rx_pps: float = 0.0
    tx_bps: float = 0.0  # L2 bits/s (frame bytes incl. FCS × 8)
    rx_bps: float = 0.0
    requested_pps: float = 0.0
    achieved_pps: float = 0.0  # requested × sent / due (engine/figures.py achieved_pps)
    if_tx_frames: int = 0
    if_rx_frames: int = 0
    if_tx_bytes: int = 0
    if_rx_bytes: int = 0
    if_rx_dropped: int = 0
    if_tx_dropped: int = 0  # the interface's tx_dropped (e.g. a veth with no carrier)
    # frames the worker counted sent that the interface never transmitted (no carrier,
    # tx_dropped): sent minus the interface's tx (engine/figures.py tx_unsent); a
    # tester-side loss cause of the port's streams, never the DUT's
    tx_unsent: int = 0
    if_tx_pps: float = 0.0
    if_rx_pps: float = 0.0
    speed_bps: float = 0.0  # the port's configured line rate (profile ``speed``)
    backlog: int = 0  # frames due but not yet sent (the sender is behind by this many)
    late_max_ns: int = 0  # worst lateness of a batch's first frame against its due time
    host: str | None = None  # tester host under --cluster (None: the engine's machine)
    gateway_mac: str | None = None  # resolved by ARP at start (port ``gateway``), else None
    gateway6_mac: str | None = None  # resolved by ND at start (port ``gateway6``)
    mac: str | None = None  # the port's own MAC, read from the interface at set-up
    gateway: str | None = None  # the profile's port ``gateway`` (IPv4), if any
    gateway6: str | None = None  # the profile's port ``gateway6``, if any


@dataclass(frozen=True)
class StreamStats:
    """One stream, summed over every port it was received on."""

    name: str
    index: int
    port: str
    rx_port: str | None
    requested_pps: float = 0.0
    tx_frames: int = 0
    tx_bytes: int = 0
    rx_frames: int = 0
    rx_bytes: int = 0
    tx_pps: float = 0.0
    rx_pps: float = 0.0
    lost: int = 0
    loss_pct: float = 0.0
    out_of_order: int = 0
    duplicates: int = 0
    latency_ns: Latency = field(default_factory=Latency)
    vlan_tci: int | None = None  # last outer VLAN TCI seen on receive
    due_frames: int = 0  # frames due by the schedule so far (since the last clear)
    achieved_pps: float = 0.0  # requested × sent / due (engine/figures.py achieved_pps)
    # the rate the workers' pacers run the stream at now (their counter block; 0: paused
    # or not sending here): a live rate change shows here once the workers took it
    pacer_pps: float = 0.0
    paused: bool = False
    # why latency is missing or how it was corrected (tx and rx ports on different hosts)
    latency_note: str | None = None
    # 0: latency of every frame from its signature's user-space stamp; K > 0: latency of
    # every K-th frame from the kernel's transmit timestamp (tgen_tui/worker/txstamps)
    latency_every: int = 0
    # frames without a latency: sampled frames whose kernel tx time never came, or
    # signature frames sent too long ago to widen their 32-bit stamp safely
    latency_unstamped: int = 0
    # the lost frames matched to drop counters on the stream's path (dut/attribution.py),
    # and what no counter explains: shown always, never hidden
    loss_causes: tuple[LossCause, ...] = ()
    # frames with this stream's signature that arrived on another port than its rx_port,
    # not counted as received (the DUT's ICMP errors quote the end of the frame they
    # answer, where the signature is; engine/ownrows.py)
    rx_elsewhere: int = 0
    loss_unexplained: int = 0
    # stateful figures (tgen_tui.engine.flowstats), None where they do not apply: a
    # ``learn: true`` stream's tuples learned (and the first few, "NAT a:p -> own a:p"); a
    # forward stream's flows sent, verified (reply received) and setup latency; every
    # received stream's longest receive gap and when it began (s from the first start)
    learned: int | None = None
    learned_samples: tuple[str, ...] | None = None
    flows: int | None = None
    flows_verified: int | None = None
    setup_latency_ns: SetupLatency | None = None
    outage_ms: float | None = None
    outage_at_s: float | None = None
    # False: the longest gap lasts to the end (the stream never came back: "not
    # recovered"); True: frames came back after it; None: no outage measured
    outage_recovered: bool | None = None
    spacing: Spacing = field(default_factory=Spacing)  # inter-arrival spacing at the receiver

    @property
    def latency_source(self) -> str:
        return "kernel" if self.latency_every else "signature"


@dataclass(frozen=True)
class FlowStats:
    """One socket flow: kernel TCP or UDP between the transport hosts, through the DUT.
    Every figure is defined in :mod:`tgen_tui.engine.flowfigures`; rates are over the
    last interval, counts since the start (or the last clear)."""

    name: str
    stream: str  # the transport: entry it belongs to
    port: str
    rx_port: str
    protocol: str  # tcp | udp
    cc: str | None = None
    worker: int | None = None
    core: int | None = None
    state: str = "idle"  # idle | connecting | sending | off | draining | stopped | failed
    on: bool = False  # its schedule has it sending now
    tx_bytes: int = 0
    rx_bytes: int = 0
    goodput_bps: float = 0.0  # read by the receiver over the interval, bit/s
    tx_bps: float = 0.0
    goodput_run_bps: float | None = None  # read while due to send / time due to send
    active_s: float = 0.0  # time it was due to send
    errors: int = 0
    # TCP (TCP_INFO of the sender, across its connections)
    rtt_ms: float | None = None
    rttvar_ms: float | None = None
    min_rtt_ms: float | None = None
    rtt_mean_ms: float | None = None
    cwnd: int | None = None
    mss: int | None = None
    delivery_rate_bps: float | None = None
    retransmits: int | None = None
    data_segs_out: int | None = None
    retransmit_pct: float | None = None
    connections: int | None = None
    mathis_bps: float | None = None  # Reno: the throughput equation's figure
    mathis_ratio: float | None = None  # goodput over the run / Mathis
    # UDP
    requested_bps: float | None = None
    tx_packets: int | None = None
    rx_packets: int | None = None
    lost: int | None = None
    loss_pct: float | None = None
    jitter_ms: float | None = None
    # request/response (app) flows: the clients' connections (engine/appfigures.py)
    app: str | None = None  # request-response | http | dns
    load: str | None = None  # cps | concurrent | tps
    target: float | None = None  # the load asked now: conn/s, connections, transactions/s
    attempted: int | None = None
    due: int | None = None  # rate loads: connections due at the asked rate (by the stop)
    achieved_pct: float | None = None  # attempted / due: below 100, the tester fell behind
    established: int | None = None
    failed: int | None = None  # the four below together
    failed_refused: int | None = None
    failed_reset: int | None = None
    failed_timeout: int | None = None
    failed_local: int | None = None  # the tester's own limit (ports, addresses, fds)
    closed: int | None = None
    aborted: int | None = None  # of closed: open at the stop's drain end, closed with RST
    concurrent: int | None = None  # open now
    transactions: int | None = None
    served: int | None = None  # responses the server side wrote
    attempted_per_s: float | None = None  # over the interval
    established_per_s: float | None = None  # connections per second set up
    transactions_per_s: float | None = None
    setup_ns: SetupLatency | None = None  # connect called to writable (client's clock)
    transaction_ns: SetupLatency | None = None  # request sent to response read in full


@dataclass(frozen=True)
class WorkerStats:
    """One worker process: where it runs, what it serves and how busy its core is."""

    id: int
    core: int
    pid: int | None
    ports: tuple[str, ...]
    streams: tuple[str, ...]
    alive: bool
    tx_pps: float = 0.0
    rx_pps: float = 0.0
    core_cpu_pct: float = 0.0  # the whole core (psutil), includes kernel work charged to it
    proc_cpu_pct: float = 0.0  # the worker process itself
    core_cpu_mean: float = 0.0  # means over the samples taken while its ports were running
    proc_cpu_mean: float = 0.0
    exit_reason: str | None = None
    heartbeat_age_s: float | None = None  # since the worker's loop last turned
    busy_pct: float = 0.0  # share of wall time the worker spent building/sending/receiving
    tx_path: str | None = None  # sendmmsg | tx_ring | af_xdp
    tx_path_why: str | None = None  # "cache: measured fastest by tgen calibrate ..." per port
    pacing: str | None = None  # qdisc | timer | burst (tgen_tui.worker.pacing)

    @property
    def cpu_us_per_frame(self) -> float | None:
        """The worker process's CPU time per frame it sent or received, µs (None: idle)."""
        fps = self.tx_pps + self.rx_pps
        return self.proc_cpu_pct * 1e4 / fps if fps >= 1.0 else None

    lane: int = 0  # which of its port's sender lanes (tgen_tui.engine.lanes)
    lanes: int = 1
    kind: str = "frames"  # frames (raw frames, RX ring) | flows (kernel sockets)


@dataclass(frozen=True)
class DutStats:
    """The DUT's conntrack table and memory, from a probe."""

    source: str  # "netns:NAME" or "ssh:..." or "none"
    conntrack_count: int | None = None
    conntrack_max: int | None = None
    conntrack_peak: int = 0
    conntrack_start: int | None = None  # count at the first sample (before or at the start)
    new_per_s: float = 0.0
    full_at_s: float | None = None  # seconds since start when count first reached max
    mem_available_bytes: int | None = None
    error: str | None = None
    settings: tuple[tuple[str, str], ...] = ()  # e.g. (("conntrack_buckets", "65536"), ...)
    # drop counters since the baseline (DUT and tester), how much of each explains loss
    counters: tuple[CounterRow, ...] = ()
    cpu: tuple[CoreCpu, ...] = ()  # per core over the last interval
    cpu_note: str | None = None  # netns lab: "the host's CPUs..."; ssh: "the DUT's own CPUs"
    # entries by state (TCP states, else the protocol), read every few seconds for
    # profiles with request/response flows (dut/ctstates.py); () when not read
    conntrack_states: tuple[tuple[str, int], ...] = ()
    counters_errors: tuple[str, ...] = ()  # what could not be read this interval
    counters_excess: int = 0  # counted drops beyond the loss (other traffic on the DUT)

    @property
    def fill_pct(self) -> float | None:
        if self.conntrack_count is None or not self.conntrack_max:
            return None
        return 100.0 * self.conntrack_count / self.conntrack_max


@dataclass(frozen=True)
class StatsSnapshot:
    """Everything the engine knows at one instant, frozen."""

    t: float  # seconds since the engine started sending (first start)
    seq: int
    ports: tuple[PortStats, ...]
    streams: tuple[StreamStats, ...]
    workers: tuple[WorkerStats, ...]
    dut: DutStats | None = None
    warnings: tuple[str, ...] = ()
    final: bool = False
    flows: tuple[FlowStats, ...] = ()  # socket flows (profile transport:)
    fairness_jain: float | None = None  # Jain's index over the flows' interval goodput
    fairness_jain_run: float | None = None  # ... over their goodput over the run

    def port(self, name: str) -> PortStats:
        return next(p for p in self.ports if p.name == name)

    def stream(self, name: str) -> StreamStats:
        return next(s for s in self.streams if s.name == name)

    def flow(self, name: str) -> FlowStats:
        return next(f for f in self.flows if f.name == name)

    def to_dict(self) -> dict:
        """The public JSON shape: ports and streams keyed by name (NDJSON lines, result files)."""
        d = {
            "t": round(self.t, 4),
            "seq": self.seq,
            "ports": {p.name: asdict(p) for p in self.ports},
            "streams": {s.name: asdict(s) for s in self.streams},
            "workers": [asdict(w) for w in self.workers],
            "dut": None,
            "warnings": list(self.warnings),
        }
        if self.flows:
            d["flows"] = {f.name: asdict(f) for f in self.flows}
            d["fairness_jain"] = self.fairness_jain
            d["fairness_jain_run"] = self.fairness_jain_run
        if self.dut is not None:
            dd = asdict(self.dut)
            dd["fill_pct"] = self.dut.fill_pct
            d["dut"] = dd
        return d
