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

The kernel's own IPv6 timers are stopped first (the tables drop what they send, but the
kernel counts it first): ``router_solicitations`` 0, ``accept_ra`` 0, ``dad_transmits``
0 on the port, their old values put back when the engine closes (which sends nothing).
Every command runs through trio (``trio.run_process``): the engine starts no process
outside it.

Each table is made in one ``nft -f`` transaction when the engine opens its ports and
deleted when it closes; a table left by a killed run is replaced by the next one (the
port stays quiet meanwhile). ``nft`` missing or refusing is a notice, not a failure.
"""

from __future__ import annotations

import re
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


async def _run(netns: str | None, argv: list[str], text: str | None = None):
    """``argv`` in ``netns`` (``ip netns exec``), through trio; its CompletedProcess."""
    import trio

    full = ["ip", "netns", "exec", netns, *argv] if netns else argv
    return await trio.run_process(
        full, stdin=text.encode() if text is not None else b"", capture_stdout=True,
        capture_stderr=True, check=False,
    )  # fmt: skip


SYSCTLS = ("router_solicitations", "accept_ra", "dad_transmits")


async def _sysctls(netns: str | None, ifnames: list[str], values: list[dict] | None) -> list[dict]:
    """Set the ports' IPv6 timers to 0 (``values`` None) or back; the values before."""
    keys = [f"net.ipv6.conf.{n}.{k}" for n in ifnames for k in SYSCTLS]
    cp = await _run(netns, ["sysctl", "-e", *keys])
    old: dict[str, str] = {}
    for ln in cp.stdout.decode(errors="replace").splitlines():
        k, _, v = ln.partition(" = ")
        if v:
            old[k.strip()] = v.strip()
    if values is None:
        sets = [f"{k}=0" for k in old]
    else:
        sets = [
            f"net.ipv6.conf.{n}.{k}={v}"
            for n, d in zip(ifnames, values, strict=True)
            for k, v in d.items()
        ]
    if sets:
        await _run(netns, ["sysctl", "-q", "-e", "-w", *sets])
    return [
        {k: old[f"net.ipv6.conf.{n}.{k}"] for k in SYSCTLS if f"net.ipv6.conf.{n}.{k}" in old}
        for n in ifnames
    ]


def _by_ns(ports: Iterable[tuple]) -> dict[str | None, list]:
    out: dict[str | None, list] = {}
    for p in ports:
        out.setdefault(p[0], []).append(p)
    return out


async def silence(ports: Iterable[tuple[str | None, str]], notice: Callable[[str], None]) -> list:
    """Quiet every (netns, interface), one ``nft`` per namespace; what was done (for
    :func:`restore`)."""
    done: list[tuple] = []
    for netns, group in _by_ns(ports).items():
        names = [ifname for _, ifname in group]
        # the timers first: a router solicitation due between the tables and the sysctls
        # would be counted by the kernel (then dropped by the table), seen in one CI run
        try:
            olds = await _sysctls(netns, names, None)
        except OSError:
            olds = [{} for _ in names]
        done += [(netns, n, old) for n, old in zip(names, olds, strict=True)]
        try:
            cp = await _run(netns, ["nft", "-f", "-"], "".join(ruleset(n) for n in names))
        except OSError:
            notice("nft is not installed: the tester's kernel may answer on the ports")
            return done
        if cp.returncode != 0:
            msg = (cp.stderr.decode(errors="replace").strip().splitlines() or ["nft failed"])[-1]
            notice(f"cannot silence the kernel on {', '.join(names)}: {msg}")
    return done


async def restore(ports: Iterable[tuple]) -> None:
    """The sysctls back, the tables deleted (the kernel's stack has the port back)."""
    for netns, group in _by_ns(ports).items():
        with_old = [p for p in group if len(p) > 2 and p[2]]
        try:
            if with_old:
                await _sysctls(netns, [p[1] for p in with_old], [p[2] for p in with_old])
            text = "".join(
                f"table {f} {table_name(p[1])}\ndelete table {f} {table_name(p[1])}\n"
                for p in group
                for f in ("netdev", "inet", "arp")
            )
            await _run(netns, ["nft", "-f", "-"], text)
        except OSError:
            continue


__all__ = ["restore", "ruleset", "silence", "table_name"]
