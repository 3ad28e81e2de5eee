"""nftables on the DUT, read over its channel: the counters of drop rules in one chain.

(The loss-attribution work will read every drop/reject rule's counter here too.)
"""

from __future__ import annotations

import json

from tgen_tui.dut.channel import DutChannel


def rule_kind(exprs: list) -> str | None:
    """What a drop rule matches on: ``random`` (numgen), ``rate_limit`` (limit) or
    ``ct_limit`` (ct count); None for anything else."""
    text = json.dumps(exprs)
    if '"numgen"' in text:
        return "random"
    if '"limit"' in text:
        return "rate_limit"
    if '"ct count"' in text or '"count"' in text:
        return "ct_limit"
    return None


def drop_counters(ch: DutChannel, family: str, table: str, chain: str) -> dict[str, int] | None:
    """Packets dropped so far by each rule of ``chain``, keyed by :func:`rule_kind`, or
    None when the chain is missing (or nft cannot be run). One ``nft -j`` process."""
    out = ch.run(["nft", "-j", "list", "chain", family, table, chain], timeout=10)
    if not out.ok:
        return None
    counters: dict[str, int] = {}
    try:
        items = json.loads(out.stdout).get("nftables", [])
    except ValueError:
        return None
    for item in items:
        rule = item.get("rule")
        if not rule:
            continue
        exprs = rule.get("expr", [])
        kind = rule_kind(exprs)
        if kind is not None:
            counters[kind] = next((e["counter"]["packets"] for e in exprs if "counter" in e), 0)
    return counters
