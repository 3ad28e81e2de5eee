"""The DUT counter parsers on captured output (dut/counters.py): no I/O."""

from __future__ import annotations

import json

from tgen_tui.dut import counters as K

CT_STAT = """entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
00000100  00000000 00000000 00000000 00000003 00000000 00000000 00000000 00000000 00000001 0000000a 00000002 00000000  00000000 00000000 00000000 00000004
00000100  00000000 00000000 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000010 00000000 00000000  00000000 00000000 00000000 00000000
"""
NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
    d1: 1000      10    2    3    0     0          0         0     2000      20    4    5    0     0       0          0
"""
SNMP = """Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes
Ip: 1 64 100 0 7 90 0 5 3 2 1 9
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 0 12 4 0 0 0 0 0 0
"""
SNMP6 = "Ip6InDiscards                   \t6\nUdp6NoPorts                     \t2\n"
SOFTNET = (
    "02749c80 0000070e 00000002 00000000 00000000\n042a2d0e 00000001 00000001 00000000 00000000\n"
)
ARP = """entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls
00000002 000003e5 000003c8 00000000   00001399 00000000 00000000   00000000         00000000         00000000         00000000       00000064            00000000
00000002 0000042d 00000448 00000001   000013f3 00000036 00000000   00000000         00000000         00000231         00000000       00000001            00000000
"""
TC = json.dumps(
    [
        {"kind": "noqueue", "handle": "0:", "dev": "d0", "drops": 0, "overlimits": 0},
        {"kind": "tbf", "handle": "8043:", "dev": "d1", "drops": 1121, "overlimits": 61802},
    ]
)
NFT = json.dumps(
    {
        "nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"chain": {"family": "ip", "table": "t", "name": "c", "handle": 1}},
            {
                "rule": {
                    "family": "ip",
                    "table": "t",
                    "chain": "c",
                    "handle": 4,
                    "expr": [
                        {"match": {}},
                        {"counter": {"packets": 77, "bytes": 0}},
                        {"drop": None},
                    ],
                }
            },
            {
                "rule": {
                    "family": "ip",
                    "table": "t",
                    "chain": "c",
                    "handle": 5,
                    "comment": "bad guys",
                    "expr": [{"counter": {"packets": 3, "bytes": 0}}, {"reject": None}],
                }
            },
            {
                "rule": {
                    "family": "ip",
                    "table": "t",
                    "chain": "d",
                    "handle": 6,
                    "expr": [{"drop": None}],
                }
            },
            {
                "rule": {
                    "family": "ip",
                    "table": "t",
                    "chain": "e",
                    "handle": 7,
                    "expr": [{"counter": {"packets": 9}}, {"accept": None}],
                }
            },
        ]
    }
)
PROC_STAT = "cpu  10 0 10 80 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0\nintr 1\n"


def test_stat_tables_sum_the_cpu_rows() -> None:
    st = K.parse_stat_table(CT_STAT)
    assert st["drop"] == 0x1A and st["insert_failed"] == 1 and st["early_drop"] == 2
    assert st["search_restart"] == 4 and st["invalid"] == 4 and st["entries"] == 0x100
    assert K.parse_stat_table(ARP)["unresolved_discards"] == 0x65
    assert K.parse_stat_table("") == {}


def test_net_dev_snmp_softnet() -> None:
    d = K.parse_net_dev(NET_DEV)["d1"]
    assert d == {"rx_errors": 2, "rx_dropped": 3, "tx_errors": 4, "tx_dropped": 5}
    s = K.parse_snmp(SNMP + SNMP6)
    assert s["IpInDiscards"] == 5 and s["IpOutNoRoutes"] == 9 and s["IpInAddrErrors"] == 7
    assert s["UdpNoPorts"] == 12 and s["UdpInErrors"] == 4
    assert s["Ip6InDiscards"] == 6 and s["Udp6NoPorts"] == 2
    assert K.parse_softnet(SOFTNET) == 0x70E + 1


def test_tc_and_nft() -> None:
    assert K.parse_tc(TC)[("d1", "tbf", "8043:")] == (1121, 61802)
    rules = K.parse_nft(NFT)
    assert rules == {
        "nft ip t c handle 4 drop": 77,
        'nft ip t c handle 5 reject "bad guys"': 3,
    }  # no counter (d) or not a drop (e): left out
    assert K.drop_chains(NFT) == [("ip", "t", "c")]


def test_counters_from_one_read_keys_and_scope() -> None:
    files = {
        K.CT_STAT: CT_STAT,
        K.NET_DEV: NET_DEV,
        K.SNMP: SNMP,
        K.SNMP6: SNMP6,
        K.SOFTNET: SOFTNET,
        K.ARP_STAT: ARP,
    }
    v, errors = K.counters_from(files, TC, NFT, host_scope="host")
    assert errors == []
    assert v[("conntrack_drop", "nf_conntrack drop", "dut")] == 0x1A
    assert v[("neighbour_unresolved", "arp_cache unresolved_discards", "host")] == 0x65
    assert v[("backlog_drop", "softnet_stat dropped", "host")] == 0x70F
    assert v[("qdisc_drop", "qdisc tbf 8043: drops", "d1")] == 1121
    assert v[("nft_rule_reject", 'nft ip t c handle 5 reject "bad guys"', "dut")] == 3
    assert v[("dut_tx_drop", "tx_dropped", "d1")] == 5
    assert not any(k[2] == "lo" for k in v) and not any("noqueue" in k[1] for k in v)
    assert not K.is_loss_cause(("qdisc_overlimit", "x", "d1"))
    assert not K.is_loss_cause(("conntrack_early_drop", "nf_conntrack early_drop", "dut"))
    assert K.is_loss_cause(("conntrack_insert_failed", "nf_conntrack insert_failed", "dut"))
    _, errors = K.counters_from({}, "not json", None, host_scope="dut")
    assert len(errors) == 1 and errors[0].startswith("tc:")


def test_cpu_shares() -> None:
    a = K.parse_proc_stat(PROC_STAT)
    b = tuple((u + 10, n, s + 20, i + 60, w, irq, si + 10, st) for u, n, s, i, w, irq, si, st in a)
    cpu = K.cpu_between(a, b)
    assert [c.core for c in cpu] == [0, 1]
    assert cpu[0] == K.CoreCpu(0, softirq_pct=10.0, system_pct=20.0, user_pct=10.0, idle_pct=60.0)


def test_qdisc_handles_as_tc_prints_them() -> None:
    from tgen_tui.dut.qdisc import handle_text

    assert handle_text(0x80430000) == "8043:" and handle_text(0x10010) == "1:10"
    assert handle_text(0) == "0:"


def test_an_unreachable_prefix_fails_fast_and_backs_off() -> None:
    """A prefix that cannot run: the read says so, and the next reads do not try again
    (nor wait) until RETRY_S has passed."""
    from tgen_tui.dut.channel import DutChannel

    r = K.DutCounters(DutChannel(ssh="/nonexistent/ssh-command"))
    try:
        a = r.read()
        assert a.values == {} and len(a.errors) == 1 and "cannot start" in a.errors[0]
        b = r.read()
        assert "next try in" in b.errors[0] and r.shell is not None and r.shell.starts == 0
    finally:
        r.close()


NETSTAT = """TcpExt: SyncookiesSent SyncookiesRecv
TcpExt: 0 0
IpExt: InNoRoutes InTruncatedPkts InMcastPkts
IpExt: 49716 0 0
"""


def test_forwarded_frames_without_a_route_are_a_loss_cause() -> None:
    """A DUT whose egress link was set down has no route for what it forwards: the
    kernel counts IpExt InNoRoutes (/proc/net/netstat), an IPv4 no_route cause."""
    from tgen_tui.dut.attribution import counter_family

    assert K.parse_snmp(NETSTAT)["IpExtInNoRoutes"] == 49716
    v, errors = K.counters_from({K.NETSTAT: NETSTAT}, "[]", None, host_scope="host")
    assert v[("no_route", "IpExtInNoRoutes", "dut")] == 49716 and errors == []
    assert counter_family("IpExtInNoRoutes") == 4 and counter_family("Ip6InNoRoutes") == 6
    assert K.NETSTAT in K.NETNS_FILES
