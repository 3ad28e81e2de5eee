"""The device under test, reached through one channel: a network namespace or a command
prefix (``ssh root@dut``).

- :mod:`~tgen_tui.dut.channel`: :class:`DutChannel` runs commands and reads files on the DUT.
- :mod:`~tgen_tui.dut.conntrack`: count, max, flush, the sysctls that size the table.
- :mod:`~tgen_tui.dut.settings`: what a result records (live reads + the builder's description file).
- :mod:`~tgen_tui.dut.probe`: the engine's per-interval reader (:class:`DutProbe`).
- :mod:`~tgen_tui.dut.control`: methodology's reset/count/settings (:class:`DutControl`).
- :mod:`~tgen_tui.dut.counters`: drop counters and per-core CPU, read every interval
  (:class:`DutCounters`; no process in a namespace: :mod:`~tgen_tui.dut.netlink`,
  :mod:`~tgen_tui.dut.qdisc`, :mod:`~tgen_tui.dut.nftnl`; one long-lived remote shell over
  a prefix: :mod:`~tgen_tui.dut.shell`).
- :mod:`~tgen_tui.dut.attribution`: lost frames matched to those counters (pure);
  :mod:`~tgen_tui.dut.paths`: which DUT interface each tester port is cabled to.

Layer: below the engine, above the worker. Imports the standard library, ``diagnostics``
and ``worker.netns`` only; the lab (above) writes the description file this package reads.
"""

from tgen_tui.dut.channel import DutChannel, DutCommandFailed, DutOutput, DutUnreachable

__all__ = ["DutChannel", "DutCommandFailed", "DutOutput", "DutUnreachable"]
