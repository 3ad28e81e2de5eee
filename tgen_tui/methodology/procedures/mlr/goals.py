"""Search goals of RFC 9971 (METHODOLOGY.md "Multiple loss ratio search"), their presets,
``--goal`` parsing and ``--quick``.

A goal: goal loss ratio, exceed ratio, final trial duration, duration sum, and the optional
width (relative to the relevant upper bound, as MLRsearch and CSIT use it) and initial
trial duration. Presets reproduce the equivalent goals METHODOLOGY.md lists.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tgen_tui.diagnostics import BadInput
from tgen_tui.profiles.units import parse_duration


@dataclass(frozen=True)
class Goal:
    name: str  # ndr, pdr, throughput, ... (the report's and the metrics' key)
    loss_ratio: float  # goal loss ratio: 0.005 for 0.5 %
    exceed_ratio: float = 0.5
    final_trial_duration_s: float = 1.0
    duration_sum_s: float = 21.0
    width: float = 0.005  # relative to the relevant upper bound
    initial_trial_duration_s: float = 1.0

    def check(self) -> Goal:
        """Raise BadInput naming the goal when a value is out of range (as RFC 9971)."""
        bad = None
        if not 0 <= self.loss_ratio < 1:
            bad = "loss ratio must be in [0, 1)"
        elif not 0 <= self.exceed_ratio < 1:
            bad = "exceed ratio must be in [0, 1)"
        elif not 0 < self.width < 1:
            bad = "width must be in (0, 100) %"
        elif not 0 < self.initial_trial_duration_s <= self.final_trial_duration_s:
            bad = "initial trial duration must be > 0 and <= the final trial duration"
        elif self.duration_sum_s < self.final_trial_duration_s:
            bad = "duration sum must be >= the final trial duration"
        if bad:
            raise BadInput(f"--goal {self.name}: {bad}")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"loss_pct": 100 * self.loss_ratio}


def _g(name, loss, exceed, final, dsum, width=0.005, initial=None) -> Goal:
    return Goal(name, loss, exceed, final, dsum, width, initial if initial else final)


#: preset -> (goals, where the definition comes from)
PRESETS: dict[str, tuple[tuple[Goal, ...], str]] = {
    "rfc2544": (
        (_g("throughput", 0.0, 0.0, 60.0, 60.0),),
        "RFC 2544 throughput: one 60 s trial, no loss, no exceed (RFC 9971 equivalent goal)",
    ),
    "tst009": (
        (_g("throughput", 0.0, 0.5, 60.0, 120.0),),
        "ETSI GS NFV-TST 009 max(r)=2: 60 s trials, 120 s sum, 0 % loss, exceed 50 %",
    ),
    "csit": (
        (_g("ndr", 0.0, 0.5, 1.0, 21.0), _g("pdr", 0.005, 0.5, 1.0, 21.0)),
        "FD.io CSIT: NDR 0 % and PDR 0.5 %, 1 s trials, 21 s sum, exceed 50 %",
    ),
    "nfvbench": (
        (_g("ndr", 0.00001, 0.0, 60.0, 60.0), _g("pdr", 0.001, 0.0, 60.0, 60.0)),
        "NFVbench: NDR 0.001 % and PDR 0.1 %, one 60 s trial each (NFVbench's default "
        "duration), no exceed",
    ),
}


def parse_ratio(text: str, what: str) -> float:
    """``0.005`` or ``0.5%`` (for option ``what``) as a ratio."""
    t = text.strip()
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise BadInput(f"{what}: {text!r} is not a ratio (0.005) or a percentage (0.5%)") from None


def _seconds(text: str, what: str) -> float:
    try:
        return float(parse_duration(text))
    except ValueError as e:
        raise BadInput(f"{what}: {e}") from None


GOAL_KEYS = {
    "exceed": "exceed_ratio",
    "trial": "final_trial_duration_s",
    "sum": "duration_sum_s",
    "width": "width",
    "initial": "initial_trial_duration_s",
}


def parse_goal(text: str, base: Goal | None = None) -> Goal:
    """``NAME=LOSS[,exceed=R][,trial=D][,sum=D][,width=R][,initial=D]``, e.g. ``ndr=0``,
    ``pdr=0.5%``, ``pdr=0.5%,exceed=0,trial=10s,sum=10s``; unset values: CSIT's."""
    what = f"--goal {text!r}"
    head, *rest = [p.strip() for p in text.split(",")]
    name, sep, loss = head.partition("=")
    if not sep or not name.strip():
        raise BadInput(f"{what}: give NAME=LOSS, e.g. ndr=0 or pdr=0.5%")
    g = base or Goal(name.strip(), 0.0)
    kw: dict = {"name": name.strip(), "loss_ratio": parse_ratio(loss, what)}
    for item in rest:
        k, sep, v = item.partition("=")
        field = GOAL_KEYS.get(k.strip())
        if not sep or field is None:
            raise BadInput(f"{what}: unknown setting {item!r} (known: {', '.join(GOAL_KEYS)})")
        conv = _seconds if field.endswith("_s") else parse_ratio
        kw[field] = conv(v, f"{what}: {k.strip()}")
        if field.endswith("_s") and kw[field] <= 0:
            raise BadInput(f"{what}: {k.strip()}={v.strip()}: a duration must be > 0")
    if "final_trial_duration_s" in kw and "initial_trial_duration_s" not in kw:
        kw["initial_trial_duration_s"] = min(
            g.initial_trial_duration_s, kw["final_trial_duration_s"]
        )
    return dataclasses.replace(g, **kw).check()


def goals_for(preset: str | None, specs: list[str], width: float | None) -> list[Goal]:
    """The preset's goals (default: csit when no --goal is given), then each --goal
    (replacing a preset goal of the same name); --width applies to every goal."""
    if preset is not None and preset not in PRESETS:
        raise BadInput(f"--preset: {preset!r}; known: {', '.join(PRESETS)}")
    base = list(PRESETS[preset or "csit"][0]) if (preset or not specs) else []
    by_name = {g.name: g for g in base}
    given: set[str] = set()
    for s in specs:
        g = parse_goal(s)
        if g.name in given:
            raise BadInput(f"--goal {g.name}: given twice (one --goal per name)")
        given.add(g.name)
        by_name[g.name] = g
    goals = list(by_name.values())
    if width is not None:
        if not 0 < width < 1:
            raise BadInput(f"--width: {width:g}: give a ratio in (0, 1), e.g. 0.005 or 0.5%")
        goals = [dataclasses.replace(g, width=width).check() for g in goals]
    return goals


QUICK_TRIAL_S = 1.0
QUICK_SUM_TRIALS = 3


def quick(goals: list[Goal]) -> tuple[list[Goal], str]:
    """--quick: trials of at most 1 s and a duration sum of at most 3 of them (kept in
    proportion: a sum equal to one trial stays one trial); returns the goals and the
    deviation text for the report."""
    out = []
    for g in goals:
        final = min(g.final_trial_duration_s, QUICK_TRIAL_S)
        ratio = max(1.0, min(QUICK_SUM_TRIALS, g.duration_sum_s / g.final_trial_duration_s))
        out.append(
            dataclasses.replace(
                g,
                final_trial_duration_s=final,
                initial_trial_duration_s=min(g.initial_trial_duration_s, final),
                duration_sum_s=final * ratio,
            )
        )
    text = "--quick: " + "; ".join(
        f"{g.name}: {g.final_trial_duration_s:g} s trials, {g.duration_sum_s:g} s sum "
        f"(defined: {o.final_trial_duration_s:g} s, {o.duration_sum_s:g} s)"
        for g, o in zip(out, goals, strict=True)
    )
    return out, text + " (not the goals' lengths)"
