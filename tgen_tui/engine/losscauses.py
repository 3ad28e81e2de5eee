"""Every lost frame explained: the sampler's side of loss attribution.

:class:`LossCauses` reads the DUT's drop counters and CPU (:mod:`tgen_tui.dut.counters`)
once per sampling interval, adds the tester's own (RX ring drops and interface drops of
each receiving port, from the snapshot), and matches each stream's lost frames to the
counter deltas since the baseline (:mod:`tgen_tui.dut.attribution`). The snapshot it
returns carries ``loss_causes`` and ``loss_unexplained`` per stream, and the counters
table and per-core CPU in ``dut``. The figures are cumulative since the last full clear,
like ``lost`` itself; the table also gives each counter's rate over the last interval.

On a veth pair (the lab) a drop between the two ends is counted at both; it is the
receiving end's (:func:`once_on_veth`). Frames a tester port could not put on the wire (``PortStats.tx_unsent``: no carrier, the
interface's tx_dropped) are the sending port's cause, on its streams' paths only. Frames
that reached a failed port (its worker died) and that nothing counted any more are that
receiving port's cause (:func:`uncounted_rx`), never unexplained or the DUT's.

Tester counters that are not loss (frames due but not sent: ``backlog``; send retries:
``tx_errors``) appear in the table for the reader, never as a cause.
"""

from __future__ import annotations

import ipaddress
import os
import time
from dataclasses import asdict, replace

from tgen_tui.dut import attribution as A
from tgen_tui.dut.channel import DutChannel, pread_all
from tgen_tui.dut.counters import (
    CounterReading,
    DutCounters,
    Key,
    cpu_between,
    is_loss_cause,
    parse_softnet,
)
from tgen_tui.dut.paths import dut_addresses, peer_interfaces
from tgen_tui.engine.snapshot import DutStats, PortStats, StatsSnapshot
from tgen_tui.packets.program import StreamProgram

HOST_NOTE = (
    "the host's CPUs (netns lab: the DUT shares the host; softnet and neighbour-table "
    "counters are host-wide too)"
)
SSH_NOTE = "the DUT's own CPUs"
#: ``TGEN_DUT_COUNTERS=off``: read no DUT counters (the tester's are still matched)
OFF_ENV = "TGEN_DUT_COUNTERS"
CPU_SPAN = 0.5  # s: the shortest span the DUT's CPU figures are taken over
#: this host's backlog drops, when the DUT reader does not read them (ssh, no DUT)
TESTER_SOFTNET: Key = ("backlog_drop", "softnet_stat dropped", "tester host")
SOFTNET_PATH = "/proc/net/softnet_stat"
#: causes whose counters belong to an object made with its counter at 0 (an nft rule, a qdisc)
CREATED_FROM_ZERO = frozenset({"nft_rule_drop", "nft_rule_reject", "qdisc_drop", "qdisc_overlimit"})
#: the counter the fake engine's simulated DUT drops its frames with
FAKE_RULE: Key = ("nft_rule_drop", "nft ip tgen_lab fwd_drop handle 4 drop", "dut")


UNSENT_COUNTER = "sent, not transmitted by the interface"
RX_FAILED_COUNTER = "received by the interface after the port's worker died"


def once_on_veth(deltas: dict[Key, int], peers: dict[str, str]) -> dict[Key, int]:
    """``deltas`` for attribution, where a tester port and its DUT interface are the two
    ends of one veth pair (``peers``: port -> DUT interface, the lab): a frame dropped
    between them is counted by both ends, by the sender's tx_dropped (the tester's
    ``tx_unsent``, the DUT's ``tx_dropped``) and by the receiver's ``rx_dropped``. It is
    the receiver's drop (its queue was full, or its interface was down), so the sender's
    count loses what the receiver counted (a real cable counts each drop at one end)."""
    out = dict(deltas)
    for port, dev in peers.items():
        w = f"tester {port}"
        unsent, dut_rx = (A.TESTER_UNSENT, UNSENT_COUNTER, w), ("dut_rx_drop", "rx_dropped", dev)
        if out.get(unsent, 0) > 0 and out.get(dut_rx, 0) > 0:
            out[unsent] = max(0, out[unsent] - out[dut_rx])
        dut_tx, tester_rx = ("dut_tx_drop", "tx_dropped", dev), ("tester_if_drop", "rx_dropped", w)
        if out.get(dut_tx, 0) > 0 and out.get(tester_rx, 0) > 0:
            out[dut_tx] = max(0, out[dut_tx] - out[tester_rx])
    return out


def uncounted_rx(p: PortStats) -> int:
    """Frames a failed port's interface received that its receiver never counted (its
    worker died: the ring's signed + unsigned + dropped frames stopped at their last
    values while the interface kept counting); 0 for a port that did not fail."""
    if p.state != "failed":
        return 0
    return max(0, p.if_rx_frames - p.rx_frames - p.rx_other - p.rx_drops)


def tester_counters(ports: tuple[PortStats, ...]) -> dict[Key, int]:
    """The tester's counters since the baseline, keyed like the DUT's (``where``: ``tester P``)."""
    v: dict[Key, int] = {}
    for p in ports:
        w = f"tester {p.name}"
        v[("tester_ring_drop", "rx ring tp_drops", w)] = p.rx_drops
        v[(A.TESTER_RX_FAILED, RX_FAILED_COUNTER, w)] = uncounted_rx(p)
        v[("tester_if_drop", "rx_dropped", w)] = p.if_rx_dropped
        v[(A.TESTER_UNSENT, UNSENT_COUNTER, w)] = p.tx_unsent
        v[("tester_backlog", "frames due, not sent", w)] = p.backlog
        v[("tester_send_retry", "send retries", w)] = p.tx_errors
    return v


def _dst(p: StreamProgram) -> str | None:
    """The stream's fixed destination address (None: none, or it varies)."""
    t, o = p.template, p.l3_offset
    try:
        if p.l3 == 4:
            b = t[o + 16 : o + 20]
        elif p.l3 == 6:
            b = t[o + 24 : o + 40]
        else:
            return None
        if not any(b):
            return None
        return str(ipaddress.ip_address(b))
    except ValueError:
        return None


class LossCauses:
    """The per-set-up attribution state: reader, baseline, previous reading, paths."""

    def __init__(
        self,
        programs: tuple[StreamProgram, ...],
        ports: list[tuple[str, str | None, str]],
        channel: DutChannel | None,
        *,
        through_dut: bool | None = None,
    ) -> None:
        """``through_dut``: whether the streams cross a DUT (default: when a channel is given;
        the fake passes True with simulated readings)."""
        self.programs = programs
        self.ports = ports
        self.channel = channel
        off = os.environ.get(OFF_ENV, "").lower() in ("0", "off", "no")
        self.reader = DutCounters(channel) if channel and not off else None
        self.base: CounterReading | None = None
        self._softnet: int | None = None
        self._cpu_ref: CounterReading | None = None
        self._cpu_last: tuple = ()
        self.prev: CounterReading | None = None
        self._late: dict[Key, int] = {}  # first values of counters missing from the baseline
        self.peers: dict[str, str] = {}  # tester port -> the DUT interface at its veth's end
        self.paths: dict[str, A.StreamPath] = {
            p.name: A.StreamPath(
                p.name,
                rx_port=p.rx_port,
                tx_port=p.port,
                through_dut=channel is not None if through_dut is None else through_dut,
                family=p.l3 if p.l3 in (4, 6) else None,
            )
            for p in programs
        }

    def prime(self) -> None:
        """Learn the paths (blocking: ``ip`` processes) and take the baseline."""
        if self.channel is not None:
            peers = self.peers = peer_interfaces(self.ports, self.channel.netns)
            local = dut_addresses(self.channel)
            for p in self.programs:
                dst = _dst(p)
                self.paths[p.name] = A.StreamPath(
                    p.name,
                    dut_in=peers.get(p.port),
                    dut_out=peers.get(p.rx_port or ""),
                    rx_port=p.rx_port,
                    tx_port=p.port,
                    through_dut=True,
                    to_dut=(dst in local) if (dst is not None and local) else None,
                    family=p.l3 if p.l3 in (4, 6) else None,
                )
        self.rebase()

    def rebase(self) -> None:
        """A new baseline (a full clear)."""
        self.base = self.prev = self.read()
        self._late = {}

    def read(self) -> CounterReading:
        """One reading of the DUT (blocking; the sampler calls it from a thread), plus this
        host's softnet backlog drops when the DUT reader does not see this host's."""
        if self.reader is not None:
            r = self.reader.read()
        else:
            note = "not read (TGEN_DUT_COUNTERS=off)" if self.channel is not None else None
            r = CounterReading(time.monotonic(), cpu_note=note)
        if self.reader is None or not self.channel or not self.channel.netns:
            try:
                r.values[TESTER_SOFTNET] = parse_softnet(pread_all(self._softnet_fd()))
            except OSError as e:
                r = replace(r, errors=(*r.errors, f"tester softnet_stat: {e}"))
        return r

    def _softnet_fd(self) -> int:
        if self._softnet is None:
            self._softnet = os.open(SOFTNET_PATH, os.O_RDONLY | os.O_CLOEXEC)
        return self._softnet

    def _baseline(self, base: CounterReading, k: Key, v: int) -> int:
        """``k``'s baseline value. A counter missing from the baseline: a rule or qdisc
        made since (``tgen lab set`` during a session) counted from 0, as its counter
        starts; any other counter from its first value seen."""
        b = base.values.get(k)
        if b is not None:
            return b
        return 0 if k[0] in CREATED_FROM_ZERO else self._late.setdefault(k, v)

    def apply(self, snap: StatsSnapshot, reading: CounterReading | None) -> StatsSnapshot:
        """``snap`` with each stream's causes, and the counters table and CPU in ``dut``."""
        deltas = tester_counters(snap.ports)
        rates: dict[Key, float] = {}
        base, prev = self.base, self.prev
        if reading is not None and base is not None:
            for k, v in reading.values.items():
                deltas[k] = v - self._baseline(base, k, v)
                if prev is not None and reading.t > prev.t:
                    rates[k] = (v - prev.values.get(k, v)) / (reading.t - prev.t)
        lost = {s.name: s.lost for s in snap.streams}
        att = A.attribute(lost, once_on_veth(deltas, self.peers), self.paths)
        streams = tuple(
            replace(
                s,
                loss_causes=att.causes.get(s.name, ()),
                loss_unexplained=att.unexplained.get(s.name, 0),
            )
            for s in snap.streams
        )
        snap = replace(snap, streams=streams)
        if snap.dut is not None and reading is not None:
            snap = replace(snap, dut=self._dut(snap.dut, reading, deltas, rates, att))
        if reading is not None:
            self.prev = reading
        return snap

    def _dut(
        self,
        d: DutStats,
        reading: CounterReading,
        deltas: dict[Key, int],
        rates: dict[Key, float],
        att: A.Attribution,
    ) -> DutStats:
        rows = tuple(
            A.CounterRow(
                k[0],
                k[1],
                k[2],
                deltas[k],
                round(rates.get(k, 0.0), 1),
                att.matched.get(k, 0),
                att.excess.get(k, 0),
                is_loss_cause(k),
            )
            for k in sorted(deltas, key=lambda k: (A.rank(k), k))
            if deltas[k] or rates.get(k)  # the counters that moved
        )
        return replace(
            d,
            counters=rows,
            cpu=self._cpu(reading),
            cpu_note=reading.cpu_note or (HOST_NOTE if reading.host_wide else SSH_NOTE),
            counters_errors=reading.errors,
            counters_excess=sum(att.excess.values()),
        )

    def _cpu(self, reading: CounterReading) -> tuple:
        """Per-core CPU over at least :data:`CPU_SPAN` s (``/proc/stat`` counts 100 ticks a
        second: a 0.1 s interval would give 10 % steps); the last figures in between."""
        ref = self._cpu_ref
        if ref is None or len(ref.cpu) != len(reading.cpu):
            self._cpu_ref = reading
        elif reading.t - ref.t >= CPU_SPAN:
            self._cpu_last = cpu_between(ref.cpu, reading.cpu)
            self._cpu_ref = reading
        return self._cpu_last

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        if self._softnet is not None:
            os.close(self._softnet)
            self._softnet = None


def counters_note(d: DutStats) -> str | None:
    """Errors reading the counters, and counted drops beyond the loss: said, never hidden."""
    notes = list(d.counters_errors)
    if d.counters_excess:
        where = " or the host" if d.cpu_note == HOST_NOTE else ""
        notes.append(
            f"counters exceed the loss by {d.counters_excess:,} frames (other traffic on "
            f"the DUT{where})"
        )
    return "; ".join(notes) or None


def loss_fields(snap: StatsSnapshot) -> dict:
    """What the JSON result's ``dut`` carries of the attribution: the counters table (rows
    whose counter moved), the last interval's per-core CPU, the notes and the split rule."""
    d = snap.dut
    if d is None:
        return {}
    return {
        "counters": [asdict(r) for r in d.counters if r.frames or r.matched],
        "cpu": [asdict(c) for c in d.cpu],
        "cpu_note": d.cpu_note,
        "counters_note": counters_note(d),
        "attribution_rule": A.SPLIT_RULE,
    }


def simulated_reading(t: float, dropped: int, cores: list[float]) -> CounterReading:
    """The fake engine's DUT: ``dropped`` frames counted by one nftables rule, and CPU
    ticks (100 per second) that give each core ``cores[i]`` % busy, a third in softirq."""
    cpu = []
    for pct in cores:
        busy = round(t * pct)
        soft = busy // 3
        cpu.append((busy - soft, 0, 0, round(t * 100) - busy, 0, 0, soft, 0))
    return CounterReading(
        t, {FAKE_RULE: dropped}, tuple(cpu), cpu_note="simulated (--fake): no DUT is read"
    )
