"""A port's L3 identity as plain data (issue 19): which addresses its responder answers
for and which streams take their MACs from the port and its resolved gateway.

A port with ``ipv4``/``gateway`` (``ipv6``/``gateway6``) answers ARP (Neighbour
Solicitation) for its own address and for every address its streams use: the source
ranges of the streams it sends and the destination ranges of the streams expected on it
(``rx_port``). The ranges stay ranges (lo, hi as ints), so millions of addresses cost two
integers; the worker's responder tests membership with numpy.
"""

from __future__ import annotations

from tgen_tui.profiles import models as m


def eth_auto(s: m.Stream, port: m.Port) -> bool:
    """True when ``s`` leaves out ``eth`` on a port with a gateway of its family."""
    if s.eth is not None:
        return False
    return (port.gateway if s.ipv4 is not None else port.gateway6) is not None


def eth_auto_replay(s: m.Stream, port: m.Port) -> bool:
    """A pcap: stream without ``eth`` on a port with a gateway: the port's MAC and the
    gateway's replace the captured ones (the DUT accepts only frames to its own MAC)."""
    return s.eth is None and (port.gateway is not None or port.gateway6 is not None)


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def responder_ranges(
    profile: m.Profile, name: str
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
    """(IPv4 ranges, IPv6 ranges) the port ``name`` answers for ((), ()) when it has no L3
    identity or ``respond: false``."""
    port = profile.ports[name]
    if not port.respond or (port.ipv4 is None and port.ipv6 is None):
        return (), ()
    v4: list[tuple[int, int]] = []
    v6: list[tuple[int, int]] = []
    if port.ipv4 is not None:
        a = int(port.ipv4.ip)
        v4.append((a, a))
    if port.ipv6 is not None:
        a = int(port.ipv6.ip)
        v6.append((a, a))
    for s in profile.streams:
        if not s.enabled or s.pcap is not None:
            continue
        rngs = []
        if s.port == name:
            rngs.append(s.ipv4.src if s.ipv4 is not None else s.ipv6.src if s.ipv6 else None)
        if s.rx_port == name:
            rngs.append(s.ipv4.dst if s.ipv4 is not None else s.ipv6.dst if s.ipv6 else None)
        for r in rngs:
            if r is None:
                continue
            target = v4 if s.ipv4 is not None else v6
            target.append((int(r.min), int(r.max)))
    gws = {int(g) for g in (port.gateway, port.gateway6) if g is not None}
    v4 = [r for r in v4 if not (r[0] == r[1] and r[0] in gws)]
    v6 = [r for r in v6 if not (r[0] == r[1] and r[0] in gws)]
    return _merge(v4), _merge(v6)


__all__ = ["eth_auto", "responder_ranges"]
