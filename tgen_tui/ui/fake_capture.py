"""The fake engine's packet captures: frames built from the profile's own programs.

A capture of the fake sees, on its ports, the frames the simulated workers sent (tx) and
received (rx): each one is the program's real frame for its sequence number
(:class:`~tgen_tui.packets.batch.BatchBuilder`: template, varying fields, signature,
checksums), so the console decodes what a real capture would hand it. The received
copies are the frames as sent (the fake has no NAT: addresses are not translated).

The filter is checked by the engine's own :func:`~tgen_tui.engine.capture.check_spec`
(libpcap's compiler on a dead handle, so a bad filter is the same one-line BadInput) and
applied by running libpcap's classic BPF program over the frames (:func:`bpf_match`);
``stream NAME`` keeps that stream's frames, ``other`` none (every fake frame is signed).

Status as the capture process reports it (engine/capture.py): every STATUS_S of the
fake's clock a new :class:`~tgen_tui.engine.capture.CaptureView` with the counts and the
last RECENT_N frames. The counts are the frames on the ports since the start times the
share of 256 of each program's frames that the filter passes; the budget (frames kept
per second) holds back the rest as "over budget"; the ring never fills. The file is a
real pcapng of the frames the fake built (the recent ones, not every frame counted).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tgen_tui.diagnostics import BadInput
from tgen_tui.engine.capture import CaptureSpec, CaptureView, RecentFrame, check_spec
from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.pcapng import (
    FLAG_INBOUND,
    FLAG_OUTBOUND,
    interface_block,
    packet_blocks,
    section_header,
)

STATUS_S = 0.25  # as the capture process's status lines
RECENT_N = 16  # frames in each status
RECENT_BYTES = 512
SAMPLE = 256  # frames of each program the filter is tried on (its share of the counts)
RX_DELAY_NS = 20_000  # a received copy's stamp after the sent one's
ACTIVE = ("waiting", "starting", "running")


# ---------------------------------------------------------------------- classic BPF
_WIDTH = {0x00: 4, 0x08: 2, 0x10: 1}  # BPF_W, BPF_H, BPF_B
_ALU = {
    0x00: lambda a, v: a + v,
    0x10: lambda a, v: a - v,
    0x20: lambda a, v: a * v,
    0x30: lambda a, v: a // v,
    0x40: lambda a, v: a | v,
    0x50: lambda a, v: a & v,
    0x60: lambda a, v: a << v,
    0x70: lambda a, v: a >> v,
    0x80: lambda a, v: -a,
    0x90: lambda a, v: a % v,
    0xA0: lambda a, v: a ^ v,
}
_JUMP = {
    0x10: lambda a, v: a == v,
    0x20: lambda a, v: a > v,
    0x30: lambda a, v: a >= v,
    0x40: lambda a, v: bool(a & v),
}


class _Reject(Exception):
    """An out-of-bounds load or a division by zero: the frame is not kept."""


def _load(code: int, k: int, x: int, mem: list[int], pkt: bytes) -> int:
    mode, width = code & 0xE0, _WIDTH[code & 0x18]
    if mode == 0x00:  # IMM
        return k
    if mode == 0x80:  # LEN
        return len(pkt)
    if mode == 0x60:  # MEM
        return mem[k & 15]
    if mode == 0xA0:  # MSH: 4 * (pkt[k] & 0xf)
        if k >= len(pkt):
            raise _Reject
        return 4 * (pkt[k] & 0x0F)
    off = k + (x if mode == 0x40 else 0)  # ABS, IND
    if off + width > len(pkt):
        raise _Reject
    return int.from_bytes(pkt[off : off + width], "big")


def bpf_match(insns: list[tuple[int, int, int, int]], pkt: bytes) -> bool:
    """Run a classic BPF program (libpcap's output) over one frame: True when it returns
    a non-zero length. Out-of-bounds loads reject, as the kernel's interpreter does."""
    a = x = pc = 0
    mem = [0] * 16
    try:
        while pc < len(insns):
            code, jt, jf, k = insns[pc]
            pc += 1
            cls, op = code & 0x07, code & 0xF0
            src = x if code & 0x08 else k
            if cls == 0x00:  # LD
                a = _load(code, k, x, mem, pkt)
            elif cls == 0x01:  # LDX
                x = _load(code, k, x, mem, pkt)
            elif cls in (0x02, 0x03):  # ST, STX
                mem[k & 15] = a if cls == 0x02 else x
            elif cls == 0x04:  # ALU
                if op in (0x30, 0x90) and src == 0:
                    raise _Reject
                a = _ALU[op](a, src) & 0xFFFFFFFF
            elif cls == 0x05:  # JMP
                if op == 0x00:
                    pc += k
                else:
                    pc += jt if _JUMP[op](a, src) else jf
            elif cls == 0x06:  # RET
                return bool(a if code & 0x10 else k)
            elif code & 0x80:  # MISC: TXA
                a = x
            else:  # TAX
                x = a
    except (_Reject, KeyError):
        return False
    return False


# ---------------------------------------------------------------------- one capture
@dataclass
class _Source:
    """Frames of one program on one of the capture's ports, in one direction."""

    pos: int  # program position in the Setup
    port: str
    direction: str  # tx | rx
    share: float  # of its frames the filter passes
    base: int  # frames on the port at the start
    last_seq: int  # the newest sequence number already handed over


@dataclass
class SimCapture:
    view: CaptureView
    sources: list[_Source]
    t0: float  # the fake's clock at the start
    last_status: float
    insns: list[tuple[int, int, int, int]] | None
    if_ids: dict[tuple[str, str], int]
    recent: list[RecentFrame] = field(default_factory=list)


class SimCaptures:
    """The fake engine's captures (EngineAPI's start_capture, stop_capture,
    capture_views), over its simulated workers."""

    def __init__(self) -> None:
        self._caps: dict[int, SimCapture] = {}
        self._builders: dict[int, BatchBuilder] = {}
        self._next = 1

    def _builder(self, setup: Any, pos: int) -> BatchBuilder:
        b = self._builders.get(pos)
        if b is None or b.p is not setup.programs[pos]:
            b = self._builders[pos] = BatchBuilder(setup.programs[pos], max_batch=SAMPLE)
        return b

    def start(self, spec: CaptureSpec, setup: Any, sim: Any, now: float) -> CaptureView:
        check_spec(spec, list(setup.port_names), [p.name for p in setup.programs])
        for name in spec.ports:
            if setup.ports[name].host is not None:
                raise BadInput(f"capture on {name}: the port is on another tester host")
        from tgen_tui.packets.bpf import compile_filter

        insns = compile_filter(spec.bpf) if spec.bpf else None
        cid, self._next = self._next, self._next + 1
        sources = []
        for pos, prog in enumerate(setup.programs):
            if spec.other or (spec.stream is not None and prog.name != spec.stream):
                continue
            for port, direction in ((prog.port, "tx"), (prog.rx_port, "rx")):
                if port not in spec.ports or spec.direction not in ("both", direction):
                    continue
                frames = self._builder(setup, pos).frames(0, SAMPLE, 0)
                share = (
                    sum(bpf_match(insns, f) for f in frames) / len(frames)
                    if insns is not None
                    else 1.0
                )
                done = self._count(sim, pos, direction)
                sources.append(_Source(pos, port, direction, share, done, _sent(sim, pos) - 1))
        if_ids: dict[tuple[str, str], int] = {}
        head = [section_header(f"tgen-tui fake engine: capture {spec.describe()}")]
        for port in spec.ports:
            for d in ("rx", "tx"):
                if spec.direction in ("both", d):
                    if_ids[(port, d)] = len(if_ids)
                    head.append(interface_block(f"{port}-{d}", f"fake {port} {d}"))
        with open(spec.file, "wb") as f:
            f.write(b"".join(head))
        view = CaptureView(cid, spec, state="running")
        self._caps[cid] = SimCapture(view, sources, now, now, insns, if_ids)
        return view

    @staticmethod
    def _count(sim: Any, pos: int, direction: str) -> int:
        if pos not in sim.tx:
            return 0
        return _sent(sim, pos) if direction == "tx" else int(sim.received(pos))

    def views(self, setup: Any, sim: Any, now: float, wall: float) -> list[CaptureView]:
        for cap in self._caps.values():
            if cap.view.state in ACTIVE and now - cap.last_status >= STATUS_S:
                self._advance(cap, setup, sim, now, wall)
        return [c.view for c in sorted(self._caps.values(), key=lambda c: c.view.id)]

    def stop(
        self, cid: int, reason: str, setup: Any, sim: Any, now: float, wall: float
    ) -> CaptureView:
        cap = self._caps.get(cid)
        if cap is None:
            raise BadInput(f"no capture {cid}")
        if cap.view.state in ACTIVE:
            self._advance(cap, setup, sim, now, wall)
            cap.view = replace(cap.view, state="done", reason=cap.view.reason or reason)
        return cap.view

    def stop_all(self, reason: str, setup: Any, sim: Any, now: float, wall: float) -> None:
        for cid in list(self._caps):
            self.stop(cid, reason, setup, sim, now, wall)

    # ------------------------------------------------------------------ status
    def _advance(self, cap: SimCapture, setup: Any, sim: Any, now: float, wall: float) -> None:
        spec = cap.view.spec
        cap.last_status = now
        seen = 0
        fresh: list[RecentFrame] = []
        for s in cap.sources:
            done = self._count(sim, s.pos, s.direction)
            if done < s.base:  # a clear started the stream's sequence again
                s.base, s.last_seq = done, -1
            seen += round((done - s.base) * s.share)
            fresh += self._frames(cap, s, setup, sim, wall)
        elapsed = max(0.0, now - cap.t0)
        over = 0
        if spec.budget_pps:
            over = max(0, seen - spec.budget_pps * (int(elapsed) + 1))
        kept, over_count, state, reason = seen - over, 0, cap.view.state, cap.view.reason
        if spec.count and kept >= spec.count:
            over_count, kept = kept - spec.count, spec.count
            state, reason = "done", "count"
        if spec.duration_s and elapsed >= spec.duration_s:
            state, reason = "done", reason or "duration"
        fresh.sort(key=lambda r: r.ts_ns)
        fresh = fresh[-RECENT_N:]
        self._write(cap, fresh)
        cap.recent = (cap.recent + fresh)[-RECENT_N:]
        size = {s.pos: setup.programs[s.pos].sizes.mean for s in cap.sources}
        nbytes = sum(
            round((self._count(sim, s.pos, s.direction) - s.base) * s.share * size[s.pos])
            for s in cap.sources
        )
        cap.view = replace(
            cap.view,
            state=state,
            reason=reason,
            seen=seen,
            kept=kept,
            over_budget=over,
            over_count=over_count,
            bytes=round(nbytes * kept / seen) if seen else 0,
            recent=tuple(cap.recent),
        )

    def _frames(
        self, cap: SimCapture, s: _Source, setup: Any, sim: Any, wall: float
    ) -> list[RecentFrame]:
        """The source's frames sent since the last status that the filter passes (the
        last RECENT_N of them), stamped back from ``wall`` at the stream's rate."""
        newest = _sent(sim, s.pos) - 1
        first = max(s.last_seq + 1, newest - RECENT_N + 1, 0)
        s.last_seq = max(s.last_seq, newest)
        if newest < first:
            return []
        prog = setup.programs[s.pos]
        st = sim.tx.get(s.pos)
        pps = float(st.schedule.pps) if st is not None else 0.0
        block = max(1, setup.n_streams // max(1, setup.lanes))
        out = []
        frames = self._builder(setup, s.pos).frames(first, newest - first + 1, 0)
        for k, data in zip(range(first, newest + 1), frames, strict=True):
            if cap.insns is not None and not bpf_match(cap.insns, data):
                continue
            back = (newest - k) / pps if pps > 0 else 0.0
            ts = round((wall - back) * 1e9) + (RX_DELAY_NS if s.direction == "rx" else 0)
            comment = f"stream {prog.name} seq {k} lane {prog.index // block}"
            out.append(
                RecentFrame(s.port, s.direction, ts, len(data), comment, data[:RECENT_BYTES])
            )
        return out

    def _write(self, cap: SimCapture, frames: list[RecentFrame]) -> None:
        """The frames as Enhanced Packet Blocks at the end of the capture's file."""
        if not frames or not os.path.exists(cap.view.spec.file):
            return
        data = np.frombuffer(b"".join(f.data for f in frames), dtype=np.uint8)
        lens = np.array([len(f.data) for f in frames], dtype=np.int64)
        texts = [f.comment.encode() for f in frames]
        clen = np.array([len(t) for t in texts], dtype=np.int64)
        blob = packet_blocks(
            data,
            np.cumsum(lens) - lens,
            lens,
            np.array([f.length for f in frames], dtype=np.int64),
            np.array([f.ts_ns for f in frames], dtype=np.int64),
            np.array([cap.if_ids[(f.port, f.direction)] for f in frames], dtype=np.uint32),
            np.array(
                [FLAG_OUTBOUND if f.direction == "tx" else FLAG_INBOUND for f in frames],
                dtype=np.uint32,
            ),
            np.frombuffer(b"".join(texts), dtype=np.uint8),
            np.cumsum(clen) - clen,
            clen,
        )
        with open(cap.view.spec.file, "ab") as f:
            f.write(blob)


def _sent(sim: Any, pos: int) -> int:
    st = sim.tx.get(pos)
    return int(st.sent) if st is not None else 0


__all__ = ["SimCaptures", "bpf_match"]
