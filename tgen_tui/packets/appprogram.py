"""A request/response flow as plain data, and the bytes its client and server exchange.

:class:`AppProgram` rides on a :class:`~tgen_tui.packets.flowprogram.FlowProgram`
(``app``) to the flow worker (:mod:`tgen_tui.worker.appflows`), which builds the request
and response once (:func:`messages`) and counts transaction boundaries by their lengths,
so neither side parses what it reads.

Import-light (the standard library): the flow worker reads these.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

DEFAULT_REQUEST = 200
DEFAULT_RESPONSE = 2000
DNS_NAME = "www.tgen.test"


@dataclass(frozen=True)
class AppProgram:
    """What each connection does and how many there are (see profiles/appflow.py)."""

    kind: str  # request-response | http | dns
    request: int  # request bytes (http/dns: their own sizes, from messages())
    response: int  # response bytes (http: the body)
    per_connection: int
    close_rst: bool
    think_s: float
    timeout_s: float
    mode: str  # cps | concurrent | tps
    target: float  # connections/s, connections, or transactions/s
    ramp_s: float
    clients_first: str  # the first client address
    clients_count: int
    think_cycle: tuple[float, ...] = ()  # drawn think times (s), used in turn; () = think_s
    response_cycle: tuple[int, ...] = ()  # drawn response sizes, used in turn; () = response

    def client_addresses(self) -> list[str]:
        first = int(ipaddress.IPv4Address(self.clients_first))
        return [str(ipaddress.IPv4Address(first + k)) for k in range(self.clients_count)]

    def target_at(self, rel_s: float) -> float:
        """The load asked at ``rel_s`` s after the start (the ramp rises linearly)."""
        if self.ramp_s <= 0 or rel_s >= self.ramp_s:
            return self.target
        return self.target * max(0.0, rel_s) / self.ramp_s

    def conn_rate(self) -> float:
        """New connections per second at full load (cps, or tps / per_connection)."""
        if self.mode == "tps":
            return self.target / self.per_connection
        return self.target

    def due_connections(self, rel_s: float) -> int:
        """Connections due by ``rel_s`` s after the start (rate modes): the rate's integral
        over the ramp, then linear; connection *i* is due when this passes *i*."""
        r = self.conn_rate()
        if rel_s <= 0:
            return 0
        if self.ramp_s > 0 and rel_s < self.ramp_s:
            return int(r * rel_s * rel_s / (2.0 * self.ramp_s))
        return int(r * (rel_s - self.ramp_s / 2.0))


def http_request(host: str, body: int | str) -> bytes:
    return (
        f"GET /tgen/{body} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tgen-tui\r\n"
        "Accept: */*\r\nConnection: keep-alive\r\n\r\n"
    ).encode("ascii")


def http_head(body: int) -> bytes:
    return (
        "HTTP/1.1 200 OK\r\nServer: tgen-tui\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {body}\r\n\r\n"
    ).encode("ascii")


def http_response(body: int) -> bytes:
    return http_head(body) + b"x" * body


#: a drawn response's size in its request: (kind -> (first, end) bytes, ASCII digits)
SIZE_FIELD = {"http": (10, 17), "request-response": (0, 8)}  # http: after "GET /tgen/"


def sized_request(app: AppProgram, server_ip: str, size: int) -> bytes:
    """The request asking for a ``size``-byte response (drawn sizes): the same length
    whatever the size (http: the path's 7 digits; request-response: 8 leading digits)."""
    if app.kind == "http":
        return http_request(server_ip, f"{size:07d}")
    return b"%08d" % size + b"q" * (app.request - 8)


def sized_response(app: AppProgram, size: int) -> bytes:
    return http_response(size) if app.kind == "http" else b"r" * size


def response_length(app: AppProgram, size: int) -> int:
    return len(http_head(size)) + size if app.kind == "http" else size


def size_asked(app: AppProgram, head: bytes) -> int:
    """The response size a request asks for, from its first bytes (SIZE_FIELD)."""
    a, b = SIZE_FIELD[app.kind]
    return int(head[a:b])


def _qname(name: str) -> bytes:
    return b"".join(bytes([len(p)]) + p.encode("ascii") for p in name.split(".")) + b"\0"


def dns_query(qid: int = 0x7467) -> bytes:
    """A DNS query for ``DNS_NAME`` A IN (RFC 1035 header, one question, RD set)."""
    return struct.pack("!6H", qid, 0x0100, 1, 0, 0, 0) + _qname(DNS_NAME) + struct.pack("!2H", 1, 1)


def dns_answer(address: str, qid: int = 0x7467) -> bytes:
    """Its answer: the question and one A record (a name pointer to the question, TTL 60)."""
    head = struct.pack("!6H", qid, 0x8180, 1, 1, 0, 0) + _qname(DNS_NAME) + struct.pack("!2H", 1, 1)
    rr = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + ipaddress.IPv4Address(address).packed
    return head + rr


def messages(app: AppProgram, server_ip: str) -> tuple[bytes, bytes]:
    """(request, response) bytes of ``app`` against a server at ``server_ip``."""
    if app.response_cycle:  # drawn sizes: the first one's (each request names its own)
        size = app.response_cycle[0]
        return sized_request(app, server_ip, size), sized_response(app, size)
    if app.kind == "http":
        return http_request(server_ip, app.response), http_response(app.response)
    if app.kind == "dns":
        return dns_query(), dns_answer(server_ip)
    return b"q" * app.request, b"r" * app.response


def app_from_dict(d: dict | None) -> AppProgram | None:
    return None if d is None else AppProgram(**d)


__all__ = [
    "DEFAULT_REQUEST",
    "DEFAULT_RESPONSE",
    "SIZE_FIELD",
    "AppProgram",
    "app_from_dict",
    "dns_answer",
    "dns_query",
    "http_request",
    "http_response",
    "messages",
    "response_length",
    "size_asked",
    "sized_request",
    "sized_response",
]
