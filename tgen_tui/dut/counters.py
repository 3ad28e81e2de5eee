"""The DUT's drop counters and per-core CPU, read every sampling interval over its channel.

What is read (the names are the kernel's, so a reader can find them with ``nstat``,
``conntrack -S``, ``tc -s qdisc``, ``nft list ruleset``):

- conntrack statistics ``/proc/net/stat/nf_conntrack`` (per-CPU rows, summed): drop,
  insert_failed (packets dropped: loss causes), early_drop, invalid, icmp_error,
  search_restart (shown, not matched to loss: they do not drop the packet themselves);
- the packet counter of every nftables rule whose verdict is drop or reject
  (``nft -j list chain`` of each chain that has one), named by family, table, chain,
  handle and comment;
- qdisc drops and overlimits per interface (``tc -s -j qdisc``);
- interface rx/tx dropped and errors (``/proc/net/dev``);
- ``/proc/net/softnet_stat`` dropped (backlog full), summed over CPUs;
- SNMP (``/proc/net/snmp``, ``snmp6``, ``netstat``; what ``nstat`` prints): IpInDiscards,
  IpOutDiscards, IpOutNoRoutes, IpExtInNoRoutes (forwarded frames with no route: an
  egress link set down), IpInAddrErrors, UdpInErrors, UdpNoPorts and the IPv6 ones;
- neighbour ``unresolved_discards`` (``/proc/net/stat/arp_cache``, ``ndisc_cache``);
- per-core CPU (``/proc/stat``).

How, and what it costs (see ``benchmarks/dut_counters_cost.py`` for the figures):

- namespace: no process at all. The ``/proc`` files through fds opened in the namespace
  once (a ``pread`` each); the qdiscs through one rtnetlink dump
  (:mod:`tgen_tui.dut.qdisc`) and the rules through one nfnetlink dump per chain that
  holds a counted drop/reject rule (:mod:`tgen_tui.dut.nftnl`; every rule is listed
  every :attr:`DutCounters.REDISCOVER` reads to find new chains), on sockets opened in
  the namespace once. The neighbour tables'
  statistics exist only in the initial namespace and are global, and softnet_stat and
  ``/proc/stat`` are the host's: in the netns lab these are **the host's** counters and
  CPUs, shared with every other namespace on it (``host_wide`` says which).
- command prefix (ssh): everything in one request to one long-lived remote shell
  (``grep -H`` of the files, then ``tc``, then ``nft``): one round trip per read.

Parsers are pure functions of the text, tested on captured output.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
import time
from dataclasses import dataclass, field

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.dut.channel import DutChannel, pread_all
from tgen_tui.dut.nftnl import NftReader
from tgen_tui.dut.qdisc import QdiscReader
from tgen_tui.dut.shell import RemoteShell

# (cause, counter, where): cause says what it means, counter is the kernel's name, where
# is an interface of the DUT, "dut" (the whole DUT) or "host" (netns lab: the host's).
Key = tuple[str, str, str]

CT_STAT = "/proc/thread-self/net/stat/nf_conntrack"
NET_DEV = "/proc/thread-self/net/dev"
SNMP = "/proc/thread-self/net/snmp"
SNMP6 = "/proc/thread-self/net/snmp6"
NETSTAT = "/proc/thread-self/net/netstat"
SOFTNET = "/proc/thread-self/net/softnet_stat"
ARP_STAT = "/proc/net/stat/arp_cache"
NDISC_STAT = "/proc/net/stat/ndisc_cache"
PROC_STAT = "/proc/stat"

#: conntrack statistics: column -> cause (None: shown, never matched to loss)
CT_COLUMNS: dict[str, str | None] = {
    "drop": "conntrack_drop",
    "insert_failed": "conntrack_insert_failed",
    "early_drop": None,
    "invalid": None,
    "icmp_error": None,
    "search_restart": None,
}
#: SNMP counters (nstat names) -> cause
SNMP_COUNTERS: dict[str, str] = {
    "IpInDiscards": "ip_in_discard",
    "IpOutDiscards": "ip_out_discard",
    "IpOutNoRoutes": "no_route",
    "IpExtInNoRoutes": "no_route",
    "IpInAddrErrors": "ip_addr_error",
    "UdpInErrors": "udp_in_error",
    "UdpNoPorts": "delivered_to_dut_no_port",
    "Ip6InDiscards": "ip_in_discard",
    "Ip6OutDiscards": "ip_out_discard",
    "Ip6OutNoRoutes": "no_route",
    "Ip6InNoRoutes": "no_route",
    "Ip6InAddrErrors": "ip_addr_error",
    "Udp6InErrors": "udp_in_error",
    "Udp6NoPorts": "delivered_to_dut_no_port",
}
#: interface counters (/proc/net/dev columns) -> (cause, direction: in = ingress, out = egress)
IF_COUNTERS = {
    "rx_dropped": ("dut_rx_drop", "in"),
    "rx_errors": ("dut_rx_error", "in"),
    "tx_dropped": ("dut_tx_drop", "out"),
    "tx_errors": ("dut_tx_error", "out"),
}
NEIGH_CAUSE = "neighbour_unresolved"


# ---------------------------------------------------------------- parsers (pure)
def parse_stat_table(text: str) -> dict[str, int]:
    """A ``/proc/net/stat/*`` table (a header, one row of hex per CPU): column -> sum.
    ``entries`` is a gauge repeated on every row: the first row's value."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return {}
    head, rows = lines[0], lines[1:]
    out: dict[str, int] = {}
    for i, name in enumerate(head):
        vals = [int(r[i], 16) for r in rows if i < len(r)]
        out[name] = (vals[0] if vals else 0) if name == "entries" else sum(vals)
    return out


def parse_net_dev(text: str) -> dict[str, dict[str, int]]:
    """``/proc/net/dev``: interface -> rx/tx dropped and errors."""
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        if len(f) >= 16:
            out[name.strip()] = {
                "rx_errors": int(f[2]),
                "rx_dropped": int(f[3]),
                "tx_errors": int(f[10]),
                "tx_dropped": int(f[11]),
            }
    return out


def parse_snmp(text: str) -> dict[str, int]:
    """``/proc/net/snmp`` (pairs of header/value lines) and ``snmp6`` (name value lines)
    as nstat names: ``IpInDiscards``, ``Ip6InDiscards``, ``UdpNoPorts``..."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        head = lines[i].split()
        if head and head[0].endswith(":"):
            if i + 1 < len(lines) and lines[i + 1].split()[:1] == [head[0]]:
                vals = lines[i + 1].split()
                proto = head[0][:-1]
                for k, v in zip(head[1:], vals[1:], strict=False):
                    if v.lstrip("-").isdigit():
                        out[proto + k] = int(v)
                i += 2
                continue
        elif len(head) == 2 and head[1].lstrip("-").isdigit():
            out[head[0]] = int(head[1])
        i += 1
    return out


def parse_softnet(text: str) -> int:
    """``/proc/net/softnet_stat``: packets dropped because a CPU's backlog was full."""
    return sum(int(ln.split()[1], 16) for ln in text.splitlines() if len(ln.split()) > 1)


def parse_tc(text: str) -> dict[tuple[str, str, str], tuple[int, int]]:
    """``tc -s -j qdisc``: (dev, kind, handle) -> (drops, overlimits)."""
    out = {}
    for q in json.loads(text or "[]"):
        key = (q.get("dev", "?"), q.get("kind", "?"), q.get("handle", "?"))
        out[key] = (int(q.get("drops", 0)), int(q.get("overlimits", 0)))
    return out


def _verdict(exprs: list) -> str | None:
    for e in exprs:
        if isinstance(e, dict):
            if "drop" in e:
                return "drop"
            if "reject" in e:
                return "reject"
    return None


def parse_nft(text: str) -> dict[str, int]:
    """``nft -j list ...``: rules with a counter and a drop/reject verdict, by name
    (``nft ip tgen_lab fwd_drop handle 4 drop "comment"``) -> packets."""
    out: dict[str, int] = {}
    for item in json.loads(text or "{}").get("nftables", []):
        rule = item.get("rule") if isinstance(item, dict) else None
        if not rule:
            continue
        exprs = rule.get("expr", [])
        verdict = _verdict(exprs)
        ctr = next((e["counter"] for e in exprs if isinstance(e, dict) and "counter" in e), None)
        if verdict is None or not isinstance(ctr, dict):
            continue
        name = (
            f"nft {rule.get('family')} {rule.get('table')} {rule.get('chain')}"
            f" handle {rule.get('handle')} {verdict}"
        )
        if rule.get("comment"):
            name += f' "{rule["comment"]}"'
        out[name] = int(ctr.get("packets", 0))
    return out


def drop_chains(text: str) -> list[tuple[str, str, str]]:
    """``nft -j list ruleset``: the (family, table, chain) that hold a counted drop/reject."""
    seen: list[tuple[str, str, str]] = []
    for item in json.loads(text or "{}").get("nftables", []):
        rule = item.get("rule") if isinstance(item, dict) else None
        if not rule:
            continue
        exprs = rule.get("expr", [])
        if _verdict(exprs) and any(isinstance(e, dict) and "counter" in e for e in exprs):
            key = (rule.get("family"), rule.get("table"), rule.get("chain"))
            if key not in seen:
                seen.append(key)
    return seen


CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_proc_stat(text: str) -> tuple[tuple[int, ...], ...]:
    """``/proc/stat``: one tuple of :data:`CPU_FIELDS` ticks per core (cpu0, cpu1, ...)."""
    out = []
    for ln in text.splitlines():
        if ln.startswith("cpu") and ln[3:4].isdigit():
            f = ln.split()[1:9]
            out.append(tuple(int(x) for x in f) + (0,) * (8 - len(f)))
    return tuple(out)


@dataclass(frozen=True)
class CoreCpu:
    """One DUT core over an interval: % of time in softirq, system, user, idle."""

    core: int
    softirq_pct: float
    system_pct: float
    user_pct: float
    idle_pct: float


def cpu_between(
    a: tuple[tuple[int, ...], ...], b: tuple[tuple[int, ...], ...]
) -> tuple[CoreCpu, ...]:
    """Per-core shares between two ``/proc/stat`` readings (irq counted with softirq)."""
    out = []
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        d = [max(0, q - p) for p, q in zip(x, y, strict=False)]
        tot = sum(d) or 1

        def pct(*idx: int, d: list[int] = d, tot: int = tot) -> float:
            return round(100.0 * sum(d[k] for k in idx) / tot, 1)

        out.append(CoreCpu(i, pct(5, 6), pct(2), pct(0, 1), pct(3, 4)))
    return tuple(out)


# ---------------------------------------------------------------- a reading
@dataclass(frozen=True)
class CounterReading:
    """Every counter of one read (monotonic values), the CPU ticks, and what failed."""

    t: float  # monotonic s
    values: dict[Key, int] = field(default_factory=dict)
    cpu: tuple[tuple[int, ...], ...] = ()
    errors: tuple[str, ...] = ()
    host_wide: tuple[str, ...] = ()  # sources that are the host's (netns lab), not the DUT's
    cpu_note: str | None = None  # whose CPUs these are, when the reader knows better


Counters = dict[Key, int]


def _ct(files: dict[str, str | None]) -> Counters:
    st = parse_stat_table(files.get(CT_STAT) or "")
    return {
        (cause or f"conntrack_{col}", f"nf_conntrack {col}", "dut"): st[col]
        for col, cause in CT_COLUMNS.items()
        if col in st
    }


def _dev(files: dict[str, str | None]) -> Counters:
    return {
        (cause, name, ifname): c[name]
        for ifname, c in parse_net_dev(files.get(NET_DEV) or "").items()
        if ifname != "lo"
        for name, (cause, _) in IF_COUNTERS.items()
    }


def _snmp(files: dict[str, str | None]) -> Counters:
    texts = (files.get(SNMP), files.get(SNMP6), files.get(NETSTAT))
    s = parse_snmp("\n".join(t or "" for t in texts))
    return {(cause, name, "dut"): s[name] for name, cause in SNMP_COUNTERS.items() if name in s}


def _softnet(files: dict[str, str | None], scope: str) -> Counters:
    text = files.get(SOFTNET)
    return {("backlog_drop", "softnet_stat dropped", scope): parse_softnet(text)} if text else {}


def _neigh(files: dict[str, str | None], scope: str) -> Counters:
    out: Counters = {}
    for path, tbl in ((ARP_STAT, "arp_cache"), (NDISC_STAT, "ndisc_cache")):
        st = parse_stat_table(files.get(path) or "")
        if "unresolved_discards" in st:
            out[(NEIGH_CAUSE, f"{tbl} unresolved_discards", scope)] = st["unresolved_discards"]
    return out


def _qdisc(items: dict[tuple[str, str, str], tuple[int, int]]) -> Counters:
    out: Counters = {}
    for (dev, kind, handle), (drops, over) in items.items():
        if kind == "noqueue" or dev == "lo":
            continue  # no queue: nothing to drop
        out[("qdisc_drop", f"qdisc {kind} {handle} drops", dev)] = drops
        out[("qdisc_overlimit", f"qdisc {kind} {handle} overlimits", dev)] = over
    return out


def _nft(items: dict[str, int]) -> Counters:
    out: Counters = {}
    for name, packets in items.items():
        reject = name.split('"')[0].rstrip().endswith("reject")
        out[("nft_rule_reject" if reject else "nft_rule_drop", name, "dut")] = packets
    return out


def counters_from(
    files: dict[str, str | None],
    tc: str | None,
    nft: str | None,
    *,
    host_scope: str,
    qdiscs: dict[tuple[str, str, str], tuple[int, int]] | None = None,
    rules: dict[str, int] | None = None,
) -> tuple[Counters, list[str]]:
    """Counter values from the texts of one read. ``host_scope``: the ``where`` of the
    host-wide sources (``"host"`` in a namespace, ``"dut"`` over ssh); ``qdiscs``: read
    through netlink (:mod:`tgen_tui.dut.qdisc`) instead of ``tc``'s text, ``rules`` (nft
    rule name -> packets) through netlink (:mod:`tgen_tui.dut.nftnl`) instead of ``nft``'s.
    A source that does not parse costs its counters and one line in the errors."""
    sources = (
        ("nf_conntrack", lambda: _ct(files)),
        ("net/dev", lambda: _dev(files)),
        ("snmp", lambda: _snmp(files)),
        ("softnet_stat", lambda: _softnet(files, host_scope)),
        ("neighbour", lambda: _neigh(files, host_scope)),
        ("tc", lambda: _qdisc(qdiscs if qdiscs is not None else parse_tc(tc or "[]"))),
        ("nft", lambda: _nft(rules if rules is not None else parse_nft(nft or "{}"))),
    )
    v: Counters = {}
    errors: list[str] = []
    for what, read in sources:
        try:
            v.update(read())
        except (ValueError, KeyError, IndexError, TypeError) as e:
            errors.append(f"{what}: {e}")
    return v, errors


#: causes that are shown but never matched to lost frames (they do not drop a packet)
SHOWN_ONLY = frozenset(
    {"qdisc_overlimit", "tester_backlog", "tester_send_retry"}
    | {f"conntrack_{c}" for c, cause in CT_COLUMNS.items() if cause is None}
)


def is_loss_cause(key: Key) -> bool:
    """Whether the counter counts dropped frames (and so may explain loss)."""
    return key[0] not in SHOWN_ONLY


# ---------------------------------------------------------------- the reader
NETNS_FILES = (CT_STAT, NET_DEV, SNMP, SNMP6, NETSTAT, SOFTNET)
HOST_FILES = (ARP_STAT, NDISC_STAT, PROC_STAT)
_SEP = "--tgen-counters-part--"


class DutCounters:
    """Reads :class:`CounterReading` from a DUT channel; cheap enough for every interval."""

    #: re-list every rule for drop chains every this many reads (a ``lab set`` adds some)
    REDISCOVER = 50
    #: a remote read that takes longer fails; the next is tried this long after a failure
    TIMEOUT_S = 3.0
    RETRY_S = 10.0

    def __init__(self, channel: DutChannel) -> None:
        self.channel = channel
        self.netns = channel.netns
        # a namespace: /proc fds and netlink, no process; a prefix: one long-lived shell
        self.shell = RemoteShell([*shlex.split(channel.ssh or ""), "sh"]) if channel.ssh else None
        self.qdisc = QdiscReader(channel.netns) if channel.netns else None
        self.nft = NftReader(channel.netns) if channel.netns else None
        self._host_fds: dict[str, int] = {}
        self._chains: list[tuple[str, str, str]] | None = None
        self._reads = 0
        self._failed_at = -1e9
        self._failure = ""
        self._lock = threading.Lock()

    @property
    def host_wide(self) -> tuple[str, ...]:
        if self.netns:
            return ("softnet_stat", "arp_cache", "ndisc_cache", "cpu")
        return ()

    def _discovering(self) -> bool:
        return self._chains is None or self._reads % self.REDISCOVER == 0

    def read(self) -> CounterReading:
        with self._lock:
            t = time.monotonic()
            errors: list[str] = []
            if self.netns:
                files = self._netns_files(errors)
                qdiscs, rules = self._netlink(errors)
                values, errs = counters_from(
                    files, None, None, host_scope="host", qdiscs=qdiscs, rules=rules
                )
            else:
                files, tc, nft = self._remote(errors)
                values, errs = counters_from(files, tc, nft, host_scope="dut")
            cpu = parse_proc_stat(files.get(PROC_STAT) or "")
            self._reads += 1
            return CounterReading(t, values, cpu, tuple(errors + errs), self.host_wide)

    def _netns_files(self, errors: list[str]) -> dict[str, str | None]:
        files: dict[str, str | None] = {}
        for p in NETNS_FILES:
            try:
                files[p] = self.channel.read_cached(p)
            except (OSError, EnvironmentProblem) as e:
                files[p] = None
                if p not in (SNMP6, NETSTAT):
                    errors.append(f"{p}: {e}")
        for p in HOST_FILES:
            try:
                fd = self._host_fds.get(p)
                if fd is None:
                    fd = self._host_fds[p] = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
                files[p] = pread_all(fd)
            except OSError:
                files[p] = None
        return files

    def _netlink(self, errors: list[str]) -> tuple[dict | None, dict[str, int] | None]:
        assert self.qdisc is not None and self.nft is not None
        qdiscs, rules = None, None
        try:
            qdiscs = self.qdisc.read()
        except OSError as e:
            errors.append(f"qdisc (netlink): {e}")
        try:
            if self._discovering():
                rules = self.nft.read()
                self._chains = sorted({tuple(n.split()[1:4]) for n in rules})  # type: ignore[misc]
            else:
                rules = self.nft.read(self._chains) if self._chains else {}
        except OSError as e:
            errors.append(f"nftables (netlink): {e}")
        return qdiscs, rules

    def _script(self) -> str:
        paths = [p.replace("/thread-self/", "/self/") for p in NETNS_FILES] + list(HOST_FILES)
        parts = [
            "grep -sH '' " + " ".join(shlex.quote(p) for p in paths),
            "tc -s -j qdisc 2>/dev/null || echo '[]'",
        ]
        if self._discovering():
            parts.append("nft -j list ruleset 2>/dev/null; echo")
        else:
            lists = [f"nft -j list chain {f} {t} {c}" for f, t, c in self._chains or []]
            parts.append("; ".join(f"{x} 2>/dev/null; echo" for x in lists) or "echo")
        return f"; echo {_SEP}; ".join(parts)

    def _remote(self, errors: list[str]) -> tuple[dict[str, str | None], str | None, str | None]:
        """One request to the remote shell: the files, ``tc`` and ``nft``."""
        assert self.shell is not None
        wait = self._failed_at + self.RETRY_S - time.monotonic()
        if wait > 0:  # an unreachable DUT must not hold up every sample for the timeout
            errors.append(f"{self._failure} (next try in {wait:.0f} s)")
            return {}, None, None
        discover = self._discovering()
        try:
            out = self.shell.run(self._script(), timeout=self.TIMEOUT_S)
        except EnvironmentProblem as e:
            self._failed_at, self._failure = time.monotonic(), str(e)
            errors.append(str(e))
            return {}, None, None
        parts = out.split(f"\n{_SEP}\n")
        files = _grep_files(parts[0] if parts else "")
        tc = parts[1] if len(parts) > 1 else None
        nft = _merge_nft(parts[2] if len(parts) > 2 else "")
        if discover and nft is not None:
            self._chains = drop_chains(nft)
        return files, tc, nft

    def close(self) -> None:
        for r in (self.shell, self.qdisc, self.nft):
            if r is not None:
                r.close()
        for fd in self._host_fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._host_fds.clear()


def _grep_files(text: str) -> dict[str, str | None]:
    """``grep -H ''`` output -> path -> text (the paths as the netns reader names them)."""
    by: dict[str, list[str]] = {}
    for ln in text.splitlines():
        path, sep, rest = ln.partition(":")
        if sep:
            by.setdefault(path, []).append(rest)
    out: dict[str, str | None] = {}
    for p in NETNS_FILES + HOST_FILES:
        remote = p.replace("/thread-self/", "/self/")
        out[p] = "\n".join(by[remote]) if remote in by else None
    return out


def _merge_nft(text: str) -> str | None:
    """Several ``nft -j`` documents, one per line, as one ``{"nftables": [...]}``."""
    items: list = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln.startswith("{"):
            try:
                items += json.loads(ln).get("nftables", [])
            except ValueError:
                continue
    return json.dumps({"nftables": items})
