"""Names, MAC addresses and IPv4 addresses of the lab (profiles hard-code these).

Everything the lab creates carries a prefix (default ``tgen``) so that several labs, and
parallel tests, coexist: the namespaces are ``{prefix}-tester`` and ``{prefix}-dut``. The
interface names inside them are short and fixed (``p0``/``p1`` in the tester, ``d0``/``d1``
in the DUT); they never collide because they are created directly inside the namespaces.

Only addresses from the benchmarking range 198.18.0.0/15 (RFC 2544) are used.
"""

from __future__ import annotations

import re

DEFAULT_PREFIX = "tgen"

#: Tester port names (in the tester namespace) and DUT interface names (in the DUT namespace).
P0, P1 = "p0", "p1"
D0, D1 = "d0", "d1"

#: Fixed MAC addresses. ``02:74:67`` is locally administered ("tg").
P0_MAC = "02:74:67:00:00:01"
D0_MAC = "02:74:67:00:00:fe"
P1_MAC = "02:74:67:00:01:01"
D1_MAC = "02:74:67:00:01:fe"

#: Private (inside) network: p0 <-> d0.
INSIDE_NET = "198.18.0.0/24"
P0_IP = "198.18.0.2"
D0_IP = "198.18.0.1"
#: Public (outside) network: p1 <-> d1; the DUT masquerades to D1_IP.
OUTSIDE_NET = "198.19.0.0/24"
P1_IP = "198.19.0.2"
D1_IP = "198.19.0.1"
PREFIX_LEN = 24

#: nftables table the lab owns inside the DUT namespace.
NFT_TABLE = "tgen_lab"

#: Directory of the per-lab state files (old global values to restore on ``down``).
STATE_DIR = "/run/tgen-lab"

_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.]{0,19}$")


def valid_prefix(prefix: str) -> bool:
    """A prefix is 1-20 characters of letters, digits, ``_`` and ``.`` (no ``-`` or ``/``)."""
    return bool(_PREFIX_RE.match(prefix))


def tester_netns(prefix: str = DEFAULT_PREFIX) -> str:
    """Name of the tester namespace that holds ports p0 and p1."""
    return f"{prefix}-tester"


def dut_netns(prefix: str = DEFAULT_PREFIX) -> str:
    """Name of the DUT namespace that holds d0 (inside) and d1 (outside)."""
    return f"{prefix}-dut"


def state_path(prefix: str = DEFAULT_PREFIX) -> str:
    return f"{STATE_DIR}/{prefix}.json"
