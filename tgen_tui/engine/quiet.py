"""A quiet tester kernel: while tgen owns a port, the kernel's own IP stack neither sees
what arrives on it nor sends anything out of it; only tgen's workers and responder speak
for the port's addresses.

Per port, one nftables table per family in the port's namespace, named after the
interface (``tgen_quiet_p0``; the port lock makes one tgen per port):

- ``netdev`` ingress, ``drop``: runs after the packet taps (the workers' rings, the
  responder, captures all see every frame first) and before the IP stack, so a frame that
  arrives after the responder stopped can no longer make the kernel answer it (ICMPv6
  "unreachable route" for the port's own address was seen on a hand-built router);
- ``inet`` output, ``oifname`` drop: whatever the kernel would send (DAD and router
  solicitations from a link-local address, MLD reports, ICMP errors) never leaves;
  packet sockets do not pass this hook, so tgen's own frames are untouched;
- ``arp`` output, the same for the kernel's ARP.

The kernel's own IPv6 timers are stopped too (the tables drop what they send, but the
kernel counts it first): ``router_solicitations`` 0, ``accept_ra`` 0, ``dad_transmits``
0 on the port, their old values put back when the engine closes (which sends nothing).

Each table is made in one ``nft -f`` transaction when the engine opens its ports and
deleted when it closes; a table left by a killed run is replaced by the next one (the
port stays quiet meanwhile). ``nft`` missing or refusing is a notice, not a failure.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable

PREFIX = "tgen_quiet_"


def table_name(ifname: str) -> str:
    return PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", ifname)


def ruleset(ifname: str) -> str:
    """The three tables of one port, replacing any left from before (one transaction)."""
    t = table_name(ifname)
    q = '"' + ifname.replace('"', "") + '"'
    out = []
    for fam in ("netdev", "inet", "arp"):
        out += [f"table {fam} {t}", f"delete table {fam} {t}"]
    out += [
        f"table netdev {t} {{",
        f"  chain ingress {{ type filter hook ingress device {q} priority -500; policy accept;",
        '    counter drop comment "tgen owns this port: the kernel IP stack sees nothing"',
        "  }",
        "}",
        f"table inet {t} {{",
        "  chain out { type filter hook output priority -300; policy accept;",
        f'    oifname {q} counter drop comment "the tester kernel stays silent"',
        "  }",
        "}",
        f"table arp {t} {{",
        "  chain out { type filter hook output priority -300; policy accept;",
        f"    oifname {q} counter drop",
        "  }",
        "}",
        "",
    ]
    return "\n".join(out)


def _nft(netns: str | None, text: str) -> subprocess.CompletedProcess:
    argv = ["nft", "-f", "-"]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    return subprocess.run(argv, input=text, capture_output=True, text=True, check=False)


SYSCTLS = ("router_solicitations", "accept_ra", "dad_transmits")


def _sysctl_path(ifname: str, key: str) -> str:
    return f"/proc/sys/net/ipv6/conf/{ifname}/{key}"


def _swap_sysctls(ifname: str, values: dict[str, str] | None) -> dict[str, str]:
    """Set the port's IPv6 timers to 0 (``values`` None) or back; the values before."""
    old = {}
    for key in SYSCTLS:
        path = _sysctl_path(ifname, key)
        try:
            with open(path) as f:
                old[key] = f.read().strip()
            with open(path, "w") as f:
                f.write((values or {}).get(key, "0") if values is not None else "0")
        except OSError:  # IPv6 off on the port, or no such key: nothing to stop
            continue
    return old


def _in_ns(netns: str | None, fn, *args):
    if not netns:
        return fn(*args)
    from tgen_tui.worker.netns import in_thread_netns

    return in_thread_netns(netns, fn, *args)


def _by_ns(ports: Iterable[tuple]) -> dict[str | None, list]:
    out: dict[str | None, list] = {}
    for p in ports:
        out.setdefault(p[0], []).append(p)
    return out


def silence(ports: Iterable[tuple[str | None, str]], notice: Callable[[str], None]) -> list:
    """Quiet every (netns, interface), one ``nft`` per namespace; what was done (for
    :func:`restore`)."""
    done: list[tuple] = []
    for netns, group in _by_ns(ports).items():
        names = [ifname for _, ifname in group]
        try:
            cp = _nft(netns, "".join(ruleset(n) for n in names))
        except FileNotFoundError:
            notice("nft is not installed: the tester's kernel may answer on the ports")
            return done
        if cp.returncode != 0:
            msg = (cp.stderr.strip().splitlines() or ["nft failed"])[-1]
            notice(f"cannot silence the kernel on {', '.join(names)}: {msg}")
            continue
        try:
            olds = _in_ns(netns, lambda ns=names: [_swap_sysctls(n, None) for n in ns])
        except OSError:
            olds = [{} for _ in names]
        done += [(netns, n, old) for n, old in zip(names, olds, strict=True)]
    return done


def restore(ports: Iterable[tuple]) -> None:
    """The sysctls back, the tables deleted (the kernel's stack has the port back)."""
    for netns, group in _by_ns(ports).items():
        try:
            _in_ns(
                netns, lambda g=group: [_swap_sysctls(p[1], p[2]) for p in g if len(p) > 2 and p[2]]
            )
        except OSError:
            pass
        text = "".join(
            f"table {f} {table_name(p[1])}\ndelete table {f} {table_name(p[1])}\n"
            for p in group
            for f in ("netdev", "inet", "arp")
        )
        try:
            _nft(netns, text)
        except FileNotFoundError:
            return


def is_quiet(netns: str | None, ifname: str) -> bool:
    """Whether the port's tables are in place (tgen preflight, tests)."""
    argv = ["nft", "list", "table", "netdev", table_name(ifname)]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    try:
        return subprocess.run(argv, capture_output=True, check=False).returncode == 0
    except FileNotFoundError:
        return False


__all__ = ["is_quiet", "restore", "ruleset", "silence", "table_name"]
