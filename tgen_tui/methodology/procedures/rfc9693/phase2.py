"""RFC 9693 phase 2: the Responder replies to the tuples it learned in phase 1.

In phase 1 the Responder's port learns: its worker reads the IPv4 addresses and UDP/TCP
ports of every Initiator frame it receives, as the NAT translated them, from its receive
ring with numpy, and keeps the distinct tuples, at most M, in order of arrival
(:mod:`tgen_tui.worker.learn`). When the port stops, the table is written to a file in
/dev/shm. In phase 2 the Responder's reply stream takes its addresses and ports from that
table (``FieldOp`` mode ``table``, :func:`tgen_tui.packets.compile.with_learned_table`):
each reply goes from the learned destination (the Responder's own address and port) to
the learned source (the NAT's public address and the port the NAT chose), choosing the
tuple fixed, increasing, decreasing or random. Nothing is assumed about how the NAT
picks ports: a NAT that rewrites them is answered on the ports it chose.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tgen_tui.diagnostics import BadInput

ORDERS = ("fixed", "increasing", "decreasing", "random")
_TABLE_ORDER = {"fixed": "fixed", "increasing": "inc", "decreasing": "dec", "random": "random"}


@dataclass(frozen=True)
class ResponderSpec:
    port: str  # tester port on the public side
    src_mac: str
    dst_mac: str  # the DUT's public-side MAC


def veth_responder(
    port: str, interface: str, netns: str | None, dut_netns: str
) -> ResponderSpec | None:
    """The Responder's MACs read from the system: its own interface's, and that of the
    interface at the other end of its veth in the DUT namespace (a lab: p1 and d1).
    None when they cannot be read (not a veth into ``dut_netns``)."""
    import json
    import subprocess

    def links(ns: str | None, *dev: str) -> list[dict]:
        cmd = ["ip", *(["-n", ns] if ns else []), "-j", "link", "show", *dev]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True)
            return json.loads(out.stdout or "[]")
        except (OSError, subprocess.SubprocessError, ValueError):
            return []

    own = links(netns, interface)
    if not own or "link_index" not in own[0]:
        return None
    peer = [x for x in links(dut_netns) if x.get("ifindex") == own[0]["link_index"]]
    if not peer or not peer[0].get("address") or not own[0].get("address"):
        return None
    return ResponderSpec(port=port, src_mac=own[0]["address"], dst_mac=peer[0]["address"])


def responder_profile(profile, spec: ResponderSpec):
    """A copy of ``profile`` whose only stream is the Responder's reply stream.

    Its addresses and ports are placeholders (the Initiator's, reversed): the compiled
    program takes them from the learned table (:func:`responder_program`).
    """
    from tgen_tui.profiles.revalidate import revalidate

    def change(d: dict) -> None:
        init = d["streams"][0]
        if not init.get("udp") or not init.get("ipv4"):
            raise BadInput("phase 2 needs an IPv4 UDP Initiator stream")
        ip = init["ipv4"]
        reply = {
            "name": "responder",
            "port": spec.port,
            "rx_port": init["port"],
            "eth": {"src": spec.src_mac, "dst": spec.dst_mac},
            "ipv4": {"src": lowest(ip["dst"]), "dst": lowest(ip["src"])},
            "udp": {"src_port": 7, "dst_port": 49184},
            "size": init.get("size", 64),
            "rate": {"pps": 1000},
        }
        d["streams"] = [reply]

    return revalidate(profile, change)


def responder_program(compiled, table_path: str, order: str):
    """``compiled`` (of :func:`responder_profile`) with its reply stream's addresses and
    ports taken from the learned table, in ``order`` (one of ORDERS)."""
    from tgen_tui.packets.compile import with_learned_table

    if order not in ORDERS:
        raise BadInput(f"--responder-order must be one of {', '.join(ORDERS)}")
    streams = [with_learned_table(s, table_path, _TABLE_ORDER[order]) for s in compiled.streams]
    return dataclasses.replace(compiled, streams=streams)


def lowest(v) -> str:
    if isinstance(v, dict):
        return str(v.get("min", v.get("fixed")))
    return str(v)
