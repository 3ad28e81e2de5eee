"""The parameters of a methodology run (every option of the verbs, with METHODOLOGY.md's
defaults) and the common conditions they refer to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tgen_tui.methodology.kit.verdict import LossTolerance

if TYPE_CHECKING:
    from tgen_tui.dut.hooks import Hooks
    from tgen_tui.engine.options import TransportFactory

#: METHODOLOGY.md "Frame sizes for IPv4" (``--frame-sizes rfc2544``)
RFC2544_SIZES = (64, 128, 256, 512, 1024, 1280, 1518)

#: the Params every TrialRunner of a test shares (Params.trial_options)
TRIAL_OPTIONS = (
    "tolerance",
    "cores",
    "early_stop",
    "max_late_s",
    "retries",
    "cluster",
    "transport",
    "lanes",
    "owner",
)


@dataclass
class Params:
    """Every option of the methodology verbs, with METHODOLOGY.md's defaults."""

    profile: str
    duration_s: float = 60.0
    search_duration_s: float | None = None  # None: same as duration
    timeout_s: float = 2.0
    settle_s: float = 2.0
    repeats: int = 10
    max_rate: float | None = None  # None: the port's line rate at the frame size
    error: float = 1000.0
    frame_sizes: list[int] | None = None  # None: the profile's
    loss_tolerance: LossTolerance = field(default_factory=LossTolerance)
    direction: str = "forward"
    seed: int | None = None
    tolerance: float = 1e-3
    cores: list[int] | None = None
    early_stop: bool = True
    max_late_s: float = 0.010
    retries: int = 2
    quick: bool = False
    # latency / pdv
    rate: float | None = None  # None: measure the throughput first
    delay_s: float = 60.0
    step_pct: float = 10.0
    # stateful (RFC 9693)
    n: int | None = None  # None: the Initiator's unique port space
    m: int | None = None
    r: float | None = None
    t_ms: float = 500.0
    d_ms: float | None = None
    alpha: float = 1.0
    beta: float = 0.2
    gamma: float = 0.4
    e: int = 1000
    c0: int = 1_000_000
    phase2: str = "final"  # off | final (after each search, at l) | every (each trial)
    responder_order: str = "random"
    proto: str = "udp"  # udp | tcp: RFC 9693 connections as TCP handshakes (rfc9693.tcpflow)
    tcp_teardown: str = "fin"  # tcp: fin | rst | none after the handshake of each trial
    dut_netns: str | None = None
    dut_ssh: str | None = None
    dut_reset: str | None = None
    cluster: str | None = None  # Ray head: ports that name a host run there (as tgen run)
    transport: TransportFactory | None = None  # EngineOptions.transport (--cluster's)
    hooks: Hooks | None = None  # before_trial/after_trial run by every trial (and the run's)
    owner: Any = None  # the run owner (tgen_tui.session): every trial's engine goes through it
    lanes: int | None = None  # sender lanes of every port (None: the profile's); scaleup --lanes
    pacing: str | None = None  # every port's pacing (None: the profile's); --pacing

    def trial_options(self) -> dict:
        """The options every TrialRunner of a test shares: validity, cores, early stop, re-runs."""
        return {k: getattr(self, k) for k in TRIAL_OPTIONS}

    @property
    def search_d(self) -> float:
        return self.search_duration_s if self.search_duration_s is not None else self.duration_s
