"""Profile text for the methodology lab tests (lab MACs and addresses)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tgen_tui.lab.naming import D0_MAC, P0_MAC


def forward_profile(prefix: str, *, ports: str = "{min: 10000, max: 10063, mode: inc}") -> str:
    return f"""
name: mtest
seed: 11
ports:
  p0: {{interface: p0, netns: {prefix}-tester}}
  p1: {{interface: p1, netns: {prefix}-tester}}
dut: {{netns: {prefix}-dut}}
streams:
  - name: up
    port: p0
    rx_port: p1
    eth: {{src: "{P0_MAC}", dst: "{D0_MAC}"}}
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp:
      src_port: {ports}
      dst_port: 7
    size: 64
    rate: {{pps: 1000}}
"""


def unique_profile(prefix: str) -> str:
    return forward_profile(prefix, ports="{min: 20000, max: 20099, mode: unique}").replace(
        "dst_port: 7", "dst_port: {min: 100, max: 149, mode: unique}"
    )


def cps_until_phase2(tgen: Callable, prof: Path, out: Path, *args: str) -> tuple:
    """``tgen rfc9693 cps`` with one search whose final trial runs phase 2; a phase 1
    that lost a frame on a loaded machine (no phase 2 then) is run once more. Returns
    (the finished process, the JSON report, its search, the search's final trial)."""
    for _ in range(2):
        cp = tgen(
            "rfc9693", "cps", str(prof), "--max-rate", "3000", "--error", "1000",
            "--repeats", "1", "--json", str(out), *args,
        )  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(out.read_text())
        (s,) = doc["searches"]
        final = s["trials"][-1]
        if "phase2" in final["extra"]:
            break
    return cp, doc, s, final
