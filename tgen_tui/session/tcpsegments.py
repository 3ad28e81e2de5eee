"""The TCP segments of connections opened with raw frames (``tcp.handshake`` streams and
RFC 9693's ``--proto tcp``), and the DUT's view of them: handshakes and teardowns in
batches, through a conntrack that tracks TCP strictly (``nf_conntrack_tcp_loose=0``).

Every connection of a trial goes through the same packets in lockstep, so each packet
type is one stream of N frames (one per connection), sent in its own batch:

=========  =========  =====  ===================  =====================
phase      sender     flags  seq                  ack
=========  =========  =====  ===================  =====================
syn        Initiator  S      I                    0
synack     Responder  SA     R                    I + 1 + L
ack        Initiator  A      I + 1 + L            R + 1 + L
fin        Initiator  FA     I + 1 + 2L           R + 1 + L
ack_r      Responder  A      R + 1 + L            I + 2 + 3L
fin_r      Responder  FA     R + 1 + 2L           I + 2 + 3L
last       Initiator  A      I + 2 + 3L           R + 2 + 3L
rst        Initiator  RA     I + 1 + 2L           R + 1 + L
=========  =========  =====  ===================  =====================

I and R are fixed initial sequence numbers (the same for every connection: conntrack
keeps one window per connection), and L is the payload every segment carries (the test
signature), so each segment acknowledges all the other side has sent and stays in the
window. The Responder learns the NAT's tuples from the SYNs (:mod:`tgen_tui.worker.learn`)
and its segments go to the learned tuples in arrival order, one per connection. A
connection is 3 packets to set up and 4 to close with FIN (7, as CSIT counts a TCP CPS
connection), or 1 with RST.

After the handshakes the DUT's conntrack must hold N ESTABLISHED TCP entries
(``conntrack -L -p tcp --state ESTABLISHED``); after a FIN teardown they are in
TIME_WAIT (or CLOSE), after RST in CLOSE.
"""

from __future__ import annotations

import re

from tgen_tui.diagnostics import BadInput

ISN_I = 0x10000000
ISN_R = 0x20000000
ETH_IP_TCP = 14 + 20 + 20
MIN_SIZE = ETH_IP_TCP + 12 + 4  # headers, the signature, the FCS
HANDSHAKE = ("syn", "synack", "ack")
TEARDOWN = {"fin": ("fin", "ack_r", "fin_r", "last"), "rst": ("rst",), "none": ()}
PACKETS = {"fin": 7, "rst": 4, "none": 3}
RESPONDER_PHASES = {"synack", "ack_r", "fin_r"}


def segment(phase: str, payload: int, data: int = 0) -> tuple[str, int, int]:
    """(flags, seq, ack) of ``phase`` when every segment carries ``payload`` bytes and
    each side sent ``data`` data segments (``data_i``, ``data_r``: ``tgen run``'s streams,
    each frame a retransmission of that one segment) between handshake and teardown."""
    i, r, n, d = ISN_I, ISN_R, payload, data * payload
    table = {
        "syn": ("S", i, 0),
        "synack": ("SA", r, i + 1 + n),
        "ack": ("A", i + 1 + n, r + 1 + n),
        "data_i": ("PA", i + 1 + 2 * n, r + 1 + n),
        "data_r": ("PA", r + 1 + n, i + 1 + 2 * n),
        "fin": ("FA", i + 1 + 2 * n + d, r + 1 + n + d),
        "ack_r": ("A", r + 1 + n + d, i + 2 + 3 * n + d),
        "fin_r": ("FA", r + 1 + 2 * n + d, i + 2 + 3 * n + d),
        "last": ("A", i + 2 + 3 * n + d, r + 2 + 3 * n + d),
        # conntrack closes on an RST whose seq is what the other side last acknowledged
        # (the Responder's data acknowledges the ACK, not the Initiator's data)
        "rst": ("RA", i + 1 + 2 * n, r + 1 + n + d),
    }
    f, s, a = table[phase]
    return f, s & 0xFFFFFFFF, a & 0xFFFFFFFF


_SHOWN = re.compile(r"(\d+) flow entries have been shown")


def tcp_states(channel) -> dict[str, int]:
    """TCP conntrack entries per state in the DUT (``conntrack -L -p tcp``)."""
    out = channel.run("conntrack -L -p tcp", timeout=60)
    if not out.ok:
        raise BadInput(f"conntrack -L on the DUT failed: {(out.stderr or out.stdout).strip()}")
    counts: dict[str, int] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[0] == "tcp":
            counts[parts[3]] = counts.get(parts[3], 0) + 1
    return counts


__all__ = [
    "ETH_IP_TCP",
    "HANDSHAKE",
    "ISN_I",
    "ISN_R",
    "MIN_SIZE",
    "PACKETS",
    "RESPONDER_PHASES",
    "TEARDOWN",
    "segment",
    "tcp_states",
]
