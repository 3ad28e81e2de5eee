"""RFC 9693 phase 2: the Responder replies to the tuples phase 1 created.

RFC 9693's Responder learns each translated 4-tuple from the frames it receives and
replies only to learned ones. tgen's worker cannot learn yet (no per-frame hook on its
receive ring), so this Responder **predicts** the translated tuples instead: with a
port-preserving NAT (the lab's ``snat to 198.19.0.1`` keeps a free source port), the
tuple of initiator frame (sport, dport) arrives as (public_ip:sport -> responder:dport),
so the reply goes from responder:dport to public_ip:sport. When phase 1 sent the whole
unique product (N = the port space), every pair in the two ranges is a live entry, so the
Responder can choose them fixed, increasing, decreasing or random. A NAT that rewrites
ports is not hidden: its entries do not match, the replies are dropped, and phase 2 fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from tgen_tui.diagnostics import BadInput

ORDERS = ("fixed", "increasing", "decreasing", "random")
_MODE = {"increasing": "inc", "decreasing": "dec", "random": "random"}


@dataclass(frozen=True)
class ResponderSpec:
    port: str  # tester port on the public side
    src_mac: str
    dst_mac: str  # the DUT's public-side MAC
    src_ip: str  # the Responder's address (the Initiator's destination)
    public_ip: str  # the NAT's public address (translated source)


def lab_responder(profile, port: str, public_ip: str | None = None) -> ResponderSpec:
    """The lab's Responder: p1's MAC, the DUT's d1 MAC, and the DUT's public address."""
    from tgen_tui.lab.naming import D1_IP, D1_MAC, P1_MAC

    init = profile.streams[0]
    return ResponderSpec(
        port=port,
        src_mac=P1_MAC,
        dst_mac=D1_MAC,
        src_ip=str(getattr(init.ipv4.dst, "min", init.ipv4.dst)),
        public_ip=public_ip or D1_IP,
    )


def _field(spec: dict, order: str) -> dict | int:
    lo, hi = spec.get("min"), spec.get("max")
    if lo is None:
        return spec["fixed"]
    if order == "fixed" or spec.get("mode") == "fixed" or lo == hi:
        return int(lo)
    return {"min": int(lo), "max": int(hi), "mode": _MODE[order]}


def responder_profile(profile, spec: ResponderSpec, order: str):
    """A copy of ``profile`` whose only stream is the Responder's reply stream."""
    from tgen_tui.methodology.run import _revalidate

    if order not in ORDERS:
        raise BadInput(f"--responder-order must be one of {', '.join(ORDERS)}")

    def change(d: dict) -> None:
        init = d["streams"][0]
        udp = init.get("udp")
        if not udp:
            raise BadInput("phase 2 needs a UDP Initiator stream")
        reply = {
            "name": "responder",
            "port": spec.port,
            "rx_port": init["port"],
            "eth": {"src": spec.src_mac, "dst": spec.dst_mac},
            "ipv4": {"src": spec.src_ip, "dst": spec.public_ip},
            "udp": {
                "src_port": _field(_as_dict(udp["dst_port"]), order),
                "dst_port": _field(_as_dict(udp["src_port"]), order),
            },
            "size": init.get("size", 64),
            "rate": {"pps": 1000},
        }
        d["streams"] = [reply]

    return _revalidate(profile, change)


def _as_dict(v) -> dict:
    if isinstance(v, dict):
        return v
    return {"fixed": v}
