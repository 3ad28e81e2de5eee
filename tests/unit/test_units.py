"""tgen_tui.profiles.units: the numbers an engineer writes (10G, 500ms, 1.5M) and line rates."""

from __future__ import annotations

import math

import pytest

from tgen_tui.profiles.units import (
    fmt_si,
    line_rate_fps,
    parse_bitrate,
    parse_count,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("10G", 10e9),
        ("10g", 10e9),
        ("100M", 100e6),
        ("100 Mbit/s", 100e6),
        ("1.5 Gbit/s", 1.5e9),
        ("2.5e9", 2.5e9),
        ("40000000", 40e6),
        ("1T", 1e12),
        ("64kbps", 64e3),
        ("9.6 kb/s", 9600.0),
        (" 25G ", 25e9),
        (40000000, 40e6),
        (2.5e9, 2.5e9),
    ],
)
def test_parse_bitrate(text, bps):
    assert parse_bitrate(text) == pytest.approx(bps, rel=1e-12)


@pytest.mark.parametrize("bad", ["fast", "10X", "10 GHz", "", "-1G", "1e", True, 0, -5, "0M"])
def test_parse_bitrate_rejects(bad):
    with pytest.raises(ValueError) as ei:
        parse_bitrate(bad)
    assert str(ei.value)


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("1000", 1000.0),
        ("100k", 100e3),
        ("1.5M", 1.5e6),
        ("1e6", 1e6),
        ("250 kpps", 250e3),
        ("5Mpps", 5e6),
        ("2G", 2e9),
        ("7 fps", 7.0),
        (42, 42.0),
        (0.5, 0.5),
    ],
)
def test_parse_count(text, n):
    assert parse_count(text) == pytest.approx(n, rel=1e-12)


@pytest.mark.parametrize("bad", ["many", "1.5X", "10 Mbit/s", "", True, False])
def test_parse_count_rejects(bad):
    with pytest.raises(ValueError, match=r"\S"):
        parse_count(bad)


@pytest.mark.parametrize(
    ("text", "s"),
    [
        ("500ms", 0.5),
        ("2s", 2.0),
        ("1.5", 1.5),
        (1.5, 1.5),
        (3, 3.0),
        ("2min", 120.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("10us", 10e-6),
        ("10µs", 10e-6),
        ("250ns", 250e-9),
        ("0", 0.0),
        (" 30 s ", 30.0),
    ],
)
def test_parse_duration(text, s):
    assert parse_duration(text) == pytest.approx(s, rel=1e-12)


@pytest.mark.parametrize("bad", ["soon", "10 days", "-1s", "1.5.2s", "", True, -1, -0.5])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError, match=r"\S"):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1234567, "bit/s", "1.23 Mbit/s"),
        (14880952, "fps", "14.9 Mfps"),
        (10e9, "bit/s", "10 Gbit/s"),
        (2.5e12, "B", "2.5 TB"),
        (1000, "pps", "1 kpps"),
        (999, "pps", "999 pps"),
        (999, "", "999"),
        (0, "", "0"),
        (-2500, "W", "-2.5 kW"),
    ],
)
def test_fmt_si(value, unit, text):
    assert fmt_si(value, unit) == text


def test_fmt_si_digits():
    assert fmt_si(1234567, "bit/s", digits=5) == "1.2346 Mbit/s"


def test_line_rate_fps_rfc2544_values():
    assert math.floor(line_rate_fps(10e9, 64)) == 14_880_952
    assert math.floor(line_rate_fps(10e9, 1518)) == 812_743
    assert math.floor(line_rate_fps(1e9, 64)) == 1_488_095
    assert line_rate_fps(10e9, 64) == pytest.approx(10e9 / (8 * 84))


@pytest.mark.parametrize("size", [64, 128, 256, 512, 1024, 1280, 1518])
def test_line_rate_fps_fills_the_link(size):
    """fps × (size + 20 B preamble/IFG) × 8 is exactly the line rate."""
    fps = line_rate_fps(40e9, size)
    assert fps * (size + 20) * 8 == pytest.approx(40e9, rel=1e-12)
