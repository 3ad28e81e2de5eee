"""The trial record every procedure, runner and simulated DUT produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class TrialResult:
    """One trial: what was asked, what the sender did, what arrived, and the verdict."""

    rate_pps: float  # requested rate (per direction, or connections/s for stateful trials)
    kind: str = "search"
    passed: bool = False
    valid: bool = True  # False: the sender fell behind (sending took > duration × (1 + tol))
    reason: str = ""  # why it failed, in words ("lost 3 frames", "invalid: sender late ...")
    duration_s: float = 0.0
    tx_frames: int = 0
    rx_frames: int = 0
    lost: int = 0
    achieved_pps: float = 0.0
    send_time_s: float | None = None
    stopped_early: bool = False
    extra: dict = field(default_factory=dict)  # per-stream counts, latency, conntrack, ...

    @property
    def loss_pct(self) -> float:
        return 100.0 * self.lost / self.tx_frames if self.tx_frames else 0.0

    @property
    def verdict(self) -> str:
        if self.passed:
            return "pass"
        return "invalid" if not self.valid else "fail"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict
        d["loss_pct"] = self.loss_pct
        return d
