"""tgen-tui: a traffic generator and live dashboard for benchmarking network devices on Linux.

This package root stays import-free on purpose: worker processes import
``tgen_tui.worker`` and ``tgen_tui.packets.batch`` and must not pull in
pydantic, scapy, trio or textual through here (DESIGN rule 2).
"""

__version__ = "0.1.0"
