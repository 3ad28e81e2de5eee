"""Warnings about profiles that validate but do not do what they seem to (issue 36).

Each warning is a ``"path: message"`` line; the loader positions it like an error
(``lab.yaml:14:9: streams[0].tcp.handshake: warning: ...``), and ``tgen validate``
prints them. None of them stops a run:

- a TCP handshake stream with no ``learn: true`` TCP reply stream sent from its rx_port
  (``tgen run`` refuses the handshake: there is nothing to answer the SYNs);
- a ``learn: true`` reply stream on a port that no stream reaches (nothing to learn, so
  it sends nothing);
- an inc/dec field whose step shares a factor with its span: it visits only
  span / gcd(step, span) of the range's values (a step equal to the span: one value),
  and the stream has fewer flows than the range suggests.
"""

from __future__ import annotations

import math

from tgen_tui.profiles.models import Profile


def profile_warnings(profile: Profile) -> list[str]:
    """Every warning of ``profile`` as ``"path: message"``, in profile order."""
    out: list[str] = []
    enabled = [s for s in profile.streams if s.enabled]
    for i, s in enumerate(profile.streams):
        where = f"streams[{i}]"
        out += _step_warnings(s, where)
        if not s.enabled:
            continue
        if s.tcp is not None and s.tcp.handshake:
            replies = [r for r in enabled if r.learn and r.tcp is not None and r.port == s.rx_port]
            if s.rx_port is None or not replies:
                out.append(
                    f"{where}.tcp.handshake: no reply stream answers the SYNs: give a TCP "
                    f"stream with learn: true sent from this stream's rx_port "
                    f"({s.rx_port or 'none given'}); tgen run refuses the handshake without it"
                )
        if s.learn:
            senders = [o.name for o in enabled if o is not s and o.rx_port == s.port]
            if not senders:
                out.append(
                    f"{where}.learn: no stream arrives at port {s.port} (none has rx_port: "
                    f"{s.port}): it learns no tuple, so this reply stream sends nothing"
                )
    return out


def _step_warnings(s, where: str) -> list[str]:
    out = []
    for path, r in s.flow_ranges():
        if r.mode not in ("inc", "dec") or r.span <= 1:
            continue
        g = math.gcd(r.step % r.span, r.span)
        if g > 1:
            visits, flows = r.span // g, s.distinct_flows()
            out.append(
                f"{where}.{path}.step: step {r.step} over {r.span:,} values ({r.min}..{r.max}) "
                f"repeats after {visits:,} value{'s' if visits != 1 else ''}: the stream sends "
                f"{flows:,} flow{'s' if flows != 1 else ''}, not the range's {r.span:,} (give a step "
                f"coprime with {r.span:,})"
            )
    return out


__all__ = ["profile_warnings"]
