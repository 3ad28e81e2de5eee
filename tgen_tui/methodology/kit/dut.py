"""The DUT as a methodology run sees it. :class:`DutControl` (reset between trials,
conntrack count, settings) lives in :mod:`tgen_tui.dut.control`; this module adds the
methodology's own check of the DUT's settings against a test's length."""

from __future__ import annotations

from tgen_tui.dut.conntrack import SYSCTLS
from tgen_tui.dut.control import DutControl

__all__ = ["SYSCTLS", "DutControl", "timeout_warnings"]


def timeout_warnings(settings: dict, test_seconds: float) -> list[str]:
    """Warn when a conntrack timeout is shorter than the test (entries would expire)."""
    out = []
    for k in ("udp_timeout_s", "udp_stream_timeout_s"):
        v = settings.get(k)
        if v is not None and v < test_seconds:
            out.append(
                f"DUT {k} is {v} s, shorter than this test's {test_seconds:.0f} s: entries can "
                "expire during a trial (raise it: tgen lab up --udp-timeout N)"
            )
    return out
