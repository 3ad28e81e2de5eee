"""What a point changes: the profile (a copy, written per point), the run's options,
the lab DUT's settings, a real DUT's commands."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tgen_tui.campaign.points import Point
from tgen_tui.diagnostics import BadInput

RUN_AXES = ("rate_scale", "lanes", "pacing", "duration")


def load_plain(path: Path) -> dict:
    y = YAML(typ="safe")
    data = y.load(path.read_text())
    if not isinstance(data, dict):
        raise BadInput(f"{path}: not a profile (a mapping with ports: and streams:)")
    return data


def _set_path(doc: Any, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = doc
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            try:
                k: Any = int(p)
                cur[k]
            except (ValueError, IndexError):
                raise BadInput(
                    f"axis profile.{dotted}: no item {p!r} in a list of {len(cur)}"
                ) from None
        elif isinstance(cur, dict):
            k = p
            if not last and k not in cur:
                cur[k] = {}
        else:
            raise BadInput(f"axis profile.{dotted}: {'.'.join(parts[:i])} is not a mapping or list")
        if last:
            cur[k] = value
        else:
            cur = cur[k]


def point_profile(base: dict, point: Point) -> dict:
    """The profile of ``point``: frame_size, rate and profile.PATH applied to a copy."""
    doc = copy.deepcopy(base)
    for name, v in point.axes:
        if name == "frame_size":
            for s in doc.get("streams") or []:
                s["size"] = v
        elif name == "rate":
            for s in doc.get("streams") or []:
                s["rate"] = {"pps": v} if isinstance(v, int | float) else v
        elif name.startswith("profile."):
            _set_path(doc, name[len("profile.") :], v)
    return doc


def dump_text(doc: dict) -> str:
    """The point's profile as text: JSON, which is YAML too, and leaves no scalar to a
    resolver's guess (a MAC such as 02:74:67:00:00:01 stays a string)."""
    return json.dumps(doc, indent=1, default=str) + "\n"


def write_profile(doc: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_text(doc))
    return path


def run_axes(point: Point) -> dict[str, Any]:
    return {k: v for k, v in point.axes if k in RUN_AXES}


def lab_changes(point: Point) -> dict[str, Any]:
    return {k[4:]: v for k, v in point.axes if k.startswith("lab.")}


def dut_commands(point: Point, commands: dict[str, str]) -> list[str]:
    return [
        commands[k[4:]].replace("{value}", str(v)) for k, v in point.axes if k.startswith("dut.")
    ]


__all__ = [
    "dut_commands",
    "lab_changes",
    "load_plain",
    "point_profile",
    "run_axes",
    "write_profile",
]
