"""Every lost frame explained, on the real lab (root): each impairment alone, and two at
once, through `tgen run --json`; the JSON result's ``streams.<name>.loss_causes`` must name
the right counter for the loss within 1 % (2 % for a shared counter split between two
causes), with at most 1 % of the loss unexplained. Assertions are on counts only.

The lab is shared by the tests of this module (one `lab up`); each test sets its
impairment with ``set_dut`` and flushes conntrack first. ``--conntrack-max`` is global to
the machine: the test sets it for one short run and restores it at once (`lab down`
restores it too).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tgen_tui.lab import topology as topo
from tgen_tui.lab.naming import P1_IP, P1_MAC

from ..engine.engine_helpers import profile_yaml, stream_yaml

pytestmark = pytest.mark.root

TGEN = [sys.executable, "-m", "tgen_tui"]
FLOWS = "{min: 10000, max: 10255, mode: inc}"  # 256 flows each way


@pytest.fixture(scope="module")
def lab(make_lab):
    with make_lab("nat", "a") as prefix:
        yield prefix


def _run(prefix: str, tmp_path, *, down: bool = True, pps: int = 10000, d: str = "1") -> dict:
    streams = stream_yaml("up", "p0", rx_port="p1", pps=pps, src_ports=FLOWS)
    if down:
        streams += stream_yaml("down", "p1", rx_port="p0", pps=pps, src_ports="7").replace(
            "dst_port: 7", f"dst_port: {FLOWS}"
        )
        streams += "    schedule: {start: 200ms}\n"
    prof = tmp_path / "p.yaml"
    prof.write_text(profile_yaml(prefix, streams))
    out = tmp_path / "r.json"
    cp = subprocess.run(
        [*TGEN, "run", str(prof), "-d", d, "--flush-dut", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    assert "why up:" in cp.stdout or doc["streams"]["up"]["lost"] == 0
    return doc


def _by_cause(s: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in s["loss_causes"]:
        assert set(c) == {"cause", "counter", "where", "frames"}
        out[c["cause"]] = out.get(c["cause"], 0) + c["frames"]
    return out


def _counter(doc: dict, cause: str) -> int:
    return sum(r["frames"] for r in doc["dut"]["counters"] if r["cause"] == cause)


def _explained(s: dict, cause: str, tol: float = 0.01) -> None:
    lost = s["lost"]
    assert lost > 50, s  # the impairment did bite
    assert _by_cause(s).get(cause, 0) >= (1 - tol) * lost, (cause, s["loss_causes"], lost)
    assert s["loss_unexplained"] <= tol * lost, s


def test_drop_percent_alone_is_the_nft_rule(lab, tmp_path) -> None:
    topo.set_dut(lab, drop_percent=1.0, tbf=None)
    doc = _run(lab, tmp_path)
    up, down = doc["streams"]["up"], doc["streams"]["down"]
    for s in (up, down):
        _explained(s, "nft_rule_drop")
        rule = next(c for c in s["loss_causes"] if c["cause"] == "nft_rule_drop")
        assert (
            rule["counter"].startswith("nft ip tgen_lab fwd_drop handle ")
            and rule["where"] == "dut"
        )
    # the rule's own counter is the loss (not only "at least"): within 1 %
    assert abs(_counter(doc, "nft_rule_drop") - up["lost"] - down["lost"]) <= 0.01 * (
        up["lost"] + down["lost"]
    )


def test_tbf_alone_is_the_qdisc_on_d1(lab, tmp_path) -> None:
    topo.set_dut(lab, drop_percent=0.0, tbf="3mbit,20ms")
    doc = _run(lab, tmp_path)
    up, down = doc["streams"]["up"], doc["streams"]["down"]
    _explained(up, "qdisc_drop")
    # the tbf on d1 is the cause; a loaded host may also drop a few frames in the tester's
    # own rx ring on p1 (seen in one full CI run), which is named but must stay marginal
    where = {c["where"]: 0 for c in up["loss_causes"]}
    for c in up["loss_causes"]:
        where[c["where"]] += c["frames"]
    assert "d1" in where, up["loss_causes"]
    assert sum(n for w, n in where.items() if w != "d1") <= 0.01 * up["lost"], where
    assert down["lost"] == 0 and down["loss_causes"] == []  # d0's egress has no tbf
    assert abs(_counter(doc, "qdisc_drop") - up["lost"]) <= 0.01 * up["lost"]


def test_two_causes_at_once_each_share_within_2pct(lab, tmp_path) -> None:
    topo.set_dut(lab, drop_percent=1.0, tbf="3mbit,20ms")
    doc = _run(lab, tmp_path)
    up, down = doc["streams"]["up"], doc["streams"]["down"]
    # the truth from the counters themselves: tbf on d1 only drops "up"; "down" loses
    # only to the rule, so the rule's other drops are "up"'s
    tbf, rule = _counter(doc, "qdisc_drop"), _counter(doc, "nft_rule_drop")
    truth_up = {"qdisc_drop": tbf, "nft_rule_drop": rule - down["lost"]}
    got_up = _by_cause(up)
    for cause, n in truth_up.items():
        assert n > 50, (cause, n)
        assert abs(got_up.get(cause, 0) - n) <= 0.02 * up["lost"], (cause, got_up, truth_up)
    _explained(down, "nft_rule_drop")
    assert up["loss_unexplained"] <= 0.01 * up["lost"]


def test_unresolved_neighbour_is_arp_cache_unresolved_discards(lab, tmp_path) -> None:
    """The DUT's neighbour entry for p1 is deleted: the DUT must resolve it, and the tester
    (no address on p1) never answers. The packets queued while a resolution is pending
    are freed without any counter when it fails (or still queued when the run ends): the
    queue is shrunk here to ~2 frames (``unres_qlen_bytes``; the default 212,992 bytes
    holds ~256 64-byte frames, ~1 % of 2 s at 10 kpps, reported as unexplained).
    arp_cache is host-wide in the netns lab (its excess is not asserted)."""
    topo.set_dut(lab, drop_percent=0.0, tbf=None)
    ns = topo.dut_netns(lab)
    subprocess.run(["ip", "-n", ns, "neigh", "del", P1_IP, "dev", "d1"], check=True)
    qlen = ["ip", "netns", "exec", ns, "sysctl", "-qw"]
    subprocess.run([*qlen, "net.ipv4.neigh.d1.unres_qlen_bytes=2048"], check=True)
    try:
        doc = _run(lab, tmp_path, down=False)
    finally:
        subprocess.run([*qlen, "net.ipv4.neigh.d1.unres_qlen_bytes=212992"], check=True)
        subprocess.run(
            ["ip", "-n", ns, "neigh", "replace", P1_IP, "lladdr", P1_MAC, "dev", "d1"]
            + ["nud", "permanent"],
            check=True,
        )
    up = doc["streams"]["up"]
    _explained(up, "neighbour_unresolved")
    assert any(c["counter"] == "arp_cache unresolved_discards" for c in up["loss_causes"])


def test_conntrack_max_below_the_flows_is_conntrack_drop(lab, tmp_path) -> None:
    """nf_conntrack_max is global: set for one 1 s run, restored at once."""
    topo.set_dut(lab, drop_percent=0.0, tbf=None)
    before = int(open("/proc/sys/net/netfilter/nf_conntrack_max").read())
    topo.set_dut(lab, conntrack_max=128)
    try:
        doc = _run(lab, tmp_path)
    finally:
        topo.set_dut(lab, conntrack_max=before)
    assert int(open("/proc/sys/net/netfilter/nf_conntrack_max").read()) == before
    up, down = doc["streams"]["up"], doc["streams"]["down"]
    _explained(up, "conntrack_drop")
    # replies without a mapping are new flows (conntrack drop) or, given an entry of their
    # own, delivered to the DUT itself (UdpNoPorts): both named, nothing else
    causes = _by_cause(down)
    named = {"conntrack_drop", "delivered_to_dut_no_port"}
    # a loaded host may drop a few frames in the tester's own rx ring: named, and marginal
    assert sum(n for c, n in causes.items() if c not in named) <= 0.01 * down["lost"], causes
    assert set(causes) <= named | {"tester_ring_drop", "tester_if_drop", "backlog_drop"}
    assert down["loss_unexplained"] <= 0.01 * down["lost"]
    total = up["lost"] + down["lost"]
    counted = _counter(doc, "conntrack_drop") + _counter(doc, "delivered_to_dut_no_port")
    assert abs(counted - total) <= 0.01 * total


ROUTER_PORT = (
    "  {p}: {{interface: {p}, netns: {prefix}-tester, ipv4: {v4}/24, gateway: {gw},"
    " ipv6: {v6}/64, gateway6: {gw6}{extra}}}\n"
)
SMALL_QUEUE = 2048  # bytes: ~2 frames (the default 212,992 holds ~256 64-byte frames)


def _router_profile(prefix: str) -> str:
    """v4 and v6 from p0 to p1 through the router; p1 (``respond: false``) answers no ARP
    and no Neighbour Solicitation, so the DUT never resolves it."""
    p0 = ROUTER_PORT.format(
        p="p0", prefix=prefix, v4="198.18.0.2", gw="198.18.0.1", v6="2001:2::2",
        gw6="2001:2::1", extra="",
    )  # fmt: skip
    p1 = ROUTER_PORT.format(
        p="p1", prefix=prefix, v4="198.19.0.2", gw="198.19.0.1", v6="2001:2:0:1::2",
        gw6="2001:2:0:1::1", extra=", respond: false",
    )  # fmt: skip
    udp = "udp: {src_port: {min: 10000, max: 10255, mode: inc}, dst_port: 7}, rate: 10kpps"
    return f"""name: no-arp
ports:
{p0}{p1}dut: {{netns: {prefix}-dut}}
streams:
  - {{name: v4, port: p0, rx_port: p1, ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}, {udp}}}
  - {{name: v6, port: p0, rx_port: p1, ipv6: {{src: "2001:2::2", dst: "2001:2:0:1::2"}}, size: 78, {udp}}}
"""


def test_router_without_arp_responder_is_neighbour_unresolved(make_lab, tmp_path) -> None:
    """Must show 1, last cause: the router lab, the receiving port ``respond: false``: the
    DUT's ARP (v4) and ND (v6) for p1 fail, and each stream's loss is its own table's
    ``unresolved_discards`` (arp_cache for v4, ndisc_cache for v6), unexplained <= 1 %.

    The frames a pending resolution queues are freed with no neighbour counter when it
    fails (3 s: each then counts as an ICMP unreachable, sent or rate-limited), or are
    still queued when the run ends: with the default queue ~256 per stream and attempt
    would be unexplained (2.6 % of this 1 s run). The DUT's queue on d1 is set small for
    this run; the router lab itself keeps the kernel's default (see the notes)."""
    with make_lab("router", "n") as prefix:
        ns = f"{prefix}-dut"
        small = [f"net.ipv{v}.neigh.d1.unres_qlen_bytes={SMALL_QUEUE}" for v in (4, 6)]
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", *small], check=True)
        prof = tmp_path / "no-arp.yaml"
        prof.write_text(_router_profile(prefix))
        out = tmp_path / "r.json"
        cp = subprocess.run(
            [*TGEN, "run", str(prof), "-d", "1", "--json", str(out)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(out.read_text())
    for name, table in (("v4", "arp_cache"), ("v6", "ndisc_cache")):
        s = doc["streams"][name]
        assert s["rx_frames"] == 0 and s["lost"] == s["tx_frames"] > 5000, s
        _explained(s, "neighbour_unresolved")
        assert {c["counter"] for c in s["loss_causes"]} == {f"{table} unresolved_discards"}, s


def test_netlink_readers_name_and_count_as_nft_and_tc_do(lab) -> None:
    """The namespace's rules and qdiscs through netlink (no process) equal what ``nft -j``
    and ``tc -s -j`` print (the ssh channel's source), names included."""
    from tgen_tui.dut.counters import parse_nft, parse_tc
    from tgen_tui.dut.nftnl import NftReader
    from tgen_tui.dut.qdisc import QdiscReader

    topo.set_dut(lab, drop_percent=1.0, tbf="3mbit,20ms")
    ns = topo.dut_netns(lab)
    nft = ["ip", "netns", "exec", ns, "nft"]
    subprocess.run(
        [*nft, "add rule ip tgen_lab fwd_drop ip daddr 198.19.9.9 counter reject"
         ' comment "no entry"'],
        check=True,
    )  # fmt: skip
    subprocess.run([*nft, "add rule ip tgen_lab fwd_drop ip daddr 198.19.9.8 counter"], check=True)
    q, r = QdiscReader(ns), NftReader(ns)
    try:
        text = subprocess.run([*nft, "-j", "list", "ruleset"], capture_output=True, text=True)
        rules = r.read()
        assert rules == parse_nft(text.stdout)
        assert any(n.endswith('reject "no entry"') for n in rules) and len(rules) == 2
        assert r.read([("ip", "tgen_lab", "fwd_drop")]) == rules
        assert r.read([("ip", "tgen_lab", "no_such_chain")]) == {}
        tc = ["ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc"]
        assert q.read() == parse_tc(subprocess.run(tc, capture_output=True, text=True).stdout)
    finally:
        q.close()
        r.close()
        topo.set_dut(lab, drop_percent=0.0, tbf=None)  # a new table: the added rules go
