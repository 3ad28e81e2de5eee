"""Loss attribution: each stream direction's lost frames matched to the drop counters on
its path. Pure functions of numbers; no I/O.

Inputs: the frames each stream lost since the baseline, each counter's delta since the
same baseline (:mod:`tgen_tui.dut.counters` keys: ``(cause, counter, where)``), and each
stream's path (:class:`StreamPath`: the DUT interfaces it enters and leaves by, the tester
port it is received on).

The rule (:data:`SPLIT_RULE`, recorded with every result):

1. A counter is on a stream's path when it counts where the stream goes: an interface
   counter of the DUT on the stream's ingress (rx) or egress (tx, qdisc) interface, a
   tester counter on the stream's receiving port, and a whole-DUT or host counter
   (conntrack, nftables, SNMP, neighbour tables, softnet) on every stream through the
   DUT. A tester port's frames that never left it (``tester_tx_unsent``) are on the
   paths of the streams it sends. An interface whose streams are unknown (no mapping, e.g. over ssh) is on every
   path. Local-delivery counters (UdpNoPorts, UdpInErrors) are on the path of streams
   addressed to the DUT itself, when that is known. A counter of one IP version only
   (arp_cache, Ip*/Udp* vs ndisc_cache, Ip6*/Udp6*) is on that version's streams only.
2. Counters on fewer paths are matched first (a counter on one path is that stream's
   alone); ties go by :data:`CAUSE_ORDER`.
3. A counter on several paths is split in proportion to each stream's loss still
   unexplained when its turn comes (largest remainder, so the frames add up).
4. What a counter counts beyond the loss left to explain is its ``excess``: frames the
   DUT dropped that were not lost test frames (other traffic on the DUT, or on the host in
   the netns lab), said, never hidden. What no counter explains is ``unexplained``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tgen_tui.dut.counters import IF_COUNTERS, SNMP_COUNTERS, Key, is_loss_cause

SPLIT_RULE = (
    "counters on fewer stream paths are matched first; a counter on several paths is split "
    "in proportion to each stream's still unexplained lost frames (largest remainder); "
    "counts beyond the loss are 'excess'; an IPv4-only counter (arp_cache, Ip*, Udp*) is on "
    "IPv4 streams' paths only, an IPv6-only one (ndisc_cache, Ip6*, Udp6*) on IPv6 streams' only"
)

#: tie-break between counters on as many paths: the earlier in the data path first
CAUSE_ORDER = (
    "tester_tx_unsent",
    "tester_ring_drop",
    "tester_if_drop",
    "tester_rx_failed",
    "dut_rx_error",
    "dut_rx_drop",
    "backlog_drop",
    "ip_in_discard",
    "ip_addr_error",
    "conntrack_drop",
    "conntrack_insert_failed",
    "nft_rule_drop",
    "nft_rule_reject",
    "no_route",
    "delivered_to_dut_no_port",
    "udp_in_error",
    "ip_out_discard",
    "neighbour_unresolved",
    "qdisc_drop",
    "dut_tx_drop",
    "dut_tx_error",
)
LOCAL_DELIVERY = ("delivered_to_dut_no_port", "udp_in_error")
#: a tester port's frames that the worker sent and its interface did not transmit
TESTER_UNSENT = "tester_tx_unsent"
#: frames that reached a tester port after its worker died (the receiving port's)
TESTER_RX_FAILED = "tester_rx_failed"
EGRESS_CAUSES = ("qdisc_drop", "qdisc_overlimit")

#: words for a cause in a "why" line
CAUSE_WORDS = {
    "tester_tx_unsent": "not put on the wire by the tester (no carrier, tx drop, its pacing queue at a stop)",
    "tester_ring_drop": "tester rx ring full",
    "tester_if_drop": "tester interface drop",
    "tester_rx_failed": "not counted by the tester (its receiving worker died)",
    "dut_rx_error": "DUT rx error",
    "dut_rx_drop": "DUT rx drop",
    "backlog_drop": "backlog full",
    "ip_in_discard": "IP input discard",
    "ip_addr_error": "IP address error",
    "conntrack_drop": "conntrack table full",
    "conntrack_insert_failed": "conntrack insert failed",
    "nft_rule_drop": "nft rule drop",
    "nft_rule_reject": "nft rule reject",
    "no_route": "no route",
    "delivered_to_dut_no_port": "delivered to the DUT (no port)",
    "udp_in_error": "UDP input error",
    "ip_out_discard": "IP output discard",
    "neighbour_unresolved": "neighbour unresolved",
    "qdisc_drop": "qdisc drop",
    "dut_tx_drop": "DUT tx drop",
    "dut_tx_error": "DUT tx error",
}


@dataclass(frozen=True)
class LossCause:
    """Frames of one stream's loss that one counter explains (JSON: the four fields)."""

    cause: str
    counter: str
    where: str
    frames: int


@dataclass(frozen=True)
class CounterRow:
    """One counter in the DUT counters table: its delta since the baseline, its rate over
    the last interval, and how much of it was matched to lost test frames."""

    cause: str
    counter: str
    where: str
    frames: int
    per_s: float = 0.0
    matched: int = 0
    excess: int = 0
    loss_cause: bool = True


@dataclass(frozen=True)
class StreamPath:
    """Where a stream goes: DUT ingress and egress interfaces (None: unknown), the tester
    port it is received on, whether it crosses the DUT, whether it is addressed to the
    DUT itself (None: unknown)."""

    name: str
    dut_in: str | None = None
    dut_out: str | None = None
    rx_port: str | None = None
    through_dut: bool = True
    to_dut: bool | None = None
    family: int | None = None  # 4 or 6: the IP version (None: unknown or not IP)
    tx_port: str | None = None  # the tester port that sends it (None: unknown)


@dataclass(frozen=True)
class Attribution:
    causes: dict[str, tuple[LossCause, ...]]
    unexplained: dict[str, int]
    matched: dict[Key, int]
    excess: dict[Key, int]


def counter_family(counter: str) -> int | None:
    """The IP version a counter counts only (4: arp_cache, Ip*, Udp*; 6: ndisc_cache,
    Ip6*, Udp6*), or None (any)."""
    if counter.startswith("arp_cache"):
        return 4
    if counter.startswith("ndisc_cache"):
        return 6
    if counter in SNMP_COUNTERS:
        return 6 if counter.startswith(("Ip6", "Udp6")) else 4
    return None


def on_path(key: Key, path: StreamPath) -> bool:
    """Whether the counter ``key`` counts where ``path`` goes (rule 1; an IPv4-only or
    IPv6-only counter is on the paths of that family's streams only)."""
    cause, counter, where = key
    fam = counter_family(counter)
    if fam is not None and path.family is not None and fam != path.family:
        return False
    if where == "tester host":  # the tester host's own (softnet backlog): every stream
        return True
    if where.startswith("tester "):
        port = where.removeprefix("tester ")
        return (path.tx_port if cause == TESTER_UNSENT else path.rx_port) == port
    if not path.through_dut:
        return False
    if cause in LOCAL_DELIVERY:
        return path.to_dut is not False
    if where in ("dut", "host"):
        return True
    direction = IF_COUNTERS.get(counter, (None, "out" if cause in EGRESS_CAUSES else None))[1]
    if direction == "in":
        return path.dut_in in (None, where)
    if direction == "out":
        return path.dut_out in (None, where)
    return True


def split(total: int, weights: Mapping[str, int]) -> dict[str, int]:
    """``total`` split in proportion to ``weights`` (largest remainder; adds up exactly)."""
    wsum = sum(weights.values())
    if total <= 0 or wsum <= 0:
        return {k: 0 for k in weights}
    exact = {k: total * w / wsum for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = total - sum(out.values())
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], k))[:left]:
        out[k] += 1
    return out


def rank(key: Key) -> int:
    return CAUSE_ORDER.index(key[0]) if key[0] in CAUSE_ORDER else len(CAUSE_ORDER)


def attribute(
    lost: Mapping[str, int], deltas: Mapping[Key, int], paths: Mapping[str, StreamPath]
) -> Attribution:
    """Match each stream's ``lost`` frames to counter ``deltas`` on its path (module doc)."""
    remaining = {s: max(0, int(lost.get(s, 0))) for s in paths}
    keys = [k for k, d in deltas.items() if d > 0 and is_loss_cause(k)]
    elig = {k: [s for s in paths if on_path(k, paths[s])] for k in keys}
    keys.sort(key=lambda k: (len(elig[k]), rank(k), k))
    got: dict[str, list[LossCause]] = {s: [] for s in paths}
    matched: dict[Key, int] = {}
    excess: dict[Key, int] = {}
    for k in keys:
        d = int(deltas[k])
        weights = {s: remaining[s] for s in elig[k] if remaining[s] > 0}
        take = min(d, sum(weights.values()))
        shares = split(take, weights)
        for s, n in shares.items():
            if n > 0:
                remaining[s] -= n
                got[s].append(LossCause(k[0], k[1], k[2], n))
        matched[k] = take
        excess[k] = d - take
    causes = {
        s: tuple(sorted(v, key=lambda c: (-c.frames, c.cause, c.counter))) for s, v in got.items()
    }
    return Attribution(causes, remaining, matched, excess)


def why_line(lost: int, causes: tuple[LossCause, ...], unexplained: int) -> str:
    """``lost 29,815: 29,815 neighbour unresolved on d1 (arp_cache unresolved_discards);
    unexplained 0``."""
    if lost <= 0 and not causes:
        return "no loss"
    parts = [
        f"{c.frames:,} {CAUSE_WORDS.get(c.cause, c.cause)} on {c.where} ({c.counter})"
        for c in causes
    ]
    body = ", ".join(parts) if parts else "no counter moved"
    return f"lost {lost:,}: {body}; unexplained {unexplained:,}"
