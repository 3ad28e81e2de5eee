"""``tgen preflight``: check the path before a test (issue 19).

Checks, each a :class:`Check` (pass or fail, with the reason):

- per port: the link is up (operstate), the MTU holds the largest frame of the streams it
  sends, the gateway (gateway6) answers ARP (ND) and its MAC;
- the DUT: reachable over the profile's channel (netns or ssh), its conntrack count
  readable;
- per socket flow: a TCP connection (a UDP datagram) between its transport hosts
  (:mod:`tgen_tui.engine.flowcheck`);
- per stream: a short low-rate burst arrives at its ``rx_port``; for IPv4 UDP/TCP, the
  addresses it arrives with say whether the path translated it (learned on the receive
  ring, as the RFC 9693 Responder does).

The burst checks run only when the port checks passed (no burst into a path known
broken). Nothing here prints; front ends render :func:`render_table` or the JSON.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import shutil
import tempfile
from typing import Any

from tgen_tui.dut.channel import pick_dut
from tgen_tui.engine.checks import Check
from tgen_tui.packets.compile import CompiledProfile
from tgen_tui.packets.program import StreamProgram

BURST_FRAMES = 20
BURST_PPS = 200.0


def _link(netns: str | None, interface: str) -> dict | None:
    """operstate, flags and MTU of an interface (rtnetlink); None when it is not there."""
    from tgen_tui.engine.probes import link_info

    try:
        return link_info(netns, interface)
    except OSError:  # no such namespace
        return None


def port_checks(compiled: CompiledProfile, ports: list[str]) -> list[Check]:
    """Link, MTU and gateway of every port (blocking)."""
    from tgen_tui.engine.neighbours import resolve_port, wants_resolution

    out: list[Check] = []
    for name in ports:
        spec = compiled.ports[name]
        scope = f"port {name}"
        where = spec.interface + (f" (netns {spec.netns})" if spec.netns else "")
        info = _link(spec.netns, spec.interface)
        if info is None:
            out.append(Check(scope, "link", False, f"no interface {where}"))
            continue
        state = str(info.get("operstate", "UNKNOWN"))
        flags = info.get("flags", [])
        up = state == "UP" or (state == "UNKNOWN" and "LOWER_UP" in flags)
        why = (
            ""
            if up
            else (" (no carrier: the link partner is down)" if "NO-CARRIER" in flags else "")
        )
        out.append(Check(scope, "link", up, f"{where} {state}{why}"))
        mtu = int(info.get("mtu", 0))
        progs = [p for p in compiled.streams if p.port == name]
        if progs:
            need = max(_l3_len(p) for p in progs)
            out.append(
                Check(
                    scope,
                    "mtu",
                    mtu >= need,
                    f"MTU {mtu}, largest frame needs {need} (L3 bytes)",
                )
            )
        if getattr(spec, "tx_path", "") == "xdp" and up:
            out.append(xdp_check(scope, spec.interface, spec.netns))
        if wants_resolution(spec) and up:
            res, problems = resolve_port(spec, tries=2, timeout_s=0.5)
            for fam, key in (("gateway", "gw4"), ("gateway6", "gw6")):
                gw = getattr(spec, fam)
                if gw is None:
                    continue
                bad = [p for p in problems if f": {fam} " in p]
                mac = getattr(res, key)
                if mac:
                    out.append(Check(scope, fam, True, f"{gw} is at {mac}"))
                else:
                    text = bad[0].split(": ", 1)[1] if bad else f"{gw}: not resolved"
                    out.append(Check(scope, fam, False, text))
    return out


def xdp_check(scope: str, interface: str, netns: str | None) -> Check:
    """tx_path xdp: the kernel, libbpf and the program load, and one probe frame (no
    destination MAC) is sent: a veth peer without NAPI fails here, in one line."""
    from tgen_tui.worker.netns import netns as in_netns
    from tgen_tui.worker.xdplive import XdpLiveTx

    try:
        with in_netns(netns):
            tx = XdpLiveTx(interface, hold=False)
            try:
                tx.probe()
            finally:
                tx.close()
    except OSError as e:
        return Check(scope, "xdp", False, str(e.strerror or e))
    return Check(scope, "xdp", True, "live frames: program loaded, the kernel takes its frames")


def _l3_len(p: StreamProgram) -> int:
    """Bytes above Ethernet (and its tags) of the stream's largest frame: what the MTU bounds."""
    return p.sizes.max - p.l3_offset if p.l3 else p.sizes.max - 14  # sizes exclude the FCS


def dut_checks(netns: str | None, ssh: str | None) -> list[Check]:
    from tgen_tui.dut import conntrack
    from tgen_tui.dut.channel import DutChannel

    ch = DutChannel.of(netns, ssh)
    if ch is None:
        return [Check("dut", "channel", True, "no DUT channel in the profile: not checked")]
    out = []
    try:
        r = ch.run("true", timeout=10)
        ok = r.ok
        detail = (
            f"{ch.source} answers"
            if ok
            else f"{ch.source}: exit {r.returncode} {r.stderr.strip()[:120]}"
        )
    except Exception as e:  # noqa: BLE001 - any failure of the channel is the finding
        ok, detail = False, f"{ch.source}: {e}"
    out.append(Check("dut", "channel", ok, detail))
    if ok:
        try:
            n = conntrack.count(ch)
            out.append(Check("dut", "conntrack", True, f"count {n:,} readable"))
        except Exception as e:  # noqa: BLE001
            out.append(Check("dut", "conntrack", False, f"not readable: {e}"))
    return out


def burst_profile(compiled: CompiledProfile, frames: int, pps: float) -> CompiledProfile:
    """``compiled`` with every stream a burst of ``frames`` at ``pps``, each at its profile's
    start time: a reply stream that the profile starts later (after its forward stream made
    the NAT's entries) must not race it, or its early frames reach the DUT itself and leave
    entries there that block the port-preserving NAT for later runs."""
    from tgen_tui.packets.program import Schedule

    streams = [
        dataclasses.replace(
            p,
            schedule=Schedule(
                pps=pps, count=frames, start_s=p.schedule.start_s, key=p.schedule.key
            ),
        )
        for p in compiled.streams
    ]
    return dataclasses.replace(compiled, streams=streams)


async def burst_checks(compiled: CompiledProfile, options: Any, neighbours: dict) -> list[Check]:
    """Send a short burst on every stream; check arrival and (IPv4) translation."""

    burst = burst_profile(compiled, BURST_FRAMES, BURST_PPS)
    if options.ports:  # only the selected ports' streams: the engine builds no others
        sel = set(options.ports)
        burst = dataclasses.replace(burst, streams=[p for p in burst.streams if p.port in sel])
    tmp = tempfile.mkdtemp(prefix="tgen-preflight-")
    try:
        return await _bursts(burst, options, neighbours, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _bursts(burst: CompiledProfile, options: Any, neighbours: dict, tmp: str) -> list[Check]:
    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import LearnSpec

    learn: dict[str, LearnSpec] = {}
    for rx in {p.rx_port for p in burst.streams if p.rx_port}:
        idx = [
            p.index
            for p in burst.streams
            if p.rx_port == rx and p.l3 == 4 and p.l4 in ("udp", "tcp")
        ]
        if idx:
            learn[rx] = LearnSpec(os.path.join(tmp, f"{rx}.npy"), tuple(idx), 1 << 16)
    opts = dataclasses.replace(
        options, neighbours=neighbours, learn=learn or None, drain_ms=300, interval=0.1
    )
    import trio

    async with open_engine(burst, opts) as eng:
        await eng.start()
        latest = max((p.schedule.start_s for p in burst.streams), default=0.0)
        with trio.move_on_after(latest + BURST_FRAMES / BURST_PPS + 2.0):
            while not eng.ports_done_sending():
                await trio.sleep(0.05)
        await eng.stop()
        final = await eng.final_snapshot()
    out = []
    by_name = {s.name: s for s in (final.streams if final else ())}
    for p in burst.streams:
        s = by_name.get(p.name)
        scope = f"stream {p.name}"
        if p.rx_port is None:
            out.append(Check(scope, "burst", True, "no rx_port: arrival not checked"))
            continue
        if options.ports and p.rx_port not in options.ports:
            out.append(Check(scope, "burst", True, f"{p.rx_port} not selected: not checked"))
            continue
        n_rx = s.rx_frames if s else 0
        n_tx = s.tx_frames if s else 0
        ok = n_tx > 0 and n_rx >= n_tx
        out.append(Check(scope, "burst", ok, f"{n_rx} of {n_tx} frames arrived at {p.rx_port}"))
        if p.rx_port in learn and ok and p.index in learn[p.rx_port].streams:
            out.append(_translation(p, learn[p.rx_port].path))
    return out


def _translation(p: StreamProgram, path: str) -> Check:
    """Whether the stream's IPv4 source or destination arrived changed (the tuples learned
    on its rx port: those of every IPv4 UDP/TCP stream expected there)."""
    import numpy as np

    scope = f"stream {p.name}"
    try:
        table = np.load(path)
    except (OSError, ValueError):
        return Check(scope, "translation", True, "no tuples learned: not checked")
    if len(table) == 0:
        return Check(scope, "translation", True, "no tuples learned: not checked")
    fields = {f.name: f for f in p.fields}
    found = []
    for col, name, off in ((0, "ip.src", 12), (1, "ip.dst", 16)):
        seen = sorted({int(a) for a in table[:, col]})
        f = fields.get(name)
        if f is not None:
            inside = all(f.min <= a <= f.max for a in seen)
        else:
            sent = int.from_bytes(p.template[p.l3_offset + off : p.l3_offset + off + 4], "big")
            inside = seen == [sent]
        if not inside:
            shown = ", ".join(str(ipaddress.IPv4Address(a)) for a in seen[:3])
            found.append(f"{name[3:]} translated to {shown}")
    return Check(scope, "translation", True, "; ".join(found) or "arrives as sent: not translated")


def render_table(checks: list[Check]) -> str:
    w1 = max([len(c.scope) for c in checks] + [5])
    w2 = max([len(c.check) for c in checks] + [5])
    lines = [f"{'where':<{w1}}  {'check':<{w2}}  result  detail"]
    for c in checks:
        lines.append(
            f"{c.scope:<{w1}}  {c.check:<{w2}}  {'pass' if c.ok else 'FAIL':<6}  {c.detail}"
        )
    bad = sum(not c.ok for c in checks)
    lines.append(f"preflight: {'passed' if not bad else f'{bad} check(s) failed'}")
    return "\n".join(lines)


async def preflight(compiled: CompiledProfile, options: Any, bursts: bool = True) -> list[Check]:
    """Every check (see the module docstring); bursts only when nothing failed before."""
    import trio

    from tgen_tui.engine.neighbours import resolve_all

    ports = list(options.ports or compiled.ports)
    checks = await trio.to_thread.run_sync(port_checks, compiled, ports)
    checks += await trio.to_thread.run_sync(
        dut_checks,
        *pick_dut(options.dut_netns, options.dut_ssh, compiled.dut_netns, compiled.dut_ssh),
    )
    if compiled.flows:  # socket flows: each host pair's path through the DUT
        from tgen_tui.engine.flowcheck import flow_checks

        checks += await trio.to_thread.run_sync(flow_checks, compiled, ports)
    if bursts and all(c.ok for c in checks) and compiled.streams:
        neigh, problems = await trio.to_thread.run_sync(resolve_all, compiled, ports)
        if not problems:
            checks += await burst_checks(compiled, options, neigh)
    return checks


__all__ = ["Check", "preflight", "render_table"]
