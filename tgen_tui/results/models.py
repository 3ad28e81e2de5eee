"""Typed results: the run result, the stored trials and the methodology reports.

Every document the store writes or reads goes through one of these pydantic models
(:func:`parse_result`, :func:`parse_trial`). A document carries ``schema_version``;
documents stored before it existed (tgen-tui up to 468ed7a) are version 1 as they are,
so reading one migrates it by adding the field. Fields are only ever added: the models
allow extra fields, and :meth:`Doc.to_doc` gives back exactly the fields that were set,
so a document keeps its shape through a write and a read.

Imports: pydantic and the standard library only (``results`` sits beside ``fmt``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

SCHEMA_VERSION = 1

Num = int | float  # a union keeps ints as ints (a frame count stays 5000, not 5000.0)


class Part(BaseModel):
    """A piece of a document: typed where the code reads it, open to added fields."""

    # defer_build: a model's validator is built on its first use, not at import (tgen --help
    # and a bad-input exit never build the 58 of them: 0.17 s of every CLI start)
    model_config = ConfigDict(extra="allow", defer_build=True)

    def to_doc(self, **kw: Any) -> dict:
        """The fields that were set, as plain Python data (JSON-serialisable); ``kw``:
        model_dump's (``exclude``)."""
        return self.model_dump(exclude_unset=True, **kw)


class Doc(Part):
    """A whole document, stored as one row: it carries its ``schema_version``."""

    schema_version: int = SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        # version 1 is the shape of 468ed7a, which had no schema_version field
        if isinstance(data, dict) and "schema_version" not in data:
            data = {**data, "schema_version": SCHEMA_VERSION}
        return data


# ---------------------------------------------------------------- tgen run


class Latency(Part):
    min: Num | None = None
    avg: Num | None = None
    p50: Num | None = None
    p99: Num | None = None
    p999: Num | None = None
    max: Num | None = None
    jitter: Num | None = None
    p9999: Num | None = None


class SpacingResult(Part):
    """A stream's inter-arrival spacing at its receiver (tgen_tui/engine/spacing.py)."""

    asked_gap_ns: Num | None = None
    gaps: int = 0
    mean_gap_ns: Num | None = None
    mae_ns: Num | None = None
    within_10pct: Num | None = None  # share 0..1 of gaps within 10 % of the asked gap
    p50_ns: Num | None = None
    p99_ns: Num | None = None
    ks: Num | None = None
    law: str | None = None


class PortResult(Part):
    name: str | None = None
    tx_frames: int = 0
    rx_frames: int = 0
    tx_pps_mean: Num | None = None
    rx_pps_mean: Num | None = None
    requested_pps: Num | None = None
    achieved_pps: Num | None = None
    achieved_pct: Num | None = None
    gateway_mac: str | None = None  # the port's gateway's MAC, resolved by ARP at start
    gateway6_mac: str | None = None  # resolved by IPv6 Neighbour Discovery


class LossCauseResult(Part):
    """Frames of a stream's loss that one drop counter explains (engine/losscauses.py)."""

    cause: str
    counter: str
    where: str
    frames: int = 0


class StreamResult(Part):
    name: str | None = None
    tx_frames: int = 0
    rx_frames: int = 0
    lost: int = 0
    loss_pct: Num | None = None
    out_of_order: int = 0
    duplicates: int = 0
    latency_ns: Latency = Field(default_factory=Latency)
    latency_source: str | None = None
    spacing: SpacingResult | None = None
    # stateful figures (tgen_tui.engine.stateful): set only where they apply
    outage_ms: Num | None = None
    outage_at_s: Num | None = None
    flows: int | None = None
    flows_verified: int | None = None
    setup_latency_ns: dict[str, Any] | None = None
    learned: int | None = None
    learned_samples: list[str] | None = None
    loss_causes: list[LossCauseResult] | None = None  # lost frames matched to drop counters
    loss_unexplained: int | None = None  # lost frames no counter explains


class DutResult(Part):
    source: str | None = None
    conntrack_peak: int | None = None
    conntrack_start: int | None = None
    conntrack_rise: int | None = None
    conntrack_max: int | None = None
    conntrack_final: int | None = None
    conntrack_states_final: dict[str, int] | None = None  # app flows: entries by state
    full_at_s: Num | None = None
    settings: dict[str, Any] | None = None
    error: str | None = None


class FlowResult(Part):
    """One socket flow of a run (tgen_tui.engine.flowresult): goodput over the run, mean
    RTT, retransmits, UDP loss and jitter, the throughput equation's figure."""

    protocol: str
    port: str | None = None
    rx_port: str | None = None
    cc: str | None = None
    tx_bytes: int = 0
    rx_bytes: int = 0
    goodput_bps: Num = 0.0
    span_s: Num = 0.0
    rtt_ms: Num | None = None
    min_rtt_ms: Num | None = None
    retransmits: int | None = None
    data_segs_out: int | None = None
    retransmit_pct: Num | None = None
    mss: int | None = None
    cwnd_final: int | None = None
    mathis_bps: Num | None = None
    mathis_ratio: Num | None = None
    tx_packets: int | None = None
    rx_packets: int | None = None
    lost: int | None = None
    loss_pct: Num | None = None
    jitter_ms: Num | None = None
    # a request/response flow (tgen_tui.engine.appfigures): its clients' connections
    app: str | None = None
    load: str | None = None
    attempted: int | None = None
    due: int | None = None
    achieved_pct: Num | None = None
    established: int | None = None
    failed: int | None = None
    failed_refused: int | None = None
    failed_reset: int | None = None
    failed_timeout: int | None = None
    failed_local: int | None = None
    closed: int | None = None
    aborted: int | None = None
    transactions: int | None = None
    served: int | None = None
    established_per_s: Num | None = None  # over the run: established / span_s
    transactions_per_s: Num | None = None
    setup_ns: dict[str, Num | None] | None = None  # min, p50, p90, p99, max, avg
    transaction_ns: dict[str, Num | None] | None = None
    failure_causes: list[dict[str, Any]] | None = None  # drop counters that moved meanwhile


class TransportResult(Part):
    """The socket flows of a run: per flow (``streams``, by flow name), the headline
    figures (``metrics``), and the flow workers (core, flows)."""

    streams: dict[str, FlowResult] = Field(default_factory=dict)
    metrics: dict[str, Num | None] = Field(default_factory=dict)
    workers: list[dict[str, Any]] = Field(default_factory=list)


class RunResult(Doc):
    """``tgen run --json`` (tgen_tui.engine.result.build_result) and the console's runs."""

    tool: str = "tgen-tui"
    profile: str | None = None
    profile_path: str | None = None
    profile_hash: str | None = None
    seed: int | None = None
    duration_s: Num | None = None
    partial: bool = False
    passed: bool | None = None
    started_at: str | None = None
    thresholds: list[str] = Field(default_factory=list)
    breached: list[dict[str, Any]] = Field(default_factory=list)
    ports: dict[str, PortResult] = Field(default_factory=dict)
    streams: dict[str, StreamResult] = Field(default_factory=dict)
    workers: list[dict[str, Any]] = Field(default_factory=list)
    dut_events: list[dict[str, Any]] | None = None  # tgen run --dut-event (engine.dut_events)
    worker_plan: list[str] = Field(default_factory=list)
    dut: DutResult | None = None
    environment: dict[str, Any] = Field(default_factory=dict)
    stream_config: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    events: list[Any] = Field(default_factory=list)
    latency_source: str | None = None
    latency_floor_ns: Num | None = None
    metrics: dict[str, Num | None] = Field(default_factory=dict)  # a verb's headline figures
    signal: str | None = None  # SIGINT or SIGTERM when a signal ended the run
    cluster: dict[str, Any] | None = None  # tgen run --cluster: hosts and clock offsets
    # every run of a DUT hook (dut/hooks.py HookRecord.to_dict): hook, command, output
    dut_hooks: list[dict[str, Any]] | None = None
    session: dict[str, Any] | None = None  # the console's run: clears, time sending
    transport: TransportResult | None = None  # socket flows (profile transport:)
    tcp: dict[str, Any] | None = None  # tcp.handshake: the connections opened and closed
    # --capture / --capture-lost: each capture's file, counts and what it could not keep
    captures: list[dict[str, Any]] | None = None


# ---------------------------------------------------------------- trials


class StreamCounts(Part):
    """One stream's counts in a trial (its final snapshot): frames due, sent, received."""

    requested_pps: Num | None = None
    count: int = 0  # frames due (the schedule's count)
    tx_frames: int = 0
    rx_frames: int = 0
    lost: int = 0
    out_of_order: int = 0
    duplicates: int = 0
    latency_ns: Latency = Field(default_factory=Latency)
    latency_source: str | None = None  # kernel | signature
    latency_every: int | None = None


class PortCounts(Part):
    """One port's counts in a trial: the tester's and the interface's."""

    tx_frames: int = 0
    rx_frames: int = 0
    rx_other: int | None = None  # frames on the ring no stream signed (ARP, ND, ...)
    if_tx_frames: int | None = None
    if_rx_frames: int | None = None
    rx_drops: int | None = None  # the RX ring's tp_drops: frames the tester lost itself
    late_max_ns: int | None = None  # the sender's worst lateness


class ConntrackCounts(Part):
    """The DUT's conntrack count before and after a trial (and the reset's time)."""

    before: int | None = None
    after: int | None = None
    rise: int | None = None
    reset_s: Num | None = None


class ClearRecord(Part):
    """The counters' clear in a latency trial (RFC 8219 delay): when, and what was lost
    to it."""

    at_s: Num
    sent_before: int = 0
    unobserved_frames_max: int = 0


class DropCounter(Part):
    """A drop counter that moved in a trial (methodology.kit.drops), or their sum."""

    where: str
    counter: str
    cause: str | None = None
    frames: int = 0
    matched: int | None = None
    excess: int | None = None
    trials: int | None = None  # in a report's sum: the trials that recorded it


class HookRun(Part):
    """One run of a DUT hook (dut/hooks.py HookRecord.to_dict)."""

    hook: str
    command: str
    returncode: int
    stdout: str = ""
    stderr: str = ""
    seconds: Num = 0.0
    timed_out: bool = False
    trial: int | None = None
    ok: bool | None = None


class LearnedTuples(Part):
    """RFC 9693: the tuples the Responder's port learned in phase 1 (at most M)."""

    tuples: int
    max: int
    port: str


class DirectionCounts(Part):
    """tgen search: one direction's intended, offered (sent) and received frames."""

    intended_pps: Num
    intended_frames: int
    offered_frames: int
    received_frames: int
    offered_pps: Num | None = None
    received_pps: Num | None = None
    duplicates: int | None = None
    out_of_order: int | None = None
    sender_fell_behind: bool = False


class TcpPhase(Part):
    """--proto tcp: one batch of segments (syn, syn-ack, ack, ...)."""

    tx: int
    rx: int
    passed: bool
    learned: int | None = None  # syn: the tuples the Responder learned


class TcpRecord(Part):
    """--proto tcp: every batch of a trial and how the connections ended."""

    phases: dict[str, TcpPhase] = Field(default_factory=dict)
    teardown: str
    packets_per_connection: int
    frame_size: int


class TrialExtra(Part):
    """What a trial records beside its counts. Typed where the code reads it; a
    procedure may add its own fields (they are kept, untyped). Only the fields that were
    set are written."""

    wall_start: Num | None = None  # time.time() at the trial's start (phase 2's D)
    streams: dict[str, StreamCounts] | None = None  # the store's copy drops these
    ports: dict[str, PortCounts] | None = None
    sent_by_deadline: int | None = None
    early_stop_at_s: Num | None = None
    clear: ClearRecord | None = None
    conntrack: ConntrackCounts | None = None
    dut_hooks: list[HookRun] | None = None
    retried: list[Trial] | None = None  # earlier attempts (without their streams)
    learned_report: dict[str, dict[str, Any]] | None = None  # each learning port's worker
    # loss attribution (methodology.kit.drops)
    loss_causes: dict[str, list[LossCauseResult]] | None = None
    loss_unexplained: dict[str, int] | None = None
    drops: list[DropCounter] | None = None
    # each stream's spacing at the receiver (methodology.kit.spacing; kept in the store)
    spacing: dict[str, SpacingResult] | None = None
    # why a trial is invalid
    host_backlog_drops: int | None = None
    host_dropped: bool | None = None
    tester_ring_drops: int | None = None  # RX ring tp_drops over the ports (the tester's)
    sender_late_max_s: Num | None = None
    sender_stalled: bool | None = None
    # RFC 9693
    connections: int | None = None
    conntrack_rise: int | None = None
    phase1_s: Num | None = None
    learned: LearnedTuples | None = None
    phase2: Phase2Trial | None = None
    tcp: TcpRecord | None = None
    tcp_established: int | None = None
    tcp_states_after_handshake: dict[str, int] | None = None
    tcp_states_after_teardown: dict[str, int] | None = None
    # tgen search (RFC 9971)
    loss_ratio: Num | None = None
    directions: dict[str, DirectionCounts] | None = None
    direction_streams: dict[str, list[str]] | None = None


#: validation context of a stored document (parse_result, parse_trial): read as it is
AS_STORED = "as_stored"
STORED = {AS_STORED: True}

#: the fields every trial record has (written even when they keep their defaults)
TRIAL_FIELDS = (
    "rate_pps", "kind", "passed", "valid", "reason", "duration_s", "tx_frames",
    "rx_frames", "lost", "achieved_pps", "send_time_s", "stopped_early", "extra",
)  # fmt: skip
DERIVED = {"verdict", "loss_pct"}  # written with every trial made here, never read


class Trial(Part):
    """One trial: what was asked, what the sender did, what arrived, and the verdict.
    The trial runner, the simulated DUTs and the procedures make and change these; the
    reports and the store keep them as they are (``loss_pct`` and ``verdict`` are
    derived, and written)."""

    rate_pps: Num  # requested rate (per direction, or connections/s for stateful trials)
    kind: str = "search"
    passed: bool = False
    valid: bool = True  # False: the sender fell behind (sending took > duration × (1 + tol))
    reason: str = ""  # why it failed, in words ("lost 3 frames", "invalid: sender late ...")
    duration_s: Num = 0.0
    tx_frames: int = 0
    rx_frames: int = 0
    lost: int = 0
    achieved_pps: Num = 0.0
    send_time_s: Num | None = None
    stopped_early: bool = False
    extra: TrialExtra = Field(default_factory=TrialExtra)

    _stored: bool = PrivateAttr(default=False)  # read from a store: written as it was read

    @model_validator(mode="before")
    @classmethod
    def _derived_in(cls, data: Any, info: ValidationInfo) -> Any:
        # loss_pct and verdict are derived, not input (a stored trial keeps its copies)
        stored = (info.context or {}).get(AS_STORED)
        if isinstance(data, dict) and not stored and DERIVED & data.keys():
            data = {k: v for k, v in data.items() if k not in DERIVED}
        return data

    @model_validator(mode="after")
    def _always_written(self, info: ValidationInfo) -> Trial:
        # a trial made here writes every field; a stored one the fields it had
        if (info.context or {}).get(AS_STORED):
            self._stored = True
        else:
            self.__pydantic_fields_set__.update(TRIAL_FIELDS)
        return self

    @model_serializer(mode="wrap")
    def _with_derived(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        d = handler(self)
        if not self._stored:
            d["verdict"], d["loss_pct"] = self.verdict, self.loss_pct
        return d

    @property
    def verdict(self) -> str:
        """pass, fail, or invalid (the sender fell behind: failed, and said so); a stored
        trial's as it was stored."""
        if self._stored and "verdict" in (self.__pydantic_extra__ or {}):
            return str(self.__pydantic_extra__["verdict"])  # type: ignore[index]
        if self.passed:
            return "pass"
        return "invalid" if not self.valid else "fail"

    @property
    def loss_pct(self) -> float:
        """Lost frames as a percentage of the frames sent (a stored trial's as stored)."""
        if self._stored and "loss_pct" in (self.__pydantic_extra__ or {}):
            return float(self.__pydantic_extra__["loss_pct"])  # type: ignore[index]
        return 100.0 * self.lost / self.tx_frames if self.tx_frames else 0.0

    def without_streams(self) -> Self:
        """A copy without the per-stream counts (the store's, the progress lines' and an
        earlier attempt's copy)."""
        return type(self).model_validate(self.to_doc(exclude={"extra": {"streams"}}))


class Phase2Trial(Trial):
    """RFC 9693 phase 2 of a trial: the Responder's replies to the learned tuples."""

    order: str | None = None  # fixed | increasing | decreasing | random
    learned_tuples: int | None = None
    table_max: int | None = None
    replies_back_through_nat: int | None = None
    through_nat: bool | None = None
    initiator_port_rx: int | None = None
    d_ms: int | None = None  # when it started after phase 1 began
    d_ms_min: int | None = None  # 1000·N/R + T
    d_ms_note: str | None = None


TrialExtra.model_rebuild()


class TrialRecord(Trial, Doc):
    """A trial as the store keeps it: the trial and where it belongs (``search``,
    ``frame_size``, ``repeat``, ``load_pct``, ``connections``, ``phase``: extra fields)."""


class SearchOutcome(Doc):
    """One repeated search's outcome, stored next to its trials: a ``repeat`` whose
    ``metrics`` (l as the headline, h, the trial count) give the spread of the repeats."""

    repeat: int
    kind: Literal["search_result"] = "search_result"
    status: str
    metrics: dict[str, Num] = Field(default_factory=dict)


class LooseRecord(Doc):
    """A stored trial of another shape (a verb's own repeat: ``{"repeat": 0, ...}``)."""


def parse_trial(d: dict | BaseModel) -> Doc:
    """A stored trial through its model (old rows without schema_version migrate)."""
    if isinstance(d, Doc):
        return d
    if isinstance(d, BaseModel):
        d = d.model_dump()
    if d.get("kind") == "search_result":
        return SearchOutcome.model_validate(d, context=STORED)
    if "rate_pps" in d:
        return TrialRecord.model_validate(d, context=STORED)
    return LooseRecord.model_validate(d, context=STORED)


# ---------------------------------------------------------------- methodology reports


class Summary(Part):
    """``methodology.kit.stats.summary``: n, median, min, max (p1, p99 from 10 values)."""

    n: int = 0
    median: Num | None = None
    min: Num | None = None
    max: Num | None = None
    p1: Num | None = None
    p99: Num | None = None


class SearchSummary(Summary):
    h: Summary | None = None
    upper_bound_not_reached: int = 0
    no_passing_rate: int = 0
    unconfirmed: int = 0
    frame_size: int | None = None


class Search(Part):
    """One binary search (methodology.kit.search.SearchResult)."""

    l_pps: Num
    h_pps: Num | None = None
    status: str
    max_rate: Num
    error: Num
    n_trials: dict[str, int] = Field(default_factory=dict)
    confirmed: bool | None = None
    trials: list[Trial] = Field(default_factory=list)
    frame_size: int | None = None


class Report(Doc):
    """What every methodology report records (METHODOLOGY.md, "What every result records")."""

    test: str
    tester: str | None = None
    started_at: str | None = None
    duration_s: Num | None = None
    partial: bool = False
    quick: bool = False
    profile: str | None = None
    profile_path: str | None = None
    profile_hash: str | None = None
    seed: int | None = None
    direction: str | None = None
    rate_unit: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)
    profile_detail: dict[str, Any] = Field(default_factory=dict)
    dut: dict[str, Any] | None = None
    environment: dict[str, Any] = Field(default_factory=dict)
    latency_source: str | None = None
    latency_floor_ns: Num | None = None
    warnings: list[str] = Field(default_factory=list)
    deviations: list[str] = Field(default_factory=list)
    signal: str | None = None
    metrics: dict[str, Num] = Field(default_factory=dict)
    trials_flat_count: int | None = None
    # NFVbench-style: every drop counter that moved, summed over the trials
    drops: list[DropCounter] | None = None
    loss_unexplained: int | None = None  # lost frames no counter explained
    dut_hooks: dict[str, Any] | None = None  # the DUT hooks' runs: counts and records


class ThroughputSize(Part):
    frame_size: int
    max_rate: Num
    streams: list[str] = Field(default_factory=list)
    summary: SearchSummary
    searches: list[Search] = Field(default_factory=list)


class ThroughputReport(Report):
    """rfc2544-throughput: repeated binary searches per frame size."""

    searches: list[Search] = Field(default_factory=list)
    summary: SearchSummary | None = None
    by_frame_size: list[ThroughputSize] = Field(default_factory=list)


class LossPoint(Part):
    load_pct: Num
    rate_pps: Num
    flr_pct: Num
    trial: Trial


class LossCurve(Part):
    frame_size: int
    max_rate: Num
    points: list[LossPoint] = Field(default_factory=list)


class LossReport(Report):
    """rfc2544-loss: frame loss against offered load, one curve per frame size."""

    frame_loss: list[LossCurve] = Field(default_factory=list)


class LatencyFigures(Part):
    """RFC 8219 figures of one trial: TL and WCL (latency) or PDV, the worst stream's, and
    each stream's (``streams``)."""

    tl_ns: Num | None = None
    wcl_ns: Num | None = None
    tagged: int | None = None
    lost_tagged: int | None = None
    penalty_ns: Num | None = None
    pdv_ns: Num | None = None
    streams: dict[str, dict[str, Any]] = Field(default_factory=dict)


class LatencyTrial(Part):
    repeat: int
    figures: LatencyFigures
    trial: Trial


class LatencySize(Part):
    frame_size: int
    rate_pps: Num
    delay_s: Num
    trials: list[LatencyTrial] = Field(default_factory=list)
    summary: dict[str, Summary] = Field(default_factory=dict)


class LatencyReport(Report):
    """rfc2544-latency (TL, WCL) and rfc2544-pdv (pdv_ns): repeated trials per frame size."""

    by_frame_size: list[LatencySize] = Field(default_factory=list)
    summary: dict[str, Any] | None = None
    throughput_searches: list[Search] = Field(default_factory=list)


class CpsReport(Report):
    """rfc9693-cps: repeated searches of the connection establishment rate."""

    connections: int | None = None
    unique_space: int | None = None
    searches: list[Search] = Field(default_factory=list)
    summary: SearchSummary | None = None


class CapacityStep(Part):
    phase: str
    connections: int
    rate: Num
    passed: bool
    trial: Trial | None = None
    search: Search | None = None


class Capacity(Part):
    capacity: int | None = None
    h_connections: int | None = None
    r0: Num = 0.0
    c0: int
    c0_used: int = 0
    beta: Num
    gamma: Num
    error: int
    status: str
    steps: list[CapacityStep] = Field(default_factory=list)


class CapacitySummary(Part):
    capacity: int | None = None
    h_connections: int | None = None
    r0: Num | None = None
    status: str | None = None


class CapacityReport(Report):
    """rfc9693-capacity: the conntrack table capacity."""

    capacity: Capacity | None = None
    summary: CapacitySummary | None = None


class TeardownRow(Part):
    repeat: int
    loaded_entries: int | None = None
    entries_after_flush: int | None = None
    flush_s: Num | None = None
    empty_flush_s: Num | None = None
    rate_per_s: Num | None = None
    load_trial: Trial


class TeardownReport(Report):
    """rfc9693-teardown: timed flushes of a loaded and an empty table."""

    connections: int | None = None
    load_rate: Num | None = None
    teardown: list[TeardownRow] = Field(default_factory=list)
    summary: Summary | None = None


class ScaleupRow(Part):
    cores: int
    core_list: list[int] = Field(default_factory=list)
    median: Num | None = None
    min: Num | None = None
    max: Num | None = None
    relative_scaleup: Num | None = None


def _scaled_test(v: Any) -> str:
    test = v.get("test") if isinstance(v, dict) else getattr(v, "test", None)
    return test if test in ("rfc2544-throughput", "rfc9693-cps") else "other"


#: the report of a test a scale-up runs, through that test's model
ScaledReport = Annotated[
    Annotated[ThroughputReport, Tag("rfc2544-throughput")]
    | Annotated[CpsReport, Tag("rfc9693-cps")]
    | Annotated[Report, Tag("other")],
    Discriminator(_scaled_test),
]


class ScaleupRun(Part):
    cores: int
    core_list: list[int] = Field(default_factory=list)
    report: ScaledReport  # the scaled test's own report

    @model_validator(mode="wrap")
    @classmethod
    def _report_as_stored(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # a run's report stored without schema_version (468ed7a) is written back without:
        # only a whole document migrates
        run = handler(data)
        inner = data.get("report") if isinstance(data, dict) else None
        if isinstance(inner, dict) and "schema_version" not in inner:
            run.report.__pydantic_fields_set__.discard("schema_version")
        return run


class ScaleupReport(Doc):
    """scaleup-TEST: one run of TEST per core count, and the relative scale-up."""

    test: str
    partial: bool = False
    quick: bool = False
    unit: str = ""
    scaled: str | None = None
    cores: list[int] = Field(default_factory=list)
    rows: list[ScaleupRow] = Field(default_factory=list)
    runs: list[ScaleupRun] = Field(default_factory=list)
    seed: int | None = None
    dut: dict[str, Any] | None = None
    profile_path: str | None = None
    profile_hash: str | None = None
    warnings: list[str] = Field(default_factory=list)
    deviations: list[str] = Field(default_factory=list)  # none of its own (its runs' are)
    metrics: dict[str, Num] = Field(default_factory=dict)


class GoalSpec(Part):
    """An RFC 9971 search goal (methodology.procedures.mlr.goals.Goal)."""

    name: str | None = None
    loss_ratio: Num
    exceed_ratio: Num
    final_trial_duration_s: Num
    duration_sum_s: Num
    width: Num
    initial_trial_duration_s: Num | None = None
    loss_pct: Num | None = None


class GoalResult(Part):
    """One RFC 9971 search goal's outcome (tgen search)."""

    name: str
    goal: GoalSpec | None = None
    relevant_lower_bound_pps: Num | None = None
    relevant_upper_bound_pps: Num | None = None
    conditional_throughput_pps: Num | None = None
    quantile_loss_ratio: Num | None = None
    regular: bool = False
    irregular: str | None = None


class SearchTrial(Trial):
    """A trial of tgen search: its index, loss ratio and counts per direction beside it."""

    index: int | None = None
    loss_ratio: Num | None = None
    directions: dict[str, DirectionCounts] | None = None


class LadderLatency(Part):
    """One direction's latency at a ladder step: the worst stream's percentiles (ns)."""

    min_ns: Num | None = None
    p50_ns: Num | None = None
    p99_ns: Num | None = None
    p999_ns: Num | None = None
    p9999_ns: Num | None = None
    max_ns: Num | None = None
    source: str = ""


class LadderStep(Part):
    """A step of the latency ladder after a search: low, or 10/50/90 % of a goal's CT."""

    goal: str | None = None
    step: str
    rate_pps: Num
    latency: dict[str, LadderLatency] = Field(default_factory=dict)
    trial: SearchTrial


class LoadClass(Part):
    """A load the search tried: its trials and its classification for every goal."""

    load_pps: Num
    trials: int = 0
    duration_sum_s: Num = 0.0
    max_loss_ratio: Num | None = None
    classification: dict[str, str] = Field(default_factory=dict)


class SearchReport(Report):
    """search: the RFC 9971 multiple loss ratio search, every trial, the latency ladder.
    ``dut_drops``: the DUT's drop counters (filled by loss attribution when it lands)."""

    preset: str | None = None
    preset_definition: str = ""
    frame_size: int | None = None
    stream_names: list[str] = Field(default_factory=list)
    load_unit: str | None = None
    max_load_source: str | None = None
    status: str | None = None  # done | partial
    min_load_pps: Num | None = None
    max_load_pps: Num | None = None
    warmup_s: Num | None = None
    unsent_is_loss: bool | None = None
    n_trials: int | None = None
    trial_seconds: Num | None = None
    goals: list[GoalResult] = Field(default_factory=list)
    trials: list[SearchTrial] = Field(default_factory=list)
    ladder: list[LadderStep] = Field(default_factory=list)
    loads: list[LoadClass] = Field(default_factory=list)
    aggregate_factor: int = 1
    dut_drops: dict[str, Any] = Field(default_factory=dict)


class AppSearchReport(SearchReport):
    """rfc9411-cps / rfc9411-concurrent: tgen search's report over app flows, in
    connections/s or connections; ``failed_trial`` says what counted as a failed trial."""

    search_kind: str | None = None  # cps | concurrent
    base_load: Num | None = None  # the profile's own load of that kind
    failed_trial: str | None = None


class SweepRow(Part):
    sessions: int
    sessions_requested: int | None = None
    cps: Num | None = None
    throughput: Num | None = None
    filled: int | None = None
    fill_passed: bool | None = None
    conntrack_after: int | None = None
    cps_search: Search | None = None
    throughput_search: Search | None = None


class SweepReport(Report):
    """``tgen sweep``: throughput and connection rate against sessions (methodology.procedures.sweep)."""

    sweep: str = "sessions"
    sessions: list[int] = Field(default_factory=list)
    rows: list[SweepRow] = Field(default_factory=list)


#: The model of each test's document, by the test's name as the store files it.
REPORTS: dict[str, type[Doc]] = {
    "run": RunResult,
    "tui": RunResult,  # the console's runs
    "rfc2544-throughput": ThroughputReport,
    "rfc2544-loss": LossReport,
    "rfc2544-latency": LatencyReport,
    "rfc2544-pdv": LatencyReport,
    "rfc9693-cps": CpsReport,
    "rfc9693-capacity": CapacityReport,
    "rfc9693-teardown": TeardownReport,
    "scaleup-rfc2544-throughput": ScaleupReport,
    "scaleup-rfc9693-cps": ScaleupReport,
    "sweep": SweepReport,
    "search": SearchReport,
    "rfc9411-cps": AppSearchReport,
    "rfc9411-concurrent": AppSearchReport,
}


def model_for(test: str) -> type[Doc]:
    """The document model of a test (a verb's own test name: the run result's)."""
    return REPORTS.get(test, RunResult)


def parse_result(test: str, doc: dict | BaseModel) -> Doc:
    """A result document through its test's model (old ones migrate on the way)."""
    if isinstance(doc, Doc):
        return doc
    if isinstance(doc, BaseModel):
        doc = doc.model_dump()
    return model_for(test).model_validate(doc, context=STORED)
