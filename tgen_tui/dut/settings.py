"""What a result records about the DUT: conntrack sizing and timeouts read live over its
channel, plus what the DUT's builder says about it.

The DUT's builder (the lab) knows things no read of the DUT reveals: its topology, the
impairment it configured (``--drop-percent 1``, a TBF spec), which nftables chain holds the
drop rules. It leaves them in a *description file*, ``/run/tgen-dut/NETNS.json``
(:func:`write_description`; removed with the DUT), in the shape of :class:`DutDescription`.
This package defines that file and reads it, so the engine and methodology learn about the
lab without importing it. Counters and qdisc figures are always read live.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from tgen_tui.dut import conntrack
from tgen_tui.dut.channel import DutChannel, DutUnreachable, netns_identity
from tgen_tui.dut.nft import drop_counters

DESCRIPTION_DIR = "/run/tgen-dut"

UDP_TIMEOUT_KEY = conntrack.SYSCTLS["udp_timeout_s"]
UDP_STREAM_TIMEOUT_KEY = conntrack.SYSCTLS["udp_stream_timeout_s"]
MAX_KEY = conntrack.SYSCTLS["conntrack_max"]
BUCKETS_KEY = conntrack.SYSCTLS["conntrack_buckets"]
FORWARD_KEY = "net.ipv4.ip_forward"

#: The keys of a run result's ``dut.settings`` (``tgen run --json``), in order.
RESULT_KEYS = (
    "conntrack_max",
    "conntrack_buckets",
    "udp_timeout",
    "udp_stream_timeout",
    "nft",
    "tbf",
    "topology",
)


@dataclass(frozen=True)
class DutDescription:
    """What the builder of a DUT says about it (see the module docstring).

    ``nft_chain``: (family, table, chain) of the drop rules whose counters are read live;
    ``nft``: fixed facts shown next to them; ``tbf_interface``: where a TBF may sit, with
    ``tbf`` its fixed facts (spec, max_queue_delay); ``lab``: the builder's settings that a
    methodology report records.
    """

    topology: str | None = None
    nft_chain: tuple[str, str, str] | None = None
    nft: dict = field(default_factory=dict)
    tbf_interface: str | None = None
    tbf: dict = field(default_factory=dict)
    lab: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DutDescription:
        chain = d.get("nft_chain")
        return cls(
            topology=d.get("topology"),
            nft_chain=tuple(chain) if chain else None,  # type: ignore[arg-type]
            nft=dict(d.get("nft") or {}),
            tbf_interface=d.get("tbf_interface"),
            tbf=dict(d.get("tbf") or {}),
            lab=d.get("lab"),
        )


def description_path(netns: str) -> str:
    return os.path.join(DESCRIPTION_DIR, f"{netns}.json")


def write_description(netns: str, desc: DutDescription) -> None:
    """Record ``desc`` for the DUT in namespace ``netns`` (atomically), with the identity
    of that namespace: a namespace of the same name made later does not inherit it."""
    os.makedirs(DESCRIPTION_DIR, exist_ok=True)
    path = description_path(netns)
    with open(path + ".tmp", "w") as f:
        doc = {**desc.to_dict(), "netns_id": list(netns_identity(netns))}
        json.dump(doc, f, indent=2)  # key order is the order shown
        f.write("\n")
    os.replace(path + ".tmp", path)


def read_description(netns: str) -> DutDescription | None:
    """The description of the DUT in ``netns``; None without one, or when it was written
    for another namespace of that name (deleted without ``tgen lab down``)."""
    try:
        with open(description_path(netns)) as f:
            doc = json.load(f)
        if doc.get("netns_id") != list(netns_identity(netns)):
            return None
        return DutDescription.from_dict(doc)
    except (OSError, ValueError, TypeError, AttributeError, DutUnreachable):
        return None


def remove_description(netns: str) -> None:
    try:
        os.unlink(description_path(netns))
    except FileNotFoundError:
        pass


def _read_global(path: str) -> int | None:
    try:
        with open(path) as f:
            return conntrack.int_or_none(f.read().strip())
    except OSError:
        return None


def live_view(ch: DutChannel, desc: DutDescription | None) -> dict:
    """conntrack_max, conntrack_buckets, udp_timeout, udp_stream_timeout, ip_forward (read in
    one go, no process in a namespace), then nft and tbf (one process each) when ``desc``
    says where to look, else None."""
    keys = [UDP_TIMEOUT_KEY, UDP_STREAM_TIMEOUT_KEY, MAX_KEY, BUCKETS_KEY, FORWARD_KEY]
    got = conntrack.read_sysctls(ch, keys)
    view: dict = {
        "conntrack_max": conntrack.int_or_none(got[MAX_KEY]),
        "conntrack_buckets": conntrack.int_or_none(got[BUCKETS_KEY]),
        "udp_timeout": conntrack.int_or_none(got[UDP_TIMEOUT_KEY]),
        "udp_stream_timeout": conntrack.int_or_none(got[UDP_STREAM_TIMEOUT_KEY]),
        "ip_forward": got[FORWARD_KEY] == "1",
    }
    if ch.netns:  # a namespace shares the host's globals where it hides its own
        view["conntrack_max"] = view["conntrack_max"] or _read_global(conntrack.GLOBAL_MAX_PATH)
        view["conntrack_buckets"] = view["conntrack_buckets"] or _read_global(
            conntrack.GLOBAL_BUCKETS_PATH
        )
    view["nft"] = _nft_view(ch, desc)
    view["tbf"] = _tbf_view(ch, desc)
    return view


def _nft_view(ch: DutChannel, desc: DutDescription | None) -> dict | None:
    if desc is None or desc.nft_chain is None:
        return None
    counters = drop_counters(ch, *desc.nft_chain)
    return {"loaded": counters is not None, **desc.nft, "dropped": counters or {}}


def qdiscs(ch: DutChannel, dev: str) -> list[dict]:
    """``tc -j qdisc show dev DEV`` on the DUT (an empty list on any error)."""
    out = ch.run(["tc", "-j", "qdisc", "show", "dev", dev], timeout=10)
    if not out.ok or not out.stdout.strip():
        return []
    try:
        return json.loads(out.stdout)
    except ValueError:
        return []


def _tbf_view(ch: DutChannel, desc: DutDescription | None) -> dict | None:
    if desc is None or desc.tbf_interface is None:
        return None
    qd = [q for q in qdiscs(ch, desc.tbf_interface) if q.get("root")]
    if not qd or qd[0].get("kind") != "tbf":
        return None
    opts = qd[0].get("options", {})
    return {
        "spec": desc.tbf.get("spec"),
        "rate": opts.get("rate"),
        "burst": opts.get("burst"),
        # tc's "lat" is (limit - burst) / rate; the longest wait in a full queue is
        # limit / rate = the LATENCY asked for (the builder sizes limit from it)
        "latency": opts.get("lat"),
        "max_queue_delay": desc.tbf.get("max_queue_delay"),
    }


def dut_settings(ch: DutChannel | None) -> dict | None:
    """A run result's ``dut.settings`` for the DUT behind ``ch`` (None without one): the
    :data:`RESULT_KEYS`, or ``{"error": ...}`` when the DUT cannot be read. A namespace may
    have a builder's description; a DUT over ssh is read live only."""
    if ch is None:
        return None
    try:
        desc = read_description(ch.netns) if ch.netns else None
        view = live_view(ch, desc)
    except Exception as e:  # noqa: BLE001 - a probe failure must not lose the result
        return {"error": str(e)}
    view["topology"] = desc.topology if desc else None
    return {k: view.get(k) for k in RESULT_KEYS}
