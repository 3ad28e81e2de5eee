"""The lab DUT's conntrack table, by namespace name: count, flush, forget.

The reading and flushing are :mod:`tgen_tui.dut.conntrack`'s over a namespace channel (a
cached fd and one ``pread`` per count, ~3 us: the measurements are there); this module only
keeps the lab's by-name API.
"""

from __future__ import annotations

from tgen_tui.dut import conntrack as dut_ct
from tgen_tui.dut.channel import DutChannel, forget_netns


def conntrack_count(dut_netns: str) -> int:
    """Current number of conntrack entries in ``dut_netns`` (about 3 us per call)."""
    return dut_ct.count(DutChannel(netns=dut_netns))


def forget(dut_netns: str) -> None:
    """Close the cached descriptors of ``dut_netns`` (called by ``down``)."""
    forget_netns(dut_netns)


def flush(dut_netns: str) -> None:
    """Delete every conntrack entry of ``dut_netns`` (``conntrack -F`` there)."""
    dut_ct.flush(DutChannel(netns=dut_netns))
