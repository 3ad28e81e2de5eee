"""``LabConfig``: every parameter of the lab, validated in one place."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field

from tgen_tui.diagnostics import BadInput
from tgen_tui.lab.naming import DEFAULT_PREFIX, valid_prefix

TOPOLOGIES = ("nat", "direct", "router")
#: How the DUT's NAT picks the public source port: keep the private one when it is free
#: (Linux's default), or draw one at random for every new connection (nft "fully-random").
NAT_PORT_MODES = ("preserve", "random")

#: Fields that only make sense with a DUT (topology "nat"), and that ``set_dut`` may change.
DUT_FIELDS = (
    "conntrack_max",
    "conntrack_buckets",
    "ct_limit",
    "udp_timeout",
    "udp_stream_timeout",
    "drop_percent",
    "rate_limit_pps",
    "ct_new_rate",
    "tbf",
    "filter_rules",
    "nat_ports",
    "delay",
    "loss",
    "transport_hosts",
)
SETTABLE_FIELDS = (*DUT_FIELDS, "rps_cpus", "xdp_peers")

DEFAULT_UDP_TIMEOUT = 120
DEFAULT_UDP_STREAM_TIMEOUT = 180
MAX_FILTER_RULES = 200_000

_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)?$", re.I)
_TIME_RE = re.compile(r"^(\d+(?:\.\d+)?)(s|sec|ms|msec|us|usec)?$", re.I)
_TIME_UNITS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "msec": 1e-3, "us": 1e-6, "usec": 1e-6}
_MASK_RE = re.compile(r"^[0-9a-fA-F]+(,[0-9a-fA-F]+)*$")
_RATE_UNITS = {
    "bit": 1,
    "kbit": 1e3,
    "mbit": 1e6,
    "gbit": 1e9,
    "tbit": 1e12,
    "bps": 8,
    "kbps": 8e3,
    "mbps": 8e6,
    "gbps": 8e9,
    "tbps": 8e12,
}


def default_rps_cpus() -> str | None:
    """CPU 0 only (mask ``1``) on a machine with 2 or more CPUs, else leave RPS alone.

    veth runs the receiver's kernel work on the sending CPU; workers are pinned to the last
    cores by default, so steering receive work (and the DUT's forwarding) to CPU 0 keeps it
    off the senders' cores (BASELINES.md, "Where receive work runs").
    """
    return "1" if (os.cpu_count() or 1) >= 2 else None


@dataclass(frozen=True)
class TbfSpec:
    rate: str  # as tc spells it, e.g. "100mbit"
    rate_bps: float  # bits per second
    latency: str  # e.g. "50ms": the longest a frame waits in the queue
    burst_bytes: int
    limit_bytes: int = 0  # the queue: rate x latency (0: let tc size it from latency)

    def tc_args(self) -> list[str]:
        """tc's arguments. The queue is given as ``limit`` = rate x latency, so a full queue
        holds frames for LATENCY: tc's own ``latency`` keyword adds the burst on top of it
        (8mbit,20ms with a 10 ms burst queued for 30 ms)."""
        if self.limit_bytes:
            return ["tbf", "rate", self.rate, "burst", str(self.burst_bytes),
                    "limit", str(self.limit_bytes)]  # fmt: skip
        return ["tbf", "rate", self.rate, "burst", str(self.burst_bytes), "latency", self.latency]


def parse_tbf(spec: str) -> TbfSpec:
    """Parse ``RATE[,LATENCY]`` such as ``100mbit,50ms`` (latency defaults to 50ms)."""
    rate_s, _, lat_s = spec.strip().partition(",")
    m = _RATE_RE.match(rate_s.strip())
    if not m:
        raise BadInput(
            f"--tbf {spec!r}: rate must look like 100mbit, 10mbit, 1gbit or 500kbit (then ,LATENCY)"
        )
    unit = (m.group(2) or "bit").lower()
    bps = float(m.group(1)) * _RATE_UNITS[unit]
    if bps < 8000:
        raise BadInput(f"--tbf {spec!r}: rate must be at least 8kbit")
    lat_s = lat_s.strip() or "50ms"
    lm = _TIME_RE.match(lat_s)
    if not lm:
        raise BadInput(f"--tbf {spec!r}: latency must look like 50ms or 1s")
    lunit = (lm.group(2) or "ms").lower()
    # burst: at least 10 ms at the rate (and 2 full frames), so TBF can reach its rate at HZ=100
    burst = max(3200, int(bps / 8 / 100))
    lat_s = float(lm.group(1)) * _TIME_UNITS[lunit]
    return TbfSpec(
        rate=f"{m.group(1)}{unit}",
        rate_bps=bps,
        latency=f"{lm.group(1)}{lunit}",
        burst_bytes=burst,
        limit_bytes=max(3200, int(bps / 8 * lat_s)),
    )


@dataclass(frozen=True)
class LabConfig:
    """The lab's parameters (defaults: NAT topology, generous UDP timeouts, RPS on CPU 0)."""

    prefix: str = DEFAULT_PREFIX
    topology: str = "nat"
    conntrack_max: int | None = None  # global nf_conntrack_max (restored on down)
    conntrack_buckets: int | None = None  # global nf_conntrack hashsize (restored on down)
    ct_limit: int | None = None  # per-DUT cap: nftables "ct count over N drop"
    udp_timeout: int = DEFAULT_UDP_TIMEOUT  # DUT's nf_conntrack_udp_timeout (s)
    udp_stream_timeout: int = DEFAULT_UDP_STREAM_TIMEOUT  # nf_conntrack_udp_timeout_stream (s)
    drop_percent: float = 0.0  # random drop on the DUT's forward path, 0.01 % steps
    rate_limit_pps: int | None = None  # nftables "limit rate over N/second drop"
    ct_new_rate: int | None = None  # new connections/s: "ct state new limit rate over N/second"
    tbf: str | None = None  # "RATE[,LATENCY]": TBF qdisc on d1 egress
    filter_rules: int = 0  # non-matching rules before the accepting rule
    nat_ports: str = "preserve"  # NAT_PORT_MODES: "random" rewrites every source port
    rps_cpus: str | None = field(default_factory=default_rps_cpus)  # hex mask, None: untouched
    delay: str | None = None  # "20ms": the transport hosts' delay line, each way (lab/middlebox)
    loss: float = 0.0  # % dropped at random by the delay line, each way
    transport_hosts: bool = False  # h0/h1 namespaces for transport flows (on with delay/loss)
    # native XDP_PASS on the veths facing the tester ports (d0, d1; direct: p0, p1): NAPI
    # on those ends, which tx_path xdp needs (a veth without it drops every XDP frame)
    xdp_peers: bool = False

    def __post_init__(self) -> None:
        # a delay or a loss implies the transport hosts, and they are recorded as asked for,
        # so that a later `lab set --delay none` keeps them (bridged) instead of removing them
        delay = str(self.delay or "").strip().lower()
        if delay not in ("", "none", "0", "0ms", "0s") or (self.loss or 0) > 0:
            object.__setattr__(self, "transport_hosts", True)

    def validated(self) -> LabConfig:
        """Return self if every field is valid, else raise :class:`BadInput`."""
        validate(self)
        return self

    def replace(self, **changes) -> LabConfig:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise BadInput(f"unknown lab setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LabConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _positive_int(name: str, v, *, allow_none: bool = True, minimum: int = 1) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise BadInput(f"{name} must be an integer >= {minimum}, got {v!r}")


def validate(cfg: LabConfig) -> None:
    if not isinstance(cfg.prefix, str) or not valid_prefix(cfg.prefix):
        raise BadInput(
            f"prefix {cfg.prefix!r}: use 1-20 letters, digits, '_' or '.', starting with a"
            " letter or digit"
        )
    if cfg.topology not in TOPOLOGIES:
        raise BadInput(f"topology must be one of {', '.join(TOPOLOGIES)}, got {cfg.topology!r}")
    _positive_int("conntrack_max", cfg.conntrack_max)
    _positive_int("conntrack_buckets", cfg.conntrack_buckets)
    _positive_int("ct_limit", cfg.ct_limit)
    _positive_int("udp_timeout", cfg.udp_timeout, allow_none=False)
    _positive_int("udp_stream_timeout", cfg.udp_stream_timeout, allow_none=False)
    _positive_int("rate_limit_pps", cfg.rate_limit_pps)
    _positive_int("ct_new_rate", cfg.ct_new_rate)
    _positive_int("filter_rules", cfg.filter_rules, allow_none=False, minimum=0)
    if cfg.filter_rules > MAX_FILTER_RULES:
        raise BadInput(f"filter_rules must be at most {MAX_FILTER_RULES}, got {cfg.filter_rules}")
    p = cfg.drop_percent
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 100:
        raise BadInput(f"drop_percent must be between 0 and 100, got {p!r}")
    if abs(p * 100 - round(p * 100)) > 1e-6:
        raise BadInput(f"drop_percent is applied in steps of 0.01 %, got {p!r}")
    if cfg.nat_ports not in NAT_PORT_MODES:
        raise BadInput(
            f"nat_ports must be one of {', '.join(NAT_PORT_MODES)}, got {cfg.nat_ports!r}"
        )
    if cfg.tbf is not None:
        parse_tbf(cfg.tbf)
    from tgen_tui.lab import middlebox

    middlebox.validate(cfg.delay, cfg.loss)
    if cfg.rps_cpus is not None and not _MASK_RE.match(cfg.rps_cpus):
        raise BadInput(f"rps_cpus must be a hex CPU mask such as 1, 3 or ff, got {cfg.rps_cpus!r}")
    if cfg.topology == "direct":
        defaults = LabConfig(prefix=cfg.prefix, topology="direct", rps_cpus=cfg.rps_cpus)
        extra = [f for f in DUT_FIELDS if getattr(cfg, f) != getattr(defaults, f)]
        if extra:
            raise BadInput(
                "the direct topology has no DUT, so these options do not apply: " + ", ".join(extra)
            )
