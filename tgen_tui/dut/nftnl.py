"""The packet counters of nftables drop/reject rules through nfnetlink, without a process:
what ``nft -j list chain`` gives :func:`tgen_tui.dut.counters.parse_nft`, from one
``NFT_MSG_GETRULE`` dump on a socket opened in the namespace once.

A rule counts when it has a ``counter`` expression and its verdict is drop (an
``immediate`` to the verdict register with ``NF_DROP``) or it has a ``reject``
expression. Names are ``nft``'s: ``nft FAMILY TABLE CHAIN handle N drop ["comment"]``, so
the netns reader (this) and the ssh reader (``nft -j``) name a rule alike. A dump may be
limited to one table and chain (the kernel filters it). Imports: the standard library only.
"""

from __future__ import annotations

import struct
import threading

from tgen_tui.dut.netlink import Dumper, attr, attr_list, attrs, cstr

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_NEWRULE, NFT_MSG_GETRULE = 6, 7
NFTA_RULE_TABLE, NFTA_RULE_CHAIN, NFTA_RULE_HANDLE, NFTA_RULE_EXPRESSIONS = 1, 2, 3, 4
NFTA_RULE_USERDATA = 7
NFTA_LIST_ELEM = 1
NFTA_EXPR_NAME, NFTA_EXPR_DATA = 1, 2
NFTA_COUNTER_PACKETS = 2
NFTA_IMMEDIATE_DREG, NFTA_IMMEDIATE_DATA = 1, 2
NFTA_DATA_VERDICT = 2
NFTA_VERDICT_CODE = 1
NF_DROP = 0
NFT_REG_VERDICT = 0
UDATA_RULE_COMMENT = 0
FAMILIES = {1: "inet", 2: "ip", 3: "arp", 5: "netdev", 7: "bridge", 10: "ip6"}
_NFGEN = struct.Struct("=BBH")  # family, version, res_id (big endian; 0)


def _u32be(b: bytes | None) -> int | None:
    return struct.unpack(">I", b[:4])[0] if b and len(b) >= 4 else None


def _comment(udata: bytes | None) -> str | None:
    off = 0
    while udata and off + 2 <= len(udata):
        typ, ln = udata[off], udata[off + 1]
        if typ == UDATA_RULE_COMMENT:
            return cstr(udata[off + 2 : off + 2 + ln])
        off += 2 + ln
    return None


def rule_counter(payload: bytes) -> tuple[str, int] | None:
    """(name, packets) of a counted drop/reject rule in a NEWRULE message, else None."""
    family = FAMILIES.get(payload[0], str(payload[0]))
    a = attrs(payload, _NFGEN.size)
    verdict, packets = None, None
    for typ, elem in attr_list(a.get(NFTA_RULE_EXPRESSIONS, b"")):
        if typ != NFTA_LIST_ELEM:
            continue
        e = attrs(elem)
        name, data = cstr(e.get(NFTA_EXPR_NAME)), attrs(e.get(NFTA_EXPR_DATA, b""))
        if name == "counter" and NFTA_COUNTER_PACKETS in data:
            packets = struct.unpack(">Q", data[NFTA_COUNTER_PACKETS][:8])[0]
        elif name == "reject":
            verdict = "reject"
        elif name == "immediate" and _u32be(data.get(NFTA_IMMEDIATE_DREG)) == NFT_REG_VERDICT:
            v = attrs(attrs(data.get(NFTA_IMMEDIATE_DATA, b"")).get(NFTA_DATA_VERDICT, b""))
            if _u32be(v.get(NFTA_VERDICT_CODE)) == NF_DROP:
                verdict = "drop"
    if verdict is None or packets is None:
        return None
    handle = struct.unpack(">Q", a[NFTA_RULE_HANDLE][:8])[0] if NFTA_RULE_HANDLE in a else "?"
    text = (
        f"nft {family} {cstr(a.get(NFTA_RULE_TABLE))} {cstr(a.get(NFTA_RULE_CHAIN))}"
        f" handle {handle} {verdict}"
    )
    comment = _comment(a.get(NFTA_RULE_USERDATA))
    return (text + f' "{comment}"' if comment else text), packets


class NftReader:
    """Counted drop/reject rules of ``netns`` (None: this namespace)."""

    def __init__(self, netns: str | None) -> None:
        self.nl = Dumper(NETLINK_NETFILTER, netns)
        self._lock = threading.Lock()

    def read(self, chains: list[tuple[str, str, str]] | None = None) -> dict[str, int]:
        """``{rule name: packets}`` of every chain (``chains`` None) or of those
        ``(family, table, chain)``; chains that no longer exist give nothing."""
        with self._lock:
            try:
                return self._read(chains)
            except OSError:
                self.nl.close()
                return self._read(chains)

    def _read(self, chains: list[tuple[str, str, str]] | None) -> dict[str, int]:
        fam = {v: k for k, v in FAMILIES.items()}
        reqs = [(0, b"")] if chains is None else []
        for f, t, c in chains or []:
            body = attr(NFTA_RULE_TABLE, t.encode() + b"\0") + attr(
                NFTA_RULE_CHAIN, c.encode() + b"\0"
            )
            reqs.append((fam.get(f, 0), body))
        out: dict[str, int] = {}
        for family, body in reqs:
            try:
                msgs = self.nl.dump(
                    (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE, _NFGEN.pack(family, 0, 0) + body
                )
            except FileNotFoundError:  # ENOENT: that table or chain is gone
                continue
            for typ, p in msgs:
                if typ & 0xFF == NFT_MSG_NEWRULE and len(p) >= _NFGEN.size:
                    got = rule_counter(p)
                    if got is not None:
                        out[got[0]] = got[1]
        return out

    def close(self) -> None:
        with self._lock:
            self.nl.close()
