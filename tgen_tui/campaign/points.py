"""The points of a campaign: the product of its axes, each repeated, in the order asked.

A point's id is a hash of its axis values and repeat number, so it does not depend on
the order: a resumed campaign finds what is done by id, whatever order it runs in.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import dataclass
from typing import Any

from tgen_tui.profiles.campaign import Campaign


@dataclass(frozen=True)
class Point:
    """One run of the campaign: axis values and which repeat."""

    axes: tuple[tuple[str, Any], ...]
    repeat: int  # 1-based

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.axes)

    @property
    def key(self) -> str:
        """The point without its repeat (a row of the report)."""
        return json.dumps(self.axes, separators=(",", ":"))

    @property
    def id(self) -> str:
        h = hashlib.sha1(f"{self.key}#{self.repeat}".encode()).hexdigest()
        return h[:10]

    def label(self) -> str:
        ax = " ".join(f"{k}={v}" for k, v in self.axes) or "(no axes)"
        return f"{ax} #{self.repeat}"


def expand(c: Campaign, seed: int | None = None, shuffle: bool = True) -> list[Point]:
    """Every point: the axes' product as written (the last axis varies fastest), each
    point's repeats together; ``order: random`` shuffles all of them with ``seed``
    (``shuffle=False``: the written order, as the report lists them)."""
    names = list(c.axes)
    combos = itertools.product(*(c.axes[n] for n in names)) if names else [()]
    pts = [
        Point(tuple(zip(names, combo, strict=True)), r)
        for combo in combos
        for r in range(1, c.repeats + 1)
    ]
    if c.order == "random" and shuffle:
        random.Random(seed if seed is not None else c.seed).shuffle(pts)
    return pts


__all__ = ["Point", "expand"]
