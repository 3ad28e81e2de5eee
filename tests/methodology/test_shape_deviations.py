"""A methodology report names the streams that are not sent at a constant rate (a rate
shape, drawn gaps, bursts): RFC 2544 and RFC 9971 trials assume a constant rate."""

from __future__ import annotations

from pathlib import Path

from tgen_tui.methodology.kit.setup import shape_deviations
from tgen_tui.profiles.loader import load_profile

ROOT = Path(__file__).resolve().parents[2]


def test_each_shaped_stream_is_a_deviation_line():
    prof = load_profile(ROOT / "profiles" / "shapes.yaml")
    lines = shape_deviations(prof, trial_s=30.0)
    assert lines == [
        "stream steps: rate over time (10k pps 3s, 50k pps 3s, 20k pps 3s (once, 240,000 "
        "frames)), scaled by each trial's load; it ends after 9 s of a 30 s trial",
        "stream bursty: bursts of 1,000 frames at line rate (14,880,952 fps) every 50 ms: "
        "mean 20,000 fps, until stopped",
        "stream gamma: gamma inter-departure times, not a constant rate",
    ]
    assert shape_deviations(load_profile(ROOT / "profiles" / "lab.yaml"), 30.0) == []


def test_a_trial_counts_the_frames_the_shape_makes_due():
    """A trial of a shaped stream sends the shape's integral over the trial at the trial's
    load (not rate × duration, which the shape never asks for: the trial would be invalid)."""
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.session.batch import scaled_programs

    prog = next(p for p in compile_profile(load_profile(ROOT / "profiles/shapes.yaml")).streams
                if p.name == "steps")  # fmt: skip
    # at a load of 100k (peak 50k -> 100k): 2 s of the first step, 20 % of the peak
    (scaled,) = scaled_programs({"up": [prog]}, 100_000.0, 2.0)
    assert scaled.schedule.count == 40_000
    (scaled,) = scaled_programs({"up": [prog]}, 100_000.0, 4.0)  # 3 s at 20k, 1 s at 100k
    assert scaled.schedule.count == 160_000
