"""Request/response flows: a ``transport:`` entry with ``app:``, ``load:`` and ``clients:``.

Short connections through the DUT, as a firewall or NAT is judged (TRex ASTF, BNG
Blaster's http-client): a client connects from one of ``clients.count`` addresses
(round robin), sends ``request`` bytes, reads ``response`` bytes, repeats that
``per_connection`` times, and closes (FIN or RST); the server side, in the receiving
host's namespace, accepts and answers. UDP does the same by datagram (one request, one
response; a lost one times out). The load is a connection rate, a number of connections
kept open (replacing those that end), or a transaction rate, with an optional linear ramp::

    transport:
      - name: web
        port: p0
        rx_port: p1
        protocol: tcp
        app: {kind: http, response: 2000, per_connection: 1}
        load: {connections_per_s: 2000, ramp: 1s}
        clients: {count: 1000, first: 198.18.104.1}

``kind: http`` is an HTTP/1.1 GET with headers and a response with headers and a body of
``response`` bytes; ``kind: dns`` (UDP) a DNS query and its answer; ``kind:
request-response`` plain ``request``/``response`` bytes. ``parallel: N`` splits the entry
over N flow workers (``NAME.1`` ... ``NAME.N``), each with 1/N of the load and of the
clients and its own server socket on the same port (SO_REUSEPORT: the kernel spreads the
connections over them), for a load one process (its CPU, its file descriptors) cannot hold.

``think`` is a constant (``2s``) or drawn from a law with a mean, as frame sizes are
(profiles/sizelaw.py): ``think: {dist: exponential, mean: 2s}``, ``{dist: lognormal,
mean: 500ms, param: 0.8, max: 5s}``: one seeded cycle of 4,096 draws, clipped to
``min..max`` (default ``0 .. 20 x mean``), each transaction's pause the cycle's next.
``response`` (TCP) may be a law the same way (bytes, ``min`` 1, ``max`` 1 MiB): each
request names the size it wants (http: the path ``/tgen/NNNNNNN``; request-response: its
first 8 bytes, ASCII digits), and the server answers that.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, field_validator, model_validator

from tgen_tui.profiles.base import Seconds, Strict
from tgen_tui.profiles.lawrules import law_param, law_problem

MAX_APP_BYTES = 1 << 20
MAX_CLIENTS = 65536
APP_KINDS = ("request-response", "http", "dns")


class ThinkLaw(Strict):
    """Think times drawn from a law with a mean (seconds), clipped to ``min..max``."""

    dist: Literal["exponential", "normal", "lognormal", "gamma", "weibull", "pareto"]
    mean: Seconds = Field(description="Mean pause, e.g. 2s or 500ms")
    param: float | None = Field(
        None,
        gt=0,
        le=100,
        description="normal: sd as a fraction of the mean (0.25); lognormal: sigma of "
        "ln(time) (0.5); gamma, weibull, pareto: the shape (2, 1.5, 2.5; pareto > 1)",
    )
    min: Seconds = Field(0.0, description="Shortest pause (default 0)")
    max: Seconds | None = Field(None, description="Longest pause (default 20 x the mean)")

    @model_validator(mode="after")
    def _rules(self):
        if self.mean <= 0:
            raise ValueError("mean: must be above 0")
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min:g} s) must be ≤ max ({self.max:g} s)")
        problem = law_problem(self.dist, self.param)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def law_param(self) -> float:
        return law_param(self.dist, self.param)

    @property
    def hi(self) -> float:
        return self.max if self.max is not None else 20.0 * self.mean


def _think(v: Any) -> Any:
    """A duration (``2s``, ``0.5``) as seconds; a law (a mapping) as it is."""
    from tgen_tui.profiles.units import parse_duration

    if isinstance(v, dict | ThinkLaw):
        return v
    return parse_duration(v) if isinstance(v, str | int | float) else v


class ResponseLaw(Strict):
    """Response sizes (bytes; http: the body) drawn from a law with a mean, clipped to
    ``min..max``; each request names the size it wants (http: in its path, fixed width;
    request-response: its first 8 bytes), so the server needs no table of its own."""

    dist: Literal["exponential", "normal", "lognormal", "gamma", "weibull", "pareto"]
    mean: float = Field(gt=0, le=MAX_APP_BYTES, description="Mean response bytes")
    param: float | None = Field(
        None,
        gt=0,
        le=100,
        description="normal: sd as a fraction of the mean (0.25); lognormal: sigma of "
        "ln(size) (0.5); gamma, weibull, pareto: the shape (2, 1.5, 2.5; pareto > 1)",
    )
    min: int = Field(1, ge=1, le=MAX_APP_BYTES, description="Smallest response (default 1)")
    max: int = Field(MAX_APP_BYTES, ge=1, le=MAX_APP_BYTES, description="Largest (1 MiB)")

    @model_validator(mode="after")
    def _rules(self):
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be ≤ max ({self.max})")
        problem = law_problem(self.dist, self.param)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def law_param(self) -> float:
        return law_param(self.dist, self.param)


def _law_tag(v: Any) -> str:
    return "law" if isinstance(v, dict | ResponseLaw) else "constant"


def _think_tag(v: Any) -> str:
    return "law" if isinstance(v, dict | ThinkLaw) else "constant"


class App(Strict):
    """What each connection does: request, response, how many, how it ends."""

    kind: Literal["request-response", "http", "dns"] = Field(
        "request-response",
        description="request-response (plain bytes), http (an HTTP/1.1 GET and a response "
        "with headers and a body; TCP) or dns (a DNS query and its answer; UDP)",
    )
    request: int | None = Field(
        None, ge=1, le=MAX_APP_BYTES, description="Request bytes (default 200; http: the GET)"
    )
    response: (
        Annotated[
            Annotated[Annotated[int, Field(ge=1, le=MAX_APP_BYTES)], Tag("constant")]
            | Annotated[ResponseLaw, Tag("law")],
            Discriminator(_law_tag),
        ]
        | None
    ) = Field(
        None,
        description="Response bytes (default 2000; http: the body, after the headers), or "
        "a law {dist, mean, param, min, max} (TCP; each request names its size)",
    )
    per_connection: int = Field(
        1, ge=1, le=1_000_000, description="Transactions per connection before it closes"
    )
    close: Literal["fin", "rst"] = Field("fin", description="How the client ends (TCP)")
    think: Annotated[
        Annotated[float, Tag("constant")] | Annotated[ThinkLaw, Tag("law")],
        Discriminator(_think_tag),
        BeforeValidator(_think),
    ] = Field(
        0.0,
        description="Pause between a response and the next request: a duration (2s), or a "
        "law {dist: exponential|normal|lognormal|gamma|weibull|pareto, mean: 2s, param, "
        "min, max}",
    )
    timeout: Seconds = Field(
        3.0, description="A connect or a response that takes longer counts as timed out"
    )

    @model_validator(mode="after")
    def _rules(self):
        if self.kind == "dns" and (self.request is not None or self.response is not None):
            which = "request" if self.request is not None else "response"
            raise ValueError(f"{which}: a dns query and its answer have their own sizes")
        if self.kind == "http" and self.request is not None:
            raise ValueError("request: an http GET has its own size (give the response body)")
        if isinstance(self.response, ResponseLaw) and (self.request or 200) < 8:
            raise ValueError("request: a drawn response size needs a request of 8 bytes or more")
        if self.timeout <= 0:
            raise ValueError("timeout: must be above 0")
        if isinstance(self.think, float) and self.think < 0:
            raise ValueError("think: must not be negative")
        return self

    @property
    def response_mean(self) -> int | None:
        """The response bytes: the constant, or the law's asked mean (rounded)."""
        r = self.response
        return round(r.mean) if isinstance(r, ResponseLaw) else r

    @property
    def think_mean(self) -> float:
        """The mean pause (s): the constant, or the law's asked mean."""
        return float(self.think.mean if isinstance(self.think, ThinkLaw) else self.think)


class Load(Strict):
    """The load target: one of a connection rate, open connections, a transaction rate."""

    connections_per_s: float | None = Field(
        None, gt=0, le=1e6, description="New connections per second (paced to due times)"
    )
    concurrent: int | None = Field(
        None, ge=1, le=1_000_000, description="Connections kept open (those that end replaced)"
    )
    transactions_per_s: float | None = Field(
        None, gt=0, le=1e7, description="Transactions per second (per_connection each)"
    )
    ramp: Seconds = Field(0.0, description="Linear ramp from 0 to the target over this time")

    @model_validator(mode="after")
    def _one(self):
        given = [
            k for k in ("connections_per_s", "concurrent", "transactions_per_s") if getattr(self, k)
        ]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of connections_per_s, concurrent, transactions_per_s"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self

    @property
    def mode(self) -> str:
        if self.connections_per_s:
            return "cps"
        return "concurrent" if self.concurrent else "tps"


class Clients(Strict):
    """Source addresses on the client host (a NAT sees that many inside hosts)."""

    count: int = Field(1, ge=1, le=MAX_CLIENTS, description="Client addresses, round robin")
    first: str | None = Field(
        None,
        description="The first address (the others follow it); default: the host's ipv4. "
        "They must be local on the client host and routed back to it by the DUT "
        "(the lab's h0 has 198.18.104.0/22, NATed toward h1)",
    )

    @field_validator("first")
    @classmethod
    def _addr(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 address") from None
        return v

    @model_validator(mode="after")
    def _range(self):
        if self.first is not None:
            last = int(ipaddress.IPv4Address(self.first)) + self.count - 1
            if last > 0xFFFFFFFF:
                raise ValueError(f"count: {self.count} addresses from {self.first} run past")
        elif self.count > 1:
            raise ValueError(
                f"first: {self.count} clients need a first address (the lab: 198.18.104.1)"
            )
        return self


def check_app(t) -> list[str]:
    """Cross-field problems of one app entry (``t``: a TransportStream) as "field: message"."""
    out: list[str] = []
    if t.app is None:
        for k in ("load", "clients"):
            if getattr(t, k) is not None:
                out.append(f"{k}: only for a request/response flow: add app:")
        return out
    if t.load is None:
        out.append("load: an app flow needs a load, e.g. load: {connections_per_s: 100}")
    if t.app.kind == "dns" and t.protocol != "udp":
        out.append("protocol: kind dns runs over udp")
    if t.app.kind == "http" and t.protocol != "tcp":
        out.append("protocol: kind http runs over tcp")
    if isinstance(t.app.response, ResponseLaw) and t.protocol != "tcp":
        out.append("app.response: a drawn response size runs over tcp (a datagram's is fixed)")
    count = t.clients.count if t.clients else 1
    if t.parallel > count:
        out.append(
            f"parallel: {t.parallel} flow workers need as many client addresses (clients.count "
            f"is {count}): each worker takes its share of the clients and of the load"
        )
    if t.message is not None:
        out.append("message: an app flow's sizes are app.request and app.response")
    return out


__all__ = ["APP_KINDS", "App", "Clients", "Load", "ResponseLaw", "ThinkLaw", "check_app"]
