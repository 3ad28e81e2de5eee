"""The DUT's nftables ruleset: NAT44, optional random drop, rate limit, ct count cap, and
N non-matching filter rules (USERS.md section 3).

The whole ruleset is generated as one ``nft -f`` file, which nftables applies as one
transaction: the old table is deleted and the new one created atomically, so ``tgen lab
set`` never leaves the DUT half-configured, and 10,000 filter rules load in well under a
second.

Layout (table ``ip tgen_lab`` in the DUT namespace)::

    chain fwd_drop   (filter, hook forward, priority -10)    the impairments, each with a counter
        numgen random mod 10000 < P*100 counter drop         --drop-percent P (exact to 0.01 %)
        limit rate over R/second burst B packets counter drop --rate-limit R
        ct state new ct count over N counter drop            --ct-limit N
        ct state new limit rate over R/second burst B packets counter drop   --ct-new-rate R
    chain fwd_filter (filter, hook forward, priority 0)      --filter-rules N
        ip saddr 198.18.128.x ip daddr 198.19.255.254 udp dport Y drop   (x N, never match)
        accept                                                the one matching rule, last
    chain nat_post   (nat, hook postrouting, priority 100)
        oifname "d1" snat to 198.19.0.1 [fully-random]       stateful NAT44 (conntrack);
                                                             --nat-ports random: every
                                                             new flow gets a random port
        ip saddr 198.18.104.0/22 oifname "e1" snat to 198.19.100.1 [fully-random]
                                                             the app flows' clients on h0
                                                             (lab/hosts.py CLIENT_NET)
"""

from __future__ import annotations

from tgen_tui.dut import nft as dut_nft
from tgen_tui.dut.channel import DutChannel
from tgen_tui.lab import commands
from tgen_tui.lab.hosts import CLIENT_NET, E1, E1_IP
from tgen_tui.lab.naming import D1, D1_IP, NFT_TABLE

#: Destination of the filter rules: inside 198.18.0.0/15 but never used by lab traffic.
FILTER_RULE_DADDR = "198.19.255.254"


def drop_threshold(drop_percent: float) -> int:
    """``numgen random mod 10000 < threshold``: the percentage in hundredths (0.01 % steps)."""
    return int(round(drop_percent * 100))


def rate_burst(pps: int) -> int:
    """Burst of the rate limiter: 20 ms worth of packets, at least 5 (nft's default)."""
    return max(5, pps // 50)


def filter_rule(i: int) -> str:
    """The i-th non-matching rule: a distinct source, an unused destination and a port."""
    j = i % 32768
    saddr = f"198.18.{128 + (j >> 8)}.{j & 255}"
    return f"ip saddr {saddr} ip daddr {FILTER_RULE_DADDR} udp dport {1024 + i % 64000} drop"


def ruleset(
    *,
    drop_percent: float = 0.0,
    rate_limit_pps: int | None = None,
    ct_limit: int | None = None,
    ct_new_rate: int | None = None,
    filter_rules: int = 0,
    nat_ports: str = "preserve",
) -> str:
    """The complete ``nft -f`` text that replaces the lab's table atomically: the DUT
    configuration generator's NAT44 (``tgen dut config``), with the lab's names."""
    from tgen_tui.dut.config import nft_nat44

    random = " fully-random" if nat_ports == "random" else ""
    return nft_nat44(
        extra_nat=[f'ip saddr {CLIENT_NET} oifname "{E1}" snat to {E1_IP}{random}'],
        table=NFT_TABLE,
        outside_if=D1,
        public_ip=D1_IP,
        fully_random=nat_ports == "random",
        drop_percent=drop_percent,
        rate_limit_pps=rate_limit_pps,
        ct_limit=ct_limit,
        ct_new_rate=ct_new_rate,
        filter_rules=[filter_rule(i) for i in range(filter_rules)],
    )


def apply(netns: str, text: str) -> None:
    """Load a ruleset into ``netns`` in one transaction."""
    commands.run(["nft", "-f", "-"], input=text, netns=netns)


def table_exists(netns: str) -> bool:
    cp = commands.run(["nft", "list", "tables", "ip"], netns=netns, check=False)
    return cp.returncode == 0 and f"table ip {NFT_TABLE}" in cp.stdout.splitlines()


def remove(netns: str) -> None:
    commands.run(["nft", "delete", "table", "ip", NFT_TABLE], netns=netns, check=False)


#: The chain whose rules are the impairments (each with a counter), as (family, table, chain).
DROP_CHAIN = ("ip", NFT_TABLE, "fwd_drop")


def drop_counters(netns: str) -> dict | None:
    """Packets dropped by each impairment rule so far, or ``None`` if the table is missing.

    Keys: ``random``, ``rate_limit``, ``ct_limit`` (only those configured).
    """
    return dut_nft.drop_counters(DutChannel(netns=netns), *DROP_CHAIN)
