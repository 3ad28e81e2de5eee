"""A campaign: one test over a matrix of points, as a YAML file validated with positions.

::

    name: rules-by-size
    procedure: run                 # run | rfc2544.throughput | search | rfc9693.cps
    profile: lab.yaml              # relative to this file
    duration: 3s                   # a run's length (run) or a trial's (the others)
    repeats: 3
    order: random                  # or as-written (the default); random uses seed
    seed: 7
    axes:
      frame_size: [64, 512]
      lab.filter_rules: [0, 1000, 5000]
    build: b1
    dut: lab-nat44

Axes (each a list of values; the points are their product, each run ``repeats`` times):

- ``frame_size`` (every stream's size, bytes), ``rate`` (every stream's rate, frames/s or
  a rate text such as ``100kpps``), ``rate_scale``, ``lanes``, ``pacing``, ``duration``;
- ``profile.PATH``: any field of the profile by its dotted path
  (``profile.streams.0.udp.src_port.max``);
- ``lab.FIELD``: a setting of the lab DUT, as ``tgen lab set`` has it (``filter_rules``,
  ``conntrack_max``, ``nat_ports``, ``tbf``, ``delay``, ``loss``, ``drop_percent``,
  ``rate_limit_pps``, ``ct_limit``, ...);
- ``dut.NAME``: for a real DUT, the command ``dut_commands.NAME`` run on it (its
  namespace or ``ssh``) before the point, with ``{value}`` replaced by the point's value.

``options`` go to the procedure (``max_rate``, ``error``, ``repeats``, ``timeout``,
``settle``, ``n`` for RFC 9693; ``drain``, ``pacing``, ``lanes`` for a run).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tgen_tui.diagnostics import BadInput, Problem
from tgen_tui.profiles.units import parse_duration

PROCEDURES = ("run", "rfc2544.throughput", "search", "rfc9693.cps")
PLAIN_AXES = ("frame_size", "rate", "rate_scale", "lanes", "pacing", "duration")
LAB_AXES = (
    "conntrack_max",
    "conntrack_buckets",
    "ct_limit",
    "udp_timeout",
    "udp_stream_timeout",
    "drop_percent",
    "rate_limit_pps",
    "tbf",
    "filter_rules",
    "nat_ports",
    "delay",
    "loss",
)
MAX_POINTS = 10_000
OPTION_KEYS = {
    "run": ("drain", "pacing", "lanes", "rate_scale", "cores"),
    "methodology": (
        "max_rate",
        "error",
        "repeats",
        "timeout",
        "settle",
        "n",
        "cores",
        "pacing",
        "quick",
    ),
}


def _axis_name(name: str) -> str:
    kind, _, rest = name.partition(".")
    if (
        name in PLAIN_AXES
        or (kind == "lab" and rest in LAB_AXES)
        or (kind in ("profile", "dut") and rest)
    ):
        return name
    raise ValueError(
        f"unknown axis {name!r}: use {', '.join(PLAIN_AXES)}, lab.FIELD "
        f"({', '.join(LAB_AXES)}), profile.PATH or dut.NAME"
    )


def _axis_values(values: list[Any]) -> list[Any]:
    if not values:
        raise ValueError("give at least one value")
    if len({json.dumps(v, sort_keys=True) for v in values}) < len(values):
        raise ValueError("a value is listed twice")
    return values


AxisName = Annotated[str, AfterValidator(_axis_name)]
AxisValues = Annotated[list[Any], AfterValidator(_axis_values)]


class Campaign(BaseModel):
    """A campaign file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    procedure: Literal["run", "rfc2544.throughput", "search", "rfc9693.cps"] = "run"
    profile: str = Field(min_length=1)
    duration: str | float = "3s"
    repeats: int = Field(default=1, ge=1, le=1000)
    order: Literal["as-written", "random"] = "as-written"
    seed: int | None = None
    axes: dict[AxisName, AxisValues] = Field(default_factory=dict)
    build: str | None = None
    dut: str | None = None  # the DUT's label in the results store
    lab: str | None = None  # the lab's prefix (default: the profile's dut.netns minus -dut)
    dut_commands: dict[str, str] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    on_failure: Literal["continue", "stop"] = "continue"

    @field_validator("duration")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        s = parse_duration(v)
        if not (0 < s <= 86400):
            raise ValueError("a duration between 0 and 24 h, e.g. 3s")
        return v

    @model_validator(mode="after")
    def _whole(self) -> Campaign:
        n = math.prod(len(v) for v in self.axes.values()) * self.repeats
        if n > MAX_POINTS:
            raise ValueError(f"{n:,} points (axes x repeats): at most {MAX_POINTS:,}")
        for name in self.axes:
            if name.startswith("dut.") and name[4:] not in self.dut_commands:
                raise ValueError(
                    f"axis {name}: add dut_commands: {{{name[4:]}: 'COMMAND {{value}}'}}"
                )
        kind = "run" if self.procedure == "run" else "methodology"
        bad = sorted(set(self.options) - set(OPTION_KEYS[kind]))
        if bad:
            raise ValueError(
                f"options {', '.join(bad)} do not apply to {self.procedure} "
                f"(it takes: {', '.join(OPTION_KEYS[kind])})"
            )
        return self

    @property
    def duration_s(self) -> float:
        return parse_duration(self.duration)

    def n_points(self) -> int:
        return math.prod(len(v) for v in self.axes.values()) * self.repeats


def campaign_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_campaign(path: str | Path) -> tuple[Campaign, str]:
    """The campaign and its text; BadInput with file:line:col for a bad one."""
    from tgen_tui.profiles.loader import parse_yaml, problems_from_validation, read_bounded

    name = str(path)
    text = read_bounded(path)
    tree = parse_yaml(text, name)
    if not isinstance(tree, dict):
        raise BadInput(
            "not a mapping",
            [Problem(name, 1, 1, "", "a campaign is a mapping with name:, profile: and axes:")],
        )
    try:
        return Campaign.model_validate(tree), text
    except ValidationError as e:
        raise BadInput(
            f"{name}: invalid campaign", problems_from_validation(e, tree, name)
        ) from None
    except (ValueError, TypeError) as e:
        raise BadInput(str(e), [Problem(name, 1, 1, "", str(e))]) from None


__all__ = ["Campaign", "campaign_hash", "load_campaign"]
