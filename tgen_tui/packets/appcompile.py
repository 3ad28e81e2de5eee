"""A ``transport:`` entry's ``app:``/``load:``/``clients:`` to an :class:`AppProgram`."""

from __future__ import annotations

import ipaddress
import zlib

from tgen_tui.packets.appprogram import DEFAULT_REQUEST, DEFAULT_RESPONSE, AppProgram

#: the server port of an app flow that gives no dst_port
APP_PORTS = {"http": 80, "dns": 53}


def app_program(
    t, client_ip: str, rate_scale: float = 1.0, share: tuple[int, int] = (0, 1)
) -> AppProgram | None:
    """The entry's request/response program (None: a bulk flow); ``client_ip``: the
    sending host's address (the one client when ``clients`` gives no first address);
    ``rate_scale`` scales a rate load (as ``tgen run --rate-scale`` scales frame streams);
    ``share`` (k, n): flow k of the entry's n (``parallel``) takes 1/n of the load and
    its own slice of the clients."""
    if t.app is None or t.load is None:
        return None
    a, ld = t.app, t.load
    mode = ld.mode
    target = {"cps": ld.connections_per_s, "concurrent": ld.concurrent}.get(
        mode, ld.transactions_per_s
    )
    clients = t.clients
    k, n = share
    count = clients.count if clients else 1
    lo, hi = count * k // n, count * (k + 1) // n
    first = clients.first if clients and clients.first else client_ip
    first = str(ipaddress.IPv4Address(int(ipaddress.IPv4Address(first)) + lo))
    return AppProgram(
        kind=a.kind,
        request=a.request or DEFAULT_REQUEST,
        response=a.response_mean or DEFAULT_RESPONSE,
        per_connection=a.per_connection,
        close_rst=a.close == "rst",
        think_s=a.think_mean,
        timeout_s=float(a.timeout),
        mode=mode,
        target=_share(float(target or 0), k, n, mode, rate_scale),
        ramp_s=float(ld.ramp),
        clients_first=first,
        clients_count=hi - lo,
        think_cycle=think_cycle(a.think, f"{t.name}/{k}"),
        response_cycle=response_cycle(a.response, f"{t.name}/{k}/response"),
    )


THINK_CYCLE = 4096


def think_cycle(think, key: str) -> tuple[float, ...]:
    """A law's think times: one cycle of THINK_CYCLE draws seeded by the flow's name,
    clipped to the law's min..max (s); () for a constant."""
    if isinstance(think, int | float):
        return ()
    import numpy as np

    from tgen_tui.profiles.sizelaw import draw

    x = draw(think.dist, float(think.mean), think.law_param, THINK_CYCLE, zlib.crc32(key.encode()))
    return tuple(float(v) for v in np.clip(x, float(think.min), think.hi))


def _share(target: float, k: int, n: int, mode: str, rate_scale: float) -> float:
    """Flow k's part of the entry's load: 1/n of a rate (times ``rate_scale``); of a
    concurrent target a whole number, the remainder spread (20,000 / 3: 6,666, 6,667,
    6,667)."""
    if mode == "concurrent":
        return float(int(target) * (k + 1) // n - int(target) * k // n)
    return target * rate_scale / n


def app_port(t, default: int) -> int:
    """An app flow's server port: dst_port, else its kind's (http 80, dns 53), else ``default``."""
    if t.dst_port:
        return int(t.dst_port)
    return APP_PORTS.get(t.app.kind, default) if t.app is not None else default


def response_cycle(response, key: str) -> tuple[int, ...]:
    """A law's response sizes: one cycle of THINK_CYCLE draws, whole bytes clipped to the
    law's min..max; () for a constant (or none)."""
    if response is None or isinstance(response, int):
        return ()
    import numpy as np

    from tgen_tui.profiles.sizelaw import draw

    x = draw(response.dist, float(response.mean), response.law_param, THINK_CYCLE,
             zlib.crc32(key.encode()))  # fmt: skip
    return tuple(int(v) for v in np.clip(np.rint(x), response.min, response.max))


__all__ = ["APP_PORTS", "THINK_CYCLE", "app_port", "app_program", "response_cycle", "think_cycle"]
