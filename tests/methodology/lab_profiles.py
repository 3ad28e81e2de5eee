"""Profile text for the methodology lab tests (lab MACs and addresses)."""

from __future__ import annotations

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
