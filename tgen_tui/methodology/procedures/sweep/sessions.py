"""The sessions of a sweep: ``sessions=A..B`` or ``sessions=A,B,C``, and a profile
narrowed to exactly that many unique tuples."""

from __future__ import annotations

import math

from tgen_tui.diagnostics import BadInput

#: the most points of a sweep: each is a connection-rate search and a throughput search
MAX_POINTS = 100
#: the most sessions a sweep asks for: every (source port, destination port) pair of one
#: address pair, 65,536 x 65,536
MAX_SESSIONS = 1 << 32


def _sessions(text: str, count) -> int:
    """One session count (``64k``, ``4M``): a whole number from 1 to MAX_SESSIONS."""
    v = count(text, "sessions")
    if v is None or v != int(v):
        raise BadInput(f"sweep: sessions {text!r}: a session count is a whole number")
    if not 1 <= v <= MAX_SESSIONS:
        raise BadInput(
            f"sweep: sessions {text!r}: give 1 to {MAX_SESSIONS:,} (every port pair of one "
            "address pair)"
        )
    return int(v)


def parse_sessions(text: str, points: int, count) -> list[int]:
    """``sessions=A..B`` (``points`` counts spaced geometrically) or ``sessions=A,B,C``;
    ``count`` parses one number (1k, 4M)."""
    key, sep, val = text.partition("=")
    if key.strip() != "sessions" or not sep or not val.strip():
        raise BadInput(f"sweep: {text!r}: give sessions=FIRST..LAST or sessions=A,B,C")
    if not 2 <= points <= MAX_POINTS:
        raise BadInput(f"--points: {points}: give 2 to {MAX_POINTS} (each point is two searches)")
    if ".." in val:
        a, b = (_sessions(x.strip(), count) for x in val.split("..", 1))
        if not 1 <= a < b:
            raise BadInput(f"sweep: {text!r}: need 1 <= FIRST < LAST")
        r = (b / a) ** (1 / (points - 1))
        out = [round(a * r**i) for i in range(points)]
        out[-1] = b
    else:
        out = [_sessions(x.strip(), count) for x in val.split(",") if x.strip()]
    if not out or min(out) < 1:
        raise BadInput(f"sweep: {text!r}: session counts must be >= 1")
    return sorted(set(out))


def with_sessions(prof, sessions: int):
    """``prof`` whose first stream has exactly ``sessions`` unique tuples (or as close as
    its destination ports allow); (profile, sessions used)."""
    from tgen_tui.profiles.revalidate import revalidate

    s0 = prof.streams[0]
    l4 = s0.udp or s0.tcp
    if l4 is None or l4.src_port.mode != "unique":
        raise BadInput("sweep needs an Initiator stream with `mode: unique` ports")
    dst = l4.dst_port.span if l4.dst_port.mode == "unique" else 1
    src = max(1, math.ceil(sessions / dst))
    lo = int(l4.src_port.min)
    if lo + src - 1 > 65535:
        raise BadInput(
            f"sweep: {sessions:,} sessions need {src:,} source ports from {lo}: widen the "
            "destination port range or lower the source port minimum"
        )

    def change(d: dict) -> None:
        ports = (d["streams"][0].get("udp") or d["streams"][0].get("tcp"))["src_port"]
        ports["max"] = lo + src - 1

    return revalidate(prof, change), src * dst
