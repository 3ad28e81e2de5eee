"""Who may open the served console: loopback only, unless a token is given and presented.

The page can start traffic, so the rules are strict and checked before anything runs:

- Without ``--host`` the server listens on 127.0.0.1 only, and requests must name a
  loopback host in their ``Host`` header (a DNS-rebinding page cannot pose as it).
- Any other ``--host`` needs ``--token`` (``auto`` generates one; a short one is
  accepted with a warning); every request must
  then carry it in the URL (``?token=...``) or in the cookie the page got with it.
- Browsers send ``Origin`` with every websocket: it must be the page's own origin, so
  another site open in the operator's browser cannot drive the console.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from urllib.parse import urlsplit

from tgen_tui.diagnostics import ExitCode, TgenError

MIN_TOKEN = 16
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and the usual names of localhost."""
    h = host.strip().strip("[]").lower()
    if h in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, token: str | None) -> str | None:
    """The token the server will demand, or None (loopback without one).

    ``auto`` makes a fresh random token. A non-loopback host without a token, or a
    short token, is bad input (exit 2).
    """
    if token is None or token == "":
        if not is_loopback(host):
            raise _bad(
                f"--host {host} is reachable from other machines and the page can start "
                "traffic: add --token TOKEN (or --token auto), or keep the default 127.0.0.1"
            )
        return None
    if token == "auto":
        return secrets.token_urlsafe(24)
    if any(c.isspace() or not c.isprintable() for c in token):
        raise _bad("--token must be printable characters without spaces (or --token auto)")
    return token


def weak_token(token: str | None) -> str | None:
    """A warning for a short token (guessable over many requests), else None."""
    if token is not None and len(token) < MIN_TOKEN:
        return (
            f"a {len(token)}-character token is easy to guess; --token auto makes a "
            f"strong one ({MIN_TOKEN}+ characters recommended)"
        )
    return None


def token_ok(expected: str | None, presented: str | None) -> bool:
    """Constant-time comparison; no token expected means every request passes."""
    if expected is None:
        return True
    if not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


def host_header_ok(listen_host: str, host_header: str | None, token: str | None) -> bool:
    """Without a token, only loopback names may be asked for (defeats DNS rebinding)."""
    if token is not None:
        return True
    if not host_header:
        return False
    name = urlsplit(f"//{host_header}").hostname or ""
    return is_loopback(name)


def origin_ok(origin: str | None, host_header: str | None) -> bool:
    """A websocket's Origin must be this server (scheme aside); a missing Origin is a non-browser."""
    if origin is None:
        return True
    if not host_header:
        return False
    netloc = urlsplit(origin).netloc.lower()
    return netloc == host_header.lower()


def _bad(message: str) -> TgenError:
    """Bad input reported as one ``tgen: error:`` line, exit 2."""
    return TgenError(message, ExitCode.BAD_INPUT)
