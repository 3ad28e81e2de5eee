"""Loss attribution on synthetic counter deltas (dut/attribution.py): no I/O."""

from __future__ import annotations

from tgen_tui.dut.attribution import LossCause, StreamPath, attribute, on_path, split, why_line

NFT = ("nft_rule_drop", "nft ip tgen_lab fwd_drop handle 4 drop", "dut")
TBF = ("qdisc_drop", "qdisc tbf 8043: drops", "d1")
CT = ("conntrack_drop", "nf_conntrack drop", "dut")
NOPORT = ("delivered_to_dut_no_port", "UdpNoPorts", "dut")
ARP = ("neighbour_unresolved", "arp_cache unresolved_discards", "host")
RING = ("tester_ring_drop", "rx ring tp_drops", "tester p1")
OVER = ("qdisc_overlimit", "qdisc tbf 8043: overlimits", "d1")

UP = StreamPath("up", dut_in="d0", dut_out="d1", rx_port="p1", to_dut=False)
DOWN = StreamPath("down", dut_in="d1", dut_out="d0", rx_port="p0", to_dut=True)
PATHS = {"up": UP, "down": DOWN}


def _frames(att, stream):
    return {(c.cause, c.counter, c.where): c.frames for c in att.causes[stream]}


def test_one_counter_explains_one_stream_exactly() -> None:
    att = attribute({"up": 29815, "down": 0}, {ARP: 29815}, PATHS)
    assert att.causes["up"] == (LossCause(*ARP, 29815),)
    assert att.causes["down"] == () and att.unexplained == {"up": 0, "down": 0}
    assert att.excess[ARP] == 0 and att.matched[ARP] == 29815


def test_shared_counter_is_split_by_remaining_loss_and_adds_up() -> None:
    # the nft rule drops 1 % of both directions: split in proportion to each one's loss
    att = attribute({"up": 607, "down": 508}, {NFT: 1115}, PATHS)
    assert _frames(att, "up") == {NFT: 607} and _frames(att, "down") == {NFT: 508}
    assert sum(att.unexplained.values()) == 0
    # an uneven split: largest remainder, the frames add up to the counter exactly
    assert split(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    assert sum(split(1001, {"x": 333, "y": 667}).values()) == 1001


def test_a_counter_on_one_path_goes_first_then_the_shared_one() -> None:
    # two causes at once: tbf on d1 (up only) and the nft rule (both directions)
    att = attribute({"up": 300 + 1200, "down": 250}, {NFT: 550, TBF: 1200}, PATHS)
    assert _frames(att, "up") == {TBF: 1200, NFT: 300}
    assert _frames(att, "down") == {NFT: 250}
    assert att.unexplained == {"up": 0, "down": 0}


def test_local_delivery_counts_only_for_streams_addressed_to_the_dut() -> None:
    # conntrack full: both directions lose to ct drop; replies without a mapping reach the
    # DUT itself (UdpNoPorts), which is on "down"'s path only
    att = attribute({"up": 100, "down": 150}, {CT: 150, NOPORT: 100}, PATHS)
    assert _frames(att, "up") == {CT: 100}
    assert _frames(att, "down") == {NOPORT: 100, CT: 50}
    assert not on_path(NOPORT, UP) and on_path(NOPORT, DOWN)


def test_counters_beyond_the_loss_are_excess_and_loss_beyond_counters_unexplained() -> None:
    att = attribute({"up": 100, "down": 0}, {NFT: 130}, PATHS)
    assert _frames(att, "up") == {NFT: 100}
    assert att.excess[NFT] == 30 and att.matched[NFT] == 100
    att = attribute({"up": 100, "down": 40}, {TBF: 60}, PATHS)
    assert _frames(att, "up") == {TBF: 60}
    assert att.unexplained == {"up": 40, "down": 40}
    assert att.excess[TBF] == 0


def test_paths_interface_and_tester_counters() -> None:
    assert on_path(TBF, UP) and not on_path(TBF, DOWN)  # egress d1
    rx_d1 = ("dut_rx_drop", "rx_dropped", "d1")
    assert on_path(rx_d1, DOWN) and not on_path(rx_d1, UP)  # ingress d1
    assert on_path(RING, UP) and not on_path(RING, DOWN)  # received on p1
    unknown = StreamPath("x")  # no mapping (ssh): an interface counter counts for all
    assert on_path(TBF, unknown) and on_path(rx_d1, unknown)
    direct = StreamPath("y", rx_port="p1", through_dut=False)
    assert not on_path(NFT, direct) and on_path(RING, direct)


def test_shown_only_counters_never_explain_loss() -> None:
    att = attribute({"up": 50, "down": 0}, {OVER: 9999}, PATHS)
    assert att.causes["up"] == () and att.unexplained["up"] == 50
    assert OVER not in att.matched


def test_negative_or_zero_deltas_are_ignored() -> None:
    att = attribute({"up": 10, "down": 0}, {NFT: 0, TBF: -5}, PATHS)
    assert att.causes == {"up": (), "down": ()} and att.unexplained["up"] == 10


def test_why_line() -> None:
    line = why_line(29815, (LossCause(*ARP[:2], "d1", 29815),), 0)
    assert line == (
        "lost 29,815: 29,815 neighbour unresolved on d1 (arp_cache unresolved_discards); "
        "unexplained 0"
    )
    assert why_line(0, (), 0) == "no loss"
    assert why_line(5, (), 5) == "lost 5: no counter moved; unexplained 5"


def test_the_tester_hosts_backlog_is_on_every_path() -> None:
    host = ("backlog_drop", "softnet_stat dropped", "tester host")
    direct = StreamPath("y", rx_port="p1", through_dut=False)
    assert on_path(host, UP) and on_path(host, DOWN) and on_path(host, direct)
    att = attribute({"up": 30, "down": 10}, {host: 40}, PATHS)
    assert _frames(att, "up") == {host: 30} and _frames(att, "down") == {host: 10}


def test_a_counter_of_one_ip_version_goes_to_that_versions_streams_only() -> None:
    # a router without ARP and ND for the receiver: v4 and v6 lose to their own tables
    # (the two split equally before, each stream then named both tables)
    nd = ("neighbour_unresolved", "ndisc_cache unresolved_discards", "host")
    v4 = StreamPath("v4", dut_in="d0", dut_out="d1", rx_port="p1", family=4)
    v6 = StreamPath("v6", dut_in="d0", dut_out="d1", rx_port="p1", family=6)
    att = attribute({"v4": 9800, "v6": 9700}, {ARP: 9800, nd: 9700}, {"v4": v4, "v6": v6})
    assert _frames(att, "v4") == {ARP: 9800} and _frames(att, "v6") == {nd: 9700}
    assert not on_path(NOPORT, StreamPath("x", to_dut=True, family=6))
    assert on_path(("delivered_to_dut_no_port", "Udp6NoPorts", "dut"), StreamPath("x", family=6))
    assert on_path(ARP, StreamPath("unknown"))  # family unknown: on every path, as before
