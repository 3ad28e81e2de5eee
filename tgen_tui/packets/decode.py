"""One-line summaries of captured frames (scapy decodes; the capture views and
``tgen capture`` show a few frames a second, never every frame)."""

from __future__ import annotations


def summary(data: bytes) -> str:
    """The frame in one line, as decoded: ``198.19.0.1:10000 > 198.19.0.2:7 udp``
    (``vlan 35 ...``, ``arp who-has 198.18.0.1 tell 198.18.0.2``, ``icmp6 type 135``)."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    try:
        e = Ether(data)
    except Exception:  # noqa: BLE001 - a frame scapy cannot read is still listed
        return f"{len(data)} bytes, not decodable"
    tags = []
    layer = e.payload
    while isinstance(layer, Dot1Q):
        tags.append(f"vlan {layer.vlan}")
        layer = layer.payload
    pre = " ".join(tags) + " " if tags else ""
    if ARP in e:
        a = e[ARP]
        if a.op == 1:
            return f"{pre}arp who-has {a.pdst} tell {a.psrc}"
        return f"{pre}arp {a.psrc} is-at {a.hwsrc}"
    ip = e[IP] if IP in e else e[IPv6] if IPv6 in e else None
    if ip is None:
        return f"{pre}{e.src} > {e.dst} type 0x{int(e.type):04x}"
    for proto, name in ((UDP, "udp"), (TCP, "tcp")):
        if proto in e:
            l4 = e[proto]
            flags = f" [{l4.sprintf('%TCP.flags%')}]" if proto is TCP else ""
            return f"{pre}{ip.src}:{l4.sport} > {ip.dst}:{l4.dport} {name}{flags}"
    if ICMP in e:
        return f"{pre}{ip.src} > {ip.dst} icmp type {e[ICMP].type}"
    nh = getattr(ip, "nh", None) if IPv6 in e else getattr(ip, "proto", None)
    if IPv6 in e and nh == 58:
        head = bytes(ip.payload)[:1]
        return f"{pre}{ip.src} > {ip.dst} icmp6 type {head[0] if head else '?'}"
    return f"{pre}{ip.src} > {ip.dst} proto {nh}"
