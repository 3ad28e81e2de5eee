"""``up``/``down``/``status``/``set_dut``: build, inspect and remove the lab.

The ``nat`` and ``router`` DUTs get a keeper process (:mod:`.keeper`) that puts their
static neighbours and routes back when a link flap flushed them.

``up`` converges: every step is idempotent (create what is missing, replace settings), so
running it twice with the same config changes nothing, and with a different config it
reconfigures in place (a topology change rebuilds). ``down`` removes both namespaces (which
deletes their veths, qdiscs and nftables tables), restores the global conntrack settings
recorded in ``/run/tgen-lab/{prefix}.json`` and deletes that file; it is safe when nothing
is up.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time

from tgen_tui.diagnostics import BadInput, EnvironmentProblem, TgenError
from tgen_tui.dut import conntrack as dut_ct
from tgen_tui.dut import settings as dut_settings
from tgen_tui.dut.channel import DutChannel
from tgen_tui.lab import commands, hosts, keeper, middlebox, nftables, router
from tgen_tui.lab import conntrack as ct
from tgen_tui.lab.config import DUT_FIELDS, SETTABLE_FIELDS, LabConfig, parse_tbf, validate
from tgen_tui.lab.naming import (
    D0,
    D0_IP,
    D0_MAC,
    D1,
    D1_IP,
    D1_MAC,
    DEFAULT_PREFIX,
    INSIDE_NET,
    OUTSIDE_NET,
    P0,
    P0_IP,
    P0_MAC,
    P1,
    P1_IP,
    P1_MAC,
    PREFIX_LEN,
    STATE_DIR,
    dut_netns,
    state_path,
    tester_netns,
)
from tgen_tui.lab.router import DUT_TOPOLOGIES

__all__ = [
    "LabConfig",
    "up",
    "down",
    "status",
    "set_dut",
    "flush_conntrack",
    "conntrack_count",
    "tester_netns",
    "dut_netns",
]

conntrack_count = ct.conntrack_count

#: Global (initial-namespace-only) knobs: name -> file. Recorded and restored by down.
GLOBALS = {
    "conntrack_max": dut_ct.GLOBAL_MAX_PATH,
    "conntrack_buckets": dut_ct.GLOBAL_BUCKETS_PATH,
}

UDP_TIMEOUT_KEY = dut_ct.SYSCTLS["udp_timeout_s"]
UDP_STREAM_TIMEOUT_KEY = dut_ct.SYSCTLS["udp_stream_timeout_s"]


# ---------------------------------------------------------------- state file


def _load_state(prefix: str) -> dict | None:
    try:
        with open(state_path(prefix)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _save_state(prefix: str, state: dict) -> None:
    os.makedirs(STATE_DIR, exist_ok=True)
    tmp = state_path(prefix) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, state_path(prefix))


def _other_states(prefix: str) -> dict[str, dict]:
    out = {}
    for path in glob.glob(os.path.join(STATE_DIR, "*.json")):
        other = os.path.basename(path)[: -len(".json")]
        if other == prefix:
            continue
        try:
            with open(path) as f:
                out[other] = json.load(f)
        except (OSError, ValueError):
            continue
    return out


# ---------------------------------------------------------------- global knobs


def _apply_globals(cfg: LabConfig, state: dict) -> None:
    """Set the global conntrack knobs the config asks for, remembering the originals.

    Several labs may change the same global: the first one records the machine's original
    value, later ones inherit that record, and only the last one down restores it.
    """
    recorded: dict = state.setdefault("globals", {})
    warnings: list = state.setdefault("warnings", [])
    for name, path in GLOBALS.items():
        want = getattr(cfg, name)
        if want is None:
            if name in recorded:
                _restore_global(cfg.prefix, name, recorded.pop(name))
            continue
        current = commands.read_global(path)
        if current is None:
            warnings.append(f"{name}: {path} is not readable here; not applied")
            continue
        if name not in recorded:
            original = current
            for other in _other_states(cfg.prefix).values():
                rec = other.get("globals", {}).get(name)
                if rec:
                    original = rec["original"]
                    break
            recorded[name] = {"path": path, "original": original}
        if current != str(want) and not commands.write_global(path, want):
            recorded.pop(name, None)
            if name == "conntrack_max":
                raise EnvironmentProblem(
                    f"cannot write {path} (only possible from the initial network namespace,"
                    " as root); use --ct-limit for a per-DUT cap instead"
                )
            warnings.append(f"{name}: {path} is not writable here; left at {current}")
            continue
        recorded[name]["value"] = want


def _restore_global(prefix: str, name: str, rec: dict) -> None:
    holders = [p for p, st in _other_states(prefix).items() if name in st.get("globals", {})]
    if holders:
        return  # another lab still holds a value; the last one down restores the original
    if commands.read_global(rec["path"]) != str(rec["original"]):
        commands.write_global(rec["path"], rec["original"])


# ---------------------------------------------------------------- building blocks


def _links(netns: str) -> dict[str, dict]:
    if not commands.netns_exists(netns):
        return {}
    return {link["ifname"]: link for link in commands.ip_json(["link", "show"], netns=netns)}


def _ns_base_sysctls(netns: str, *, forward: bool) -> None:
    values = {
        "net.ipv6.conf.all.disable_ipv6": 1,
        "net.ipv6.conf.default.disable_ipv6": 1,
        "net.ipv4.ip_forward": 1 if forward else 0,
    }
    if forward:
        values |= {"net.ipv4.conf.all.rp_filter": 0, "net.ipv4.conf.default.rp_filter": 0}
    commands.sysctl_set(netns, values)


#: Queues of every lab veth (tx and rx, both ends): one per CPU, at least 2, so that AF_XDP
#: sender lanes can bind queue L of the lab's own ports (worker/fanout.open_lane_tx). RPS is
#: set on every rx queue (_apply_rps), so the receive work spreads as with one queue.
LAB_QUEUES = max(2, os.cpu_count() or 1)


def _queue_count(netns: str, ifname: str) -> int:
    """The interface's rx queues in use (sysfs ``queues/rx-*``; ``ip -d``'s numrxqueues is
    the allocated count: a veth made without numrxqueues has as many, but uses one)."""
    cp = commands.run(
        ["sh", "-c", f"ls -d /sys/class/net/{ifname}/queues/rx-*"], netns=netns, check=False
    )
    return len(cp.stdout.split())


def _ensure_veth(ns_a: str, a: str, ns_b: str, b: str, links_a: dict, links_b: dict) -> None:
    """The veth pair ``a``/``b`` with LAB_QUEUES queues; a pair made by an older ``up`` with
    fewer queues is made again (``_build`` then restores addresses, routes and neighbours)."""
    if a in links_a and b in links_b:
        if min(_queue_count(ns_a, a), _queue_count(ns_b, b)) >= LAB_QUEUES:
            return
    if a in links_a:
        commands.run(["ip", "-n", ns_a, "link", "del", a], check=False)
    if b in links_b:
        commands.run(["ip", "-n", ns_b, "link", "del", b], check=False)
    q = ["numtxqueues", str(LAB_QUEUES), "numrxqueues", str(LAB_QUEUES)]
    commands.run(
        ["ip", "-n", ns_a, "link", "add", a, *q, "type", "veth", "peer", "name", b, *q]
        + ["netns", ns_b]
    )


def _configure_if(netns: str, ifname: str, mac: str, *, ipv6_off: bool = True) -> None:
    commands.run(["ip", "-n", netns, "link", "set", ifname, "address", mac])
    if ipv6_off:
        commands.sysctl_set(netns, {f"net.ipv6.conf.{ifname}.disable_ipv6": 1})
    commands.run(["ip", "-n", netns, "link", "set", ifname, "up"])


def _build(cfg: LabConfig) -> None:
    t_ns = tester_netns(cfg.prefix)
    d_ns = dut_netns(cfg.prefix)
    commands.netns_add(t_ns)
    _ns_base_sysctls(t_ns, forward=False)
    commands.run(["ip", "-n", t_ns, "link", "set", "lo", "up"])
    if cfg.topology == "direct":
        t_links = _links(t_ns)
        _ensure_veth(t_ns, P0, t_ns, P1, t_links, t_links)
        _configure_if(t_ns, P0, P0_MAC)
        _configure_if(t_ns, P1, P1_MAC)
        return
    commands.netns_add(d_ns)
    _ns_base_sysctls(d_ns, forward=True)
    commands.run(["ip", "-n", d_ns, "link", "set", "lo", "up"])
    t_links, d_links = _links(t_ns), _links(d_ns)
    _ensure_veth(t_ns, P0, d_ns, D0, t_links, d_links)
    t_links, d_links = _links(t_ns), _links(d_ns)
    _ensure_veth(t_ns, P1, d_ns, D1, t_links, d_links)
    for ns, ifname, mac in ((t_ns, P0, P0_MAC), (t_ns, P1, P1_MAC)):
        _configure_if(ns, ifname, mac)
    for ifname, mac in ((D0, D0_MAC), (D1, D1_MAC)):
        _configure_if(d_ns, ifname, mac)
        commands.sysctl_set(d_ns, {f"net.ipv4.conf.{ifname}.rp_filter": 0})
    if cfg.topology == "router":
        router.build_dut(d_ns)  # dynamic ARP/ND, IPv6 (issue 19)
        return
    ip = ["ip", "-n", d_ns]
    commands.run([*ip, "addr", "replace", f"{D0_IP}/{PREFIX_LEN}", "dev", D0])
    commands.run([*ip, "addr", "replace", f"{D1_IP}/{PREFIX_LEN}", "dev", D1])
    # tester ports have no IP: static, permanent neighbours stand in for ARP
    for addr, mac, dev in NAT_NEIGHBOURS:
        commands.run([*ip, "neigh", "replace", addr, "lladdr", mac, "dev", dev, "nud", "permanent"])
    for dst, via, dev in router.ROUTES:
        commands.run([*ip, "route", "replace", dst, "via", via, "dev", dev])


#: the nat DUT's static neighbours (address, MAC, dev): the tester ports do not answer ARP
NAT_NEIGHBOURS = ((P0_IP, P0_MAC, D0), (P1_IP, P1_MAC, D1))


def _kept(topology: str) -> dict:
    """What the lab's keeper puts back after a link flap (lab/keeper.py)."""
    spec: dict = {"route": router.ROUTES}
    if topology == "nat":
        spec["neigh"] = NAT_NEIGHBOURS
    else:
        spec["route6"] = router.ROUTES6
    return spec


def _apply_dut(cfg: LabConfig, state: dict) -> None:
    """Everything ``set_dut`` may change: sysctls, nftables, TBF (not the globals).

    An identical ruleset already loaded is left alone (so ``up`` twice keeps the drop
    counters and the ``ct count`` list); any change replaces the table in one transaction,
    which also restarts ``ct count`` from zero (existing flows are no longer counted).
    """
    d_ns = dut_netns(cfg.prefix)
    commands.sysctl_set(
        d_ns, {UDP_TIMEOUT_KEY: cfg.udp_timeout, UDP_STREAM_TIMEOUT_KEY: cfg.udp_stream_timeout}
    )
    text = nftables.ruleset(
        drop_percent=cfg.drop_percent,
        rate_limit_pps=cfg.rate_limit_pps,
        ct_limit=cfg.ct_limit,
        ct_new_rate=cfg.ct_new_rate,
        filter_rules=cfg.filter_rules,
        nat_ports=cfg.nat_ports,
    )
    digest = hashlib.sha256(text.encode()).hexdigest()
    if not (state.get("nft_digest") == digest and nftables.table_exists(d_ns)):
        nftables.apply(d_ns, text)
        state["nft_digest"] = digest
    if cfg.tbf:
        spec = parse_tbf(cfg.tbf)
        commands.run(["tc", "-n", d_ns, "qdisc", "replace", "dev", D1, "root", *spec.tc_args()])
    else:
        commands.run(["tc", "-n", d_ns, "qdisc", "del", "dev", D1, "root"], check=False)
    tbf_args = parse_tbf(cfg.tbf).tc_args() if cfg.tbf else None
    middlebox.apply(
        cfg.prefix,
        state,
        hosts=cfg.transport_hosts,
        delay=cfg.delay,
        loss=cfg.loss,
        tbf_args=tbf_args,
    )


def _rps_path(ifname: str, queue: int = 0) -> str:
    return f"/sys/class/net/{ifname}/queues/rx-{queue}/rps_cpus"


def _rps_all(names: tuple[str, ...], mask: str) -> dict[str, str]:
    """The same RPS mask on every rx queue of every interface in ``names``."""
    return {_rps_path(n, q): mask for n in names for q in range(LAB_QUEUES)}


def _apply_rps(cfg: LabConfig) -> None:
    if cfg.rps_cpus is None:
        return
    mask = cfg.rps_cpus
    commands.write_sys_files(tester_netns(cfg.prefix), _rps_all((P0, P1), mask))
    if cfg.topology in DUT_TOPOLOGIES:
        commands.write_sys_files(dut_netns(cfg.prefix), _rps_all((D0, D1), mask))


def _apply_xdp(cfg: LabConfig) -> None:
    """xdp_peers: native XDP_PASS on the veths facing the tester ports (NAPI on them, so
    tx_path xdp can send there; the stack sees every frame as before, without GRO), or
    none. On by option only: it changes where a full receive queue drops (the veth's
    ring instead of the host backlog) and costs a copy per frame."""
    from tgen_tui.worker.netns import netns
    from tgen_tui.worker.xdplive import attach_pass, detach

    if cfg.topology in DUT_TOPOLOGIES:
        ns, names = dut_netns(cfg.prefix), (D0, D1)
    else:
        ns, names = tester_netns(cfg.prefix), (P0, P1)
    with netns(ns):
        for name in names:
            if cfg.xdp_peers:
                attach_pass(name)
            else:
                detach(name)


# ---------------------------------------------------------------- public API


def _apply_and_save(prefix: str, cfg: LabConfig, state: dict) -> None:
    """Apply ``cfg``'s DUT (nat topology), RPS and global settings, then record it in the state file."""
    if cfg.topology in DUT_TOPOLOGIES:
        _apply_dut(cfg, state)
        keeper.ensure(prefix, dut_netns(prefix), state, _kept(cfg.topology))
    _apply_rps(cfg)
    if cfg.xdp_peers or (state.get("config") or {}).get("xdp_peers"):
        _apply_xdp(cfg)
    _apply_globals(cfg, state)
    state["config"] = cfg.to_dict()
    state["updated"] = time.time()
    _save_state(prefix, state)
    if cfg.topology in DUT_TOPOLOGIES:
        dut_settings.write_description(dut_netns(prefix), describe_dut(cfg))
    else:
        dut_settings.remove_description(dut_netns(prefix))


def up(cfg: LabConfig) -> dict:
    """Bring the lab up (or reconfigure it to ``cfg``) and return :func:`status`."""
    commands.check_environment()
    validate(cfg)
    prefix = cfg.prefix
    state = _load_state(prefix)
    was_there = commands.netns_exists(tester_netns(prefix)) or commands.netns_exists(
        dut_netns(prefix)
    )
    old_topology = (state or {}).get("config", {}).get("topology")
    if was_there and (
        old_topology not in (None, cfg.topology)
        or (cfg.topology == "direct" and commands.netns_exists(dut_netns(prefix)))
    ):
        down(prefix)  # topology change: rebuild from scratch
        state, was_there = None, False
    state = state or {"prefix": prefix, "created": time.time()}
    state.setdefault("globals", {})
    state["warnings"] = []
    try:
        _build(cfg)
        _apply_and_save(prefix, cfg, state)
    except BaseException:
        if not was_there:
            _save_state(prefix, state)  # so that down restores any global already changed
            down(prefix)
        raise
    return status(prefix)


def down(prefix: str = DEFAULT_PREFIX) -> None:
    """Remove everything the lab ``prefix`` made; safe to call when nothing is up."""
    commands.check_environment(("ip",))
    ct.forget(dut_netns(prefix))
    keeper.stop(prefix, _load_state(prefix) or {})  # before its namespace goes
    middlebox.stop(prefix, _load_state(prefix) or {})
    hosts.remove(prefix)
    commands.netns_delete(dut_netns(prefix))
    commands.netns_delete(tester_netns(prefix))
    state = _load_state(prefix)
    if state:
        for name, rec in list(state.get("globals", {}).items()):
            _restore_global(prefix, name, rec)
    try:
        os.unlink(state_path(prefix))
    except FileNotFoundError:
        pass
    dut_settings.remove_description(dut_netns(prefix))
    from tgen_tui.engine.portlock import remove_unheld

    remove_unheld(tester_netns(prefix))  # port locks left by a tgen that was killed


def set_dut(prefix: str = DEFAULT_PREFIX, **changes) -> dict:
    """Change DUT settings of a running lab (e.g. ``drop_percent=1``) and return status.

    The nftables ruleset is replaced in one ``nft -f`` transaction (old table deleted, new
    one created). ``rps_cpus`` may change too. Unchanged fields keep their values.
    """
    commands.check_environment()
    bad = set(changes) - set(SETTABLE_FIELDS)
    if bad:
        raise BadInput(
            f"cannot set {', '.join(sorted(bad))} on a running lab"
            f" (settable: {', '.join(SETTABLE_FIELDS)})"
        )
    state = _load_state(prefix)
    if not state or not commands.netns_exists(tester_netns(prefix)):
        raise EnvironmentProblem(f"the lab {prefix!r} is not up: run `tgen lab up` first")
    cfg = LabConfig.from_dict(state["config"])
    if cfg.topology == "direct" and any(k in DUT_FIELDS for k in changes):
        raise BadInput("the direct topology has no DUT to configure")
    new = cfg.replace(**changes)
    validate(new)
    state["warnings"] = []
    _apply_and_save(prefix, new, state)
    return status(prefix)


def flush_conntrack(prefix: str = DEFAULT_PREFIX) -> None:
    """Empty the DUT's conntrack table (methodology code calls this before each trial)."""
    commands.check_environment(("ip",))
    ct.flush(dut_netns(prefix))


# ---------------------------------------------------------------- status


def _iface_info(netns: str, links: dict, addrs: dict, rps: dict) -> dict:
    out = {}
    for name, link in sorted(links.items()):
        if name == "lo":
            continue
        out[name] = {
            "netns": netns,
            "interface": name,
            "mac": link.get("address"),
            "state": link.get("operstate"),
            "up": "UP" in link.get("flags", []),
            "mtu": link.get("mtu"),
            "addresses": addrs.get(name, []),
            "rps_cpus": rps.get(_rps_path(name)),
        }
    return out


def _addresses(netns: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in commands.ip_json(["addr", "show"], netns=netns):
        out[item["ifname"]] = [
            f"{a['local']}/{a['prefixlen']}" for a in item.get("addr_info", []) if "local" in a
        ]
    return out


def _namespace_view(netns: str, names: list[str]) -> dict:
    links = _links(netns)
    if not links:
        return {}
    rps = commands.read_sys_files(netns, [_rps_path(n) for n in names if n in links])
    return _iface_info(netns, links, _addresses(netns), rps)


def status(prefix: str = DEFAULT_PREFIX) -> dict:
    """Describe the lab ``prefix``: topology, ports, DUT settings and conntrack count."""
    commands.check_environment(("ip",))
    t_ns, d_ns = tester_netns(prefix), dut_netns(prefix)
    state = _load_state(prefix) or {}
    cfg_d = state.get("config")
    has_t, has_d = commands.netns_exists(t_ns), commands.netns_exists(d_ns)
    topology = (cfg_d or {}).get("topology") or ("nat" if has_d else "direct" if has_t else None)
    result: dict = {
        "up": False,
        "prefix": prefix,
        "topology": topology,
        "namespaces": {
            "tester": {"name": t_ns, "exists": has_t},
            **({"dut": {"name": d_ns, "exists": has_d}} if topology != "direct" else {}),
        },
        "config": cfg_d,
        "state_file": state_path(prefix) if state else None,
        "warnings": state.get("warnings", []),
    }
    t_ifs = _namespace_view(t_ns, [P0, P1]) if has_t else {}
    d_ifs = _namespace_view(d_ns, [D0, D1]) if has_d else {}
    dut_ifs = {"dut": d_ifs} if topology in DUT_TOPOLOGIES else {}
    result["interfaces"] = {"tester": t_ifs, **dut_ifs}

    if topology == "direct":
        logical = {P0: (P0_IP, P1_IP, P1_MAC), P1: (P1_IP, P0_IP, P0_MAC)}
    else:
        logical = {P0: (P0_IP, D0_IP, D0_MAC), P1: (P1_IP, D1_IP, D1_MAC)}
    ports = {}
    for name, (ip, gw, gw_mac) in logical.items():
        info = t_ifs.get(name)
        ports[name] = {
            "netns": t_ns,
            "interface": name,
            "mac": info["mac"] if info else (P0_MAC if name == P0 else P1_MAC),
            "ip": ip,
            "network": INSIDE_NET if name == P0 else OUTSIDE_NET,
            "gateway": gw,
            "gateway_mac": gw_mac,
            "side": "inside" if name == P0 else "outside",
            "exists": info is not None,
            "state": info["state"] if info else None,
        }
    result["ports"] = ports

    expected_ok = all(p["exists"] and p["state"] == "UP" for p in ports.values())
    if topology in DUT_TOPOLOGIES:
        expected_ok = expected_ok and all(d_ifs.get(n, {}).get("state") == "UP" for n in (D0, D1))
        result["dut"] = _dut_view(d_ns, cfg_d, has_d, d_ifs)
        result["transport_hosts"] = hosts.describe(prefix) if hosts.exists(prefix) else None
        result["delay_line"] = middlebox.status(prefix, state)
        result["keeper"] = keeper.status(prefix, state)
    result["up"] = bool(has_t and expected_ok and topology)
    return result


#: The lab's settings that a methodology report records under ``lab``.
LAB_REPORT_KEYS = (
    "rate_limit_pps",
    "drop_percent",
    "ct_limit",
    "ct_new_rate",
    "filter_rules",
    "tbf",
    "rps_cpus",
    "nat_ports",
    "delay",
    "loss",
)


def describe_dut(cfg: LabConfig | None) -> dut_settings.DutDescription:
    """What the lab tells :mod:`tgen_tui.dut` about its DUT (``up`` writes it to the DUT's
    description file; ``status`` uses it directly): topology, the impairments, where the
    drop counters and the TBF sit."""
    return dut_settings.DutDescription(
        topology=cfg.topology if cfg else "nat",
        nft_chain=nftables.DROP_CHAIN,
        nft={
            "table": f"ip {nftables.NFT_TABLE}",
            "nat": f"snat to {D1_IP} out of {D1}"
            + (" (random ports)" if cfg and cfg.nat_ports == "random" else ""),
            "nat_ports": cfg.nat_ports if cfg else None,
            "drop_percent": cfg.drop_percent if cfg else None,
            "rate_limit_pps": cfg.rate_limit_pps if cfg else None,
            "ct_limit": cfg.ct_limit if cfg else None,
            "ct_new_rate": cfg.ct_new_rate if cfg else None,
            "filter_rules": cfg.filter_rules if cfg else None,
        },
        tbf_interface=D1,
        tbf={
            "spec": cfg.tbf if cfg else None,
            "max_queue_delay": parse_tbf(cfg.tbf).latency if cfg and cfg.tbf else None,
        },
        lab={k: getattr(cfg, k) for k in LAB_REPORT_KEYS} if cfg else None,
    )


def _dut_view(d_ns: str, cfg_d: dict | None, has_d: bool, d_ifs: dict) -> dict:
    cfg = LabConfig.from_dict(cfg_d) if cfg_d else None
    view: dict = {"netns": d_ns, "inside": D0, "outside": D1, "nat_address": D1_IP}
    if not has_d:  # no DUT namespace: the host's globals, nothing live
        for k in ("conntrack_max", "conntrack_buckets"):
            view[k] = dut_ct.int_or_none(commands.read_global(GLOBALS[k]))
        view["udp_timeout"] = view["udp_stream_timeout"] = view["count"] = None
        view["nft"] = view["tbf"] = None
        return view
    live = dut_settings.live_view(DutChannel(netns=d_ns), describe_dut(cfg))
    view.update(live)  # same keys, same order, plus ip_forward
    try:
        view["count"] = ct.conntrack_count(d_ns)
    except (TgenError, OSError):
        view["count"] = None
    return view
