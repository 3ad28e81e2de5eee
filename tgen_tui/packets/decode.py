"""One-line summaries of captured frames (scapy decodes; the capture views and
``tgen capture`` show a few frames a second, never every frame)."""

from __future__ import annotations


def summary(data: bytes) -> str:
    """``198.19.0.1:10000 > 198.19.0.2:7 udp`` (with ``vlan 35``, ``arp who-has``...)."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    try:
        e = Ether(data)
    except Exception:  # noqa: BLE001 - a frame scapy cannot read is still shown
        return f"{len(data)} bytes, undecodable"
    tags = []
    layer = e.payload
    while isinstance(layer, Dot1Q):
        tags.append(f"vlan {layer.vlan}")
        layer = layer.payload
    pre = " ".join(tags) + " " if tags else ""
    if ARP in e:
        a = e[ARP]
        op = {1: "who-has", 2: "is-at"}.get(int(a.op), f"op {a.op}")
        return (
            f"{pre}arp {op} {a.pdst} tell {a.psrc}"
            if a.op == 1
            else f"{pre}arp {a.psrc} is-at {a.hwsrc}"
        )
    ip = e[IP] if IP in e else e[IPv6] if IPv6 in e else None
    if ip is None:
        return f"{pre}{e.src} > {e.dst} type 0x{e.type:04x}"
    for proto, name in ((UDP, "udp"), (TCP, "tcp")):
        if proto in e:
            l4 = e[proto]
            flags = f" [{l4.sprintf('%TCP.flags%')}]" if proto is TCP else ""
            return f"{pre}{ip.src}:{l4.sport} > {ip.dst}:{l4.dport} {name}{flags}"
    if ICMP in e:
        return f"{pre}{ip.src} > {ip.dst} icmp type {e[ICMP].type}"
    nh = getattr(ip, "proto", getattr(ip, "nh", "?"))
    return f"{pre}{ip.src} > {ip.dst} proto {nh}"
