"""The shared number formatting: every value carries its unit, None is a dash."""

from __future__ import annotations

from tgen_tui import fmt


def test_units_and_scales():
    assert fmt.ns(812) == "812 ns"
    assert fmt.ns(52_300) == "52.3 µs"
    assert fmt.ns(17.8e6) == "17.80 ms"
    assert fmt.ns(2.5e9) == "2.50 s"
    assert fmt.pps(20_000) == "20.0 kpps"
    assert fmt.pps(950) == "950 pps"
    assert fmt.bps(1.2e9) == "1.2 Gbit/s"
    assert fmt.mbps(13_440_000) == "13.44"
    assert fmt.count(1_397_434) == "1,397,434"
    assert fmt.pct(1.0056) == "1.01 %"
    assert fmt.pct(0.0012) == "0.0012 %"
    assert fmt.seconds(0.58) == "0.58 s"
    assert fmt.seconds(125) == "2 min 05 s"
    assert fmt.nbytes(79 * 2**20) == "79.0 MiB"
    assert fmt.rate_short(1_234_567) == "1.23M"


def test_none_is_a_dash():
    for f in (fmt.ns, fmt.pps, fmt.bps, fmt.mbps, fmt.count, fmt.pct, fmt.seconds, fmt.nbytes):
        assert f(None) == fmt.DASH
