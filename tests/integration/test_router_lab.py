"""A real router DUT (issue 19): tester ports with an L3 identity against ``tgen lab up
--topology router``, whose DUT learns them by ARP and ND (no static neighbours).

Root only: real namespaces, the real kernel data path. Counts and table entries are
asserted, never timings. One router lab serves the module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tgen_tui.engine.neighbours import resolve_all
from tgen_tui.lab import router
from tgen_tui.lab.naming import D0_MAC, P0_MAC, P1_MAC
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile_text

from ..methodology.lab_profiles import unique_profile

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[2]
LEARNED = {"REACHABLE", "STALE", "DELAY", "PROBE"}  # learned (not PERMANENT, not FAILED)


@pytest.fixture(scope="module")
def router_lab(make_lab):
    with make_lab("router", "r") as prefix:
        yield prefix


def tgen_here(capsys, *args: str) -> subprocess.CompletedProcess:
    """``tgen ARGS`` in this process (no interpreter start-up): rc, stdout, stderr."""
    from tgen_tui.cli import main

    capsys.readouterr()
    rc = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out.out, out.err)


def tgen(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tgen_tui", *args], capture_output=True, text=True, timeout=timeout
    )


def dual_stack(prefix: str) -> str:
    text = (ROOT / "profiles" / "router-dual-stack.yaml").read_text()
    return text.replace("tgen-", f"{prefix}-").replace("10kpps", "2kpps")


async def run_and_look(compiled, prefix: str, seconds: float):
    """Run the profile, read the DUT's neighbour table while it runs; the final snapshot."""
    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions

    async with open_engine(compiled, EngineOptions()) as eng:
        await eng.start()
        await trio.sleep(seconds)
        neigh = await trio.to_thread.run_sync(router.neighbours, f"{prefix}-dut")
        await eng.stop()
        final = await eng.final_snapshot()
    return final, neigh


def test_dual_stack_through_the_router_loses_nothing_and_the_dut_learns_us(router_lab):
    """Must show 1: IPv4 (NAT44) and IPv6 both ways, gateways resolved, lost 0 in every
    stream, rx counts equal to the interface counters; the DUT's neighbours are learned."""
    compiled = compile_profile(load_profile_text(dual_stack(router_lab), "router.yaml"))
    final, neigh = trio.run(run_and_look, compiled, router_lab, 1.0)
    streams = {s.name: s for s in final.streams}
    assert set(streams) == {"v4-up", "v4-down", "v6-up", "v6-down"}
    for s in streams.values():
        assert s.tx_frames > 500 and s.rx_frames == s.tx_frames and s.lost == 0, s
    for p in final.ports:
        signed = sum(s.rx_frames for s in streams.values() if s.rx_port == p.name)
        # the interface counters also hold the ARP/ND frames, each way: the DUT's requests
        # and answers (a few of them may come before the interface baseline is taken), and
        # the responder's replies and announcements
        assert 0 <= p.if_rx_frames - signed <= 20 and abs(p.rx_frames - p.if_rx_frames) <= 20
        assert 0 <= p.if_tx_frames - p.tx_frames <= 50
        assert p.tx_frames == sum(s.tx_frames for s in streams.values() if s.port == p.name)
        assert (
            p.gateway_mac == p.gateway6_mac == (D0_MAC if p.name == "p0" else "02:74:67:00:01:fe")
        )
        assert p.mac == (P0_MAC if p.name == "p0" else P1_MAC)  # the interface's own
        assert (p.gateway, p.gateway6) == (
            ("198.18.0.1", "2001:2::1") if p.name == "p0" else ("198.19.0.1", "2001:2:0:1::1")
        )
    ours = {
        ("198.18.0.2", "d0"): P0_MAC,
        ("198.19.0.2", "d1"): P1_MAC,
        ("2001:2::2", "d0"): P0_MAC,
        ("2001:2:0:1::2", "d1"): P1_MAC,
    }
    table = {(n["dst"], n["dev"]): n for n in neigh}
    for key, mac in ours.items():
        n = table[key]
        assert n.get("lladdr") == mac and set(n["state"]) <= LEARNED, n


def range_profile(prefix: str) -> str:
    """250 sources on p0 (198.18.0.3-252) to p1 through the NAT; p1 answers each of them
    routed (no NAT on the way in), so the DUT resolves all 250 on d0."""
    return f"""
name: r250
ports:
  p0: {{interface: p0, netns: {prefix}-tester, ipv4: 198.18.0.2/24, gateway: 198.18.0.1}}
  p1: {{interface: p1, netns: {prefix}-tester, ipv4: 198.19.0.2/24, gateway: 198.19.0.1}}
streams:
  - name: out
    port: p0
    rx_port: p1
    ipv4: {{src: {{min: 198.18.0.3, max: 198.18.0.252}}, dst: 198.19.0.2}}
    udp: {{src_port: 30000, dst_port: 9}}
    rate: 2500pps
  - name: back
    port: p1
    rx_port: p0
    ipv4: {{src: 198.19.0.2, dst: {{min: 198.18.0.3, max: 198.18.0.252}}}}
    udp: {{src_port: 9, dst_port: 30001}}
    rate: 2500pps
"""


def test_a_range_of_250_sources_is_learned_by_the_dut(router_lab):
    """Must show 2: the DUT holds at least 250 learned entries for the range; lost 0."""
    compiled = compile_profile(load_profile_text(range_profile(router_lab), "r250.yaml"))
    final, neigh = trio.run(run_and_look, compiled, router_lab, 1.0)
    for s in final.streams:
        assert s.tx_frames > 1000 and s.rx_frames == s.tx_frames and s.lost == 0, s
    learned = {
        n["dst"]
        for n in neigh
        if n["dev"] == "d0"
        and n.get("lladdr") == P0_MAC
        and set(n["state"]) <= LEARNED
        and n["dst"].startswith("198.18.0.")
        and 3 <= int(n["dst"].rsplit(".", 1)[1]) <= 252
    }
    assert len(learned) == 250


def test_preflight_passes_and_names_the_cause_when_it_fails(router_lab, tmp_path, capsys):
    """Must show 3: passes on the router lab (JSON); d1 down: exit 1 naming p1 and the
    link; a wrong gateway: exit 1 with "no ARP reply from" that address."""
    prof = tmp_path / "r.yaml"
    prof.write_text(dual_stack(router_lab))
    cp = tgen_here(capsys, "preflight", str(prof), "--json")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["passed"] and all(c["ok"] for c in doc["checks"])
    got = {(c["scope"], c["check"]) for c in doc["checks"]}
    for want in [("port p0", "gateway"), ("port p1", "gateway6"), ("dut", "conntrack")]:
        assert want in got
    for name in ("v4-up", "v4-down", "v6-up", "v6-down"):
        assert (f"stream {name}", "burst") in got
    burst = {c["scope"]: c["detail"] for c in doc["checks"] if c["check"] == "burst"}
    assert all(d.startswith("20 of 20 frames") for d in burst.values()), burst
    trans = {c["scope"]: c["detail"] for c in doc["checks"] if c["check"] == "translation"}
    assert trans["stream v4-up"] == "src translated to 198.19.0.1"
    d_ns = f"{router_lab}-dut"
    # the reply burst starts when the profile starts it (after the forward burst made the
    # NAT's entries): none of its frames reached the DUT itself, which would leave entries
    # that make the port-preserving NAT pick other ports for the next run's flows
    ct = subprocess.run(
        ["ip", "netns", "exec", d_ns, "conntrack", "-L", "-p", "udp", "--dst", "198.19.0.1"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "UNREPLIED" not in ct.stdout, ct.stdout

    subprocess.run(["ip", "-n", d_ns, "link", "set", "d1", "down"], check=True)
    try:
        cp = tgen_here(capsys, "preflight", str(prof), "--no-burst")
    finally:
        subprocess.run(["ip", "-n", d_ns, "link", "set", "d1", "up"], check=True)
    assert cp.returncode == 1, cp.stdout
    bad = [ln for ln in cp.stdout.splitlines() if " FAIL " in ln]
    assert len(bad) == 1 and bad[0].startswith("port p1") and "link" in bad[0]
    assert "no carrier" in bad[0]

    wrong = tmp_path / "w.yaml"
    wrong.write_text(dual_stack(router_lab).replace("gateway: 198.18.0.1", "gateway: 198.18.0.9"))
    cp = tgen_here(capsys, "preflight", str(wrong), "--no-burst")
    assert cp.returncode == 1
    bad = [ln for ln in cp.stdout.splitlines() if " FAIL " in ln]
    assert len(bad) == 1 and bad[0].startswith("port p0") and "gateway" in bad[0]
    assert "no ARP reply from 198.18.0.9" in bad[0]
    # a run fails at start with one line per unresolved gateway (what open_engine raises)
    compiled = compile_profile(load_profile_text(wrong.read_text(), "w.yaml"))
    found, problems = resolve_all(compiled, None, tries=1, timeout_s=0.3)
    assert found["p0"].gw4 is None and found["p0"].gw6 == D0_MAC
    assert problems == [
        f"port p0: gateway 198.18.0.9: no ARP reply from 198.18.0.9 to 1 requests from "
        f"198.18.0.2 on p0 (netns {router_lab}-tester), 0.3 s apart"
    ]


def test_dut_hooks_run_around_tgen_run_and_a_failing_one_stops_it(router_lab, tmp_path, capsys):
    text = dual_stack(router_lab).replace(
        f"dut:\n  netns: {router_lab}-dut\n",
        f"dut:\n  netns: {router_lab}-dut\n  hooks:\n"
        "    before_run: ip -4 neigh flush dev d0; echo flushed\n"
        "    after_run: {command: 'ip -4 neigh show dev d0 | grep -c 198.18.0.2', timeout_s: 5}\n",
    )
    prof = tmp_path / "h.yaml"
    prof.write_text(text)
    out = tmp_path / "h.json"
    cp = tgen("run", str(prof), "-d", "1", "--json", str(out), "--no-store", "-q")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    hooks = doc["dut_hooks"]
    assert [(h["hook"], h["returncode"], h["stdout"]) for h in hooks] == [
        ("before_run", 0, "flushed\n"),
        ("after_run", 0, "1\n"),  # the DUT learned p0 again during the run
    ]
    assert doc["ports"]["p0"]["gateway_mac"] == D0_MAC
    prof.write_text(text.replace("echo flushed", "echo no such DUT >&2; exit 7"))
    cp = tgen_here(capsys, "run", str(prof), "-d", "1", "--json", str(out), "--no-store", "-q")
    assert cp.returncode == 3
    assert "DUT hook before_run" in cp.stderr and "exit 7" in cp.stderr
    assert "no such DUT" in cp.stderr


def test_a_vlan_tagged_arp_request_gets_a_reply_with_the_same_tag(direct_lab):
    """Must show 4: on the direct lab, p0 answers (its worker's responder) a VLAN 35 ARP
    request that scapy sends into p1; the reply arrives on p1 with VLAN 35."""
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.worker.netns import netns
    from tgen_tui.worker.rxring import RxRing

    text = f"""
name: vlan-arp
ports:
  p0: {{interface: p0, netns: {direct_lab}-tester, ipv4: 198.18.0.2/24}}
streams:
  - {{name: s, port: p0, vlan: [{{id: 35}}], ipv4: {{src: 198.18.0.2, dst: 198.18.0.1}}, rate: 10pps}}
"""
    compiled = compile_profile(load_profile_text(text, "vlan.yaml"))
    req = (
        Ether(src="02:00:00:00:00:99", dst="ff:ff:ff:ff:ff:ff")
        / Dot1Q(vlan=35, prio=5)
        / ARP(op=1, hwsrc="02:00:00:00:00:99", psrc="198.18.0.1", pdst="198.18.0.2")
    )

    async def main():
        async with open_engine(compiled, EngineOptions(ports=["p0"])) as eng:
            with netns(f"{direct_lab}-tester"):
                ring = RxRing("p1", retire_ms=1)
                import socket

                tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                tx.bind(("p1", 0))
            try:
                got = []
                for _ in range(3):
                    tx.send(bytes(req))
                    for _ in range(20):
                        await trio.sleep(0.05)
                        got += [(f, v) for f, v in ring.poll_frames() if Ether(f).type != 0x0800]
                        if any(_is_reply(f, v) for f, v in got):
                            return got
                return got
            finally:
                tx.close()
                ring.close()
                del eng

    frames = trio.run(main)
    replies = [(f, v) for f, v in frames if _is_reply(f, v)]
    assert replies, frames
    f, v = replies[0]
    # veth moves the outer tag into the ring's metadata: rebuild the frame as on the wire
    wire = Ether(f[:12] + (0x8100).to_bytes(2, "big") + (v & 0xFFFF).to_bytes(2, "big") + f[12:])
    assert wire[Dot1Q].vlan == 35 and wire[Dot1Q].prio == 5
    a = wire[ARP]
    assert (a.op, a.psrc, a.pdst, a.hwdst, wire.dst) == (
        2,
        "198.18.0.2",
        "198.18.0.1",
        "02:00:00:00:00:99",
        "02:00:00:00:00:99",
    )


def _is_reply(frame: bytes, vlan: int) -> bool:
    from scapy.layers.l2 import ARP, Ether

    e = Ether(frame)
    return vlan >= 0 and ARP in e and e[ARP].op == 2


def test_respond_false_leaves_the_dut_unresolved(router_lab):
    """``respond: false`` on p1: the DUT cannot resolve 198.19.0.2, so v4-up is lost."""
    text = dual_stack(router_lab).replace(
        "    gateway6: 2001:2:0:1::1\n", "    gateway6: 2001:2:0:1::1\n    respond: false\n"
    )
    subprocess.run(["ip", "-n", f"{router_lab}-dut", "neigh", "flush", "all"], check=False)
    compiled = compile_profile(load_profile_text(text, "nr.yaml"))
    final, neigh = trio.run(run_and_look, compiled, router_lab, 1.0)
    streams = {s.name: s for s in final.streams}
    assert streams["v4-up"].tx_frames > 0 and streams["v4-up"].rx_frames == 0
    assert streams["v6-down"].lost == 0  # p0 still answers
    table = {(n["dst"], n["dev"]): n for n in neigh}
    n = table.get(("198.19.0.2", "d1"))
    assert n is None or not n.get("lladdr") or "FAILED" in n["state"] or "INCOMPLETE" in n["state"]


def test_before_trial_runs_once_per_rfc9693_trial_and_the_report_counts_it(router_lab, tmp_path):
    """Must show 6: an RFC 9693 run on the router lab (the ports answer ARP, the DUT has
    no static neighbours); before_trial ran once per trial, the report counts the runs."""
    prof = tmp_path / "u.yaml"
    prof.write_text(
        unique_profile(router_lab)
        .replace(
            f"p0: {{interface: p0, netns: {router_lab}-tester}}",
            f"p0: {{interface: p0, netns: {router_lab}-tester, ipv4: 198.18.0.2/24}}",
        )
        .replace(
            f"p1: {{interface: p1, netns: {router_lab}-tester}}",
            f"p1: {{interface: p1, netns: {router_lab}-tester, ipv4: 198.19.0.2/24}}",
        )
        .replace(
            f"dut: {{netns: {router_lab}-dut}}",
            f"dut:\n  netns: {router_lab}-dut\n  hooks:\n"
            "    before_trial: {command: 'echo reset', timeout_s: 10}\n",
        )
    )
    out = tmp_path / "r.json"
    cp = tgen(
        "rfc9693", "cps", str(prof), "--max-rate", "40000", "--error", "20000",
        "--repeats", "1", "-N", "500", "--json", str(out), "--duration", "1s",
        "--timeout", "200ms", "--settle", "100ms", "--no-store", "--quiet",
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    trials = [t for s in doc["searches"] for t in s["trials"]]
    # the hook's counts are the point; whether a 12.5 ms trial at 40,000/s passes is the
    # DUT's and the host's speed (no timing in pass/fail tests): it failed in two full
    # suites (ci55, ci56) and passed alone every time
    assert len(trials) >= 2
    # a trial that a sender stall invalidated is run again (extra.retried): each attempt
    # is a trial on the DUT, so the hook ran before each one
    attempts = [a for t in trials for a in [*(t["extra"].get("retried") or []), t]]
    assert doc["dut_hooks"]["runs"] == {"before_trial": len(attempts)}
    for t in attempts:
        (h,) = t["extra"]["dut_hooks"]
        assert (h["hook"], h["stdout"], h["ok"]) == ("before_trial", "reset\n", True)
    assert sorted(h["trial"] for h in doc["dut_hooks"]["records"]) == list(
        range(1, len(attempts) + 1)
    )


def test_a_reload_that_adds_a_gateway_resolves_it(router_lab):
    """An edited profile whose port gains a gateway: reload resolves it (new workers send
    to the resolved MAC); the unchanged port keeps the MACs found at start."""
    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions

    text = range_profile(router_lab)
    before = compile_profile(
        load_profile_text(
            text.replace(", gateway: 198.19.0.1}", "}").replace(
                "name: back\n", "name: back\n    enabled: false\n"
            ),
            "a.yaml",
        )
    )
    after = compile_profile(load_profile_text(text, "b.yaml"))

    async def main():
        async with open_engine(before, EngineOptions()) as eng:
            assert set(eng.options.neighbours) == {"p0"}
            await eng.reload(after)
            assert eng.options.neighbours["p1"].gw4 == "02:74:67:00:01:fe"
            await eng.start()
            await trio.sleep(0.5)
            await eng.stop()
            return await eng.final_snapshot()

    final = trio.run(main)
    streams = {s.name: s for s in final.streams}
    assert streams["back"].tx_frames > 100 and streams["back"].lost == 0
    ports = {p.name: p for p in final.ports}
    assert ports["p1"].gateway_mac == "02:74:67:00:01:fe" and ports["p0"].gateway_mac == D0_MAC
