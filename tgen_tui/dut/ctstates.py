"""The DUT's conntrack entries by state (TCP: ESTABLISHED, TIME_WAIT, ...; UDP and the
rest by protocol), from one ctnetlink dump (``IPCTNL_MSG_CT_GET``, NLM_F_DUMP) on a
netlink socket opened in the DUT's namespace once (:class:`~tgen_tui.dut.netlink.Dumper`):
no process. A request/response run shows its connections set up, then held in TIME_WAIT.

A dump walks the whole table (about 20 µs an entry here: 125 ms for 6,000), so the
sampler reads it in a task of its own (a thread hop, not the sample's) at most
every :data:`EVERY_S`, and only for profiles with request/response flows. Imports: the
standard library and :mod:`tgen_tui.dut.netlink`.
"""

from __future__ import annotations

import socket
import struct
from collections import Counter

from tgen_tui.dut.netlink import Dumper, attrs

NETLINK_NETFILTER = 12
CT_GET = (1 << 8) | 1  # NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_GET
NFGEN = struct.Struct("=BBH")  # nfgenmsg: family, version, res_id
CTA_TUPLE_ORIG, CTA_PROTOINFO = 1, 4
CTA_TUPLE_PROTO, CTA_PROTO_NUM = 2, 1
CTA_PROTOINFO_TCP, CTA_PROTOINFO_TCP_STATE = 1, 1
#: enum tcp_conntrack (linux/netfilter/nf_conntrack_tcp.h), as conntrack -L names them
TCP_STATES = ("NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT",
              "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2")  # fmt: skip
PROTOS = {6: "tcp", 17: "udp", 1: "icmp"}
EVERY_S = 2.0


def entry_state(payload: bytes) -> str:
    """``ESTABLISHED`` (a TCP entry's state), else its protocol (``udp``, ``icmp``, ...)."""
    a = attrs(payload, NFGEN.size)
    proto = None
    orig = a.get(CTA_TUPLE_ORIG)
    if orig is not None:
        num = attrs(attrs(orig).get(CTA_TUPLE_PROTO, b"")).get(CTA_PROTO_NUM)
        proto = num[0] if num else None
    if proto == 6:
        tcp = attrs(a.get(CTA_PROTOINFO, b"")).get(CTA_PROTOINFO_TCP)
        st = attrs(tcp).get(CTA_PROTOINFO_TCP_STATE) if tcp else None
        if st:
            return TCP_STATES[st[0]] if st[0] < len(TCP_STATES) else f"tcp state {st[0]}"
    return PROTOS.get(proto, f"proto {proto}") if proto is not None else "unknown"


def count_states(messages: list[tuple[int, bytes]]) -> dict[str, int]:
    """Entries by state of a dump's answers, most first."""
    c = Counter(entry_state(p) for _, p in messages)
    return dict(c.most_common())


class ConntrackStates:
    """Reads the DUT's entries by state (one socket in ``netns``, kept open)."""

    def __init__(self, netns: str | None) -> None:
        self.dumper = Dumper(NETLINK_NETFILTER, netns)

    def read(self) -> dict[str, int]:
        return count_states(self.dumper.dump(CT_GET, NFGEN.pack(socket.AF_INET, 0, 0)))

    def close(self) -> None:
        self.dumper.close()


__all__ = ["EVERY_S", "TCP_STATES", "ConntrackStates", "count_states", "entry_state"]
