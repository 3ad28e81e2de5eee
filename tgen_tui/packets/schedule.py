"""Due times of a stream's frames, from its :class:`~tgen_tui.packets.program.Schedule`.

Import-light (stdlib + numpy): used by the worker's pacer and by the engine's pcap export.
Times are seconds relative to the port start (the engine's common ``t0``), as float64.

Model
-----
Frame ``i`` (0-based) of a stream is due at ``start_s + a(i)`` where ``a(i)`` is the
*active time* of the frame, mapped through the on/off pattern when there is one.

- **constant** (default): ``a(i) = i / pps``.
- **multi-burst** (``burst > 0``): ``burst`` frames at ``pps``, then a gap of
  ``burst_gap_s`` counted from the end of the burst's slot (``burst / pps``), so the
  burst period is ``burst / pps + burst_gap_s`` and frame ``i`` is due at
  ``(i // burst) * period + (i % burst) / pps``.
- **on/off** (``on_s > 0``): frames only during the "on" phases of a period
  ``on_s + off_s``.  With a constant IDT each on-phase carries exactly
  ``round(on_s * pps)`` frames, at ``1/pps`` from the phase start.  With a random IDT
  (or together with multi-burst) the IDT process runs on a clock that only advances while
  "on": active time ``v`` maps to ``floor(v / on_s) * (on_s + off_s) + (v mod on_s)``.
- **random inter-departure times** (``idt``), mean ``1/pps``; frame 0 is due at
  ``start_s`` and frame ``i`` after the sum of the ``i`` preceding gaps:

  =============  ==================================  =============================
  idt            idt_params                          gap
  =============  ==================================  =============================
  exponential    ()                                  ``-ln(u) / pps`` (Poisson)
  pareto         (shape a > 1,) default 1.5          ``x_m * u**(-1/a)``,
                                                     ``x_m = (a-1) / (a * pps)``
  normal         (sd,) default 0.1, relative to      ``max(0, (1 + sd*z) / pps)``
                 the mean gap (coefficient of var.)
  uniform        (w,) default 0.5, relative          ``(1 + w*(2u-1)) / pps``, ≥ 0
                 half-width
  gamma          (k,) default 2, the shape           Marsaglia-Tsang (3 tries; k < 1
                                                     boosted by ``u**(1/k)``), ``× mean/k``
  weibull        (k,) default 1.5, the shape         ``λ (-ln u)**(1/k)``,
                                                     ``λ = mean / Γ(1 + 1/k)``
  lognormal      (σ,) default 0.5, of ln(gap)        ``exp(μ + σ z)``, ``μ = ln mean - σ²/2``
  cauchy         (s,) default 0.1, the scale         location = mean, scale ``s × mean``,
                 relative to the mean gap            **truncated** to ``0 .. 2 × mean``
                                                     (symmetric, so the mean holds)
  =============  ==================================  =============================

  Every law but pareto and uniform holds the mean rate exactly: the gaps of each block of
  ``MEAN_BLOCK`` (4096) frames are scaled (by 1 +- 1.6 % for exponential) so that they
  sum to 4096 mean gaps, so a 5 s run at 10 kpps is at the asked rate, not 0.45 % (one
  standard deviation of 50,000 draws) off it (D-ITG's mean-rate guarantee, ``-j``).
  A pareto tail would be flattened by it (one gap can hold most of a block's sum); a
  bounded uniform is within 0.5 % anyway and keeps its exact bounds.

  ``u`` comes from a counter-based PRNG (splitmix64 of ``Schedule.key`` and the frame
  index), so the same key and index always give the same gap.  Gaps are quantised to
  ticks of 2**-32 s and summed in int64, which makes due times exact and independent of
  how the index range is split into calls (sequential calls reuse a running cursor;
  random access restarts from the nearest checkpoint).

``count`` limits the number of frames; ``stop_s`` drops every frame due at or after
``stop_s`` (relative to the port start, like ``start_s``).
"""

from __future__ import annotations

import math

import numpy as np

from tgen_tui.packets.prng import splitmix64
from tgen_tui.packets.program import Schedule
from tgen_tui.packets.rateshape import RateShape

TICKS_PER_S = 1 << 32  # random-IDT gaps are quantised to 2**-32 s (0.23 ns)
_CHECKPOINT = 1 << 16  # random IDT: remember the running sum every 65536 frames
_MAX_BLOCK = 1 << 20
_MAX_GAP_TICKS = float(1 << 42)  # one random gap is capped at 1024 s

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)

IDTS = (
    "constant",
    "exponential",
    "pareto",
    "normal",
    "uniform",
    "gamma",
    "weibull",
    "lognormal",
    "cauchy",
    "quake3",
)
#: D-ITG's Quake3 gaps (ITGSend traffic.cpp, QuakeParser, after Lang, Branch and Armitage,
#: "A synthetic traffic model for Quake3", ACE 2004): with p 0.6 exponential of mean 4.29
#: ms, else a constant 10.75 ms; as fractions of their mean gap 6.874 ms (145.5 pps)
QUAKE3_MEAN_MS = 0.6 * 4.29 + 0.4 * 10.75
QUAKE3_PARTS = (0.6, 4.29 / QUAKE3_MEAN_MS, 10.75 / QUAKE3_MEAN_MS)
#: each law's parameter when the schedule gives none (the profile model's defaults)
IDT_DEFAULTS = {
    "pareto": 1.5,
    "normal": 0.1,
    "uniform": 0.5,
    "gamma": 2.0,
    "weibull": 1.5,
    "lognormal": 0.5,
    "cauchy": 0.1,
}
# laws whose gaps are rescaled per block of MEAN_BLOCK frames so that the mean rate is exact
# over every block (a heavy-tailed pareto would be distorted by it; a bounded uniform is
# within 0.5 % anyway and keeps its exact bounds)
MEAN_HELD = ("exponential", "normal", "gamma", "weibull", "lognormal", "cauchy", "quake3")
MEAN_BLOCK = 4096
_GAMMA_TRIES = 3  # Marsaglia-Tsang candidates per gap (each accepted with p >= 0.95)


def uniform01(key: int, idx: np.ndarray, lane: int = 0) -> np.ndarray:
    """Counter-based uniforms in (0, 1): a pure function of (key, lane, idx)."""
    with np.errstate(over="ignore"):
        k = splitmix64(np.array([(key * 4 + lane) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
        x = splitmix64(idx.astype(np.uint64) ^ k)
    return ((x >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / (1 << 53))


def uniform_lane(key: int, idx: np.ndarray, lane: int) -> np.ndarray:
    """Uniforms of any lane number: lanes 0-3 are :func:`uniform01`'s, higher lanes come
    from a derived key, so a law may draw as many independent uniforms per frame as it needs."""
    if lane < 4:
        return uniform01(key, idx, lane)
    derived = (key ^ (0x9E3779B97F4A7C15 * (lane // 4))) & 0xFFFFFFFFFFFFFFFF
    return uniform01(derived, idx, lane % 4)


def normal_lane(key: int, idx: np.ndarray, lane: int) -> np.ndarray:
    """Standard normals by Box-Muller from uniform lanes ``lane`` and ``lane + 1``."""
    u1 = uniform_lane(key, idx, lane)
    u2 = uniform_lane(key, idx, lane + 1)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


def gamma_unit(key: int, idx: np.ndarray, shape: float) -> np.ndarray:
    """Gamma(shape, 1) draws, a pure function of (key, idx): Marsaglia and Tsang's method
    (ACM TOMS 26(3), 2000) with a fixed number of candidates per frame, so it vectorises;
    the rare frame with no candidate accepted (p < 1e-4 for shape >= 1) keeps its last
    candidate. Shapes below 1 draw Gamma(shape + 1) and multiply by ``u**(1/shape)``."""
    k = shape if shape >= 1.0 else shape + 1.0
    d = k - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = np.empty(len(idx), dtype=np.float64)
    todo = np.ones(len(idx), dtype=bool)
    for t in range(_GAMMA_TRIES):
        z = normal_lane(key, idx, 3 * t)
        u = uniform_lane(key, idx, 3 * t + 2)
        v = (1.0 + c * z) ** 3
        ok = v > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            accept = ok & (np.log(u) < 0.5 * z * z + d - d * v + d * np.log(np.where(ok, v, 1)))
        take = todo & (accept | (t == _GAMMA_TRIES - 1))
        out[take] = d * np.where(ok, v, 1e-12)[take]
        todo &= ~take
    if shape < 1.0:
        out *= uniform_lane(key, idx, 3 * _GAMMA_TRIES) ** (1.0 / shape)
    return out


def cauchy_bounds(scale: float) -> tuple[float, float]:
    """The Cauchy CDF at 0 and at 2 × the mean gap (location = mean, scale relative)."""
    half = math.atan(1.0 / scale) / math.pi
    return 0.5 - half, 0.5 + half


class DueTimes:
    """Due times for one stream's schedule.

    ``due(start, n)`` returns the due times of frames ``start .. start+n-1`` (float64
    seconds since the port start; frames beyond ``total()`` are still computed, the
    caller limits itself with ``count_until``/``total``).  ``count_until(t)`` is the number of
    frames due at or before ``t`` (honouring ``count`` and ``stop_s``); ``total()`` is the
    number of frames the stream will ever send, or None if it runs until stopped.
    """

    def __init__(self, schedule: Schedule):
        s = schedule
        if not (s.pps > 0 and math.isfinite(s.pps)):
            raise ValueError(f"schedule pps must be > 0, got {s.pps!r}")
        if s.idt not in IDTS:
            raise ValueError(f"unknown idt {s.idt!r}; expected one of {', '.join(IDTS)}")
        if s.on_s < 0 or s.off_s < 0 or s.burst < 0 or s.burst_gap_s < 0:
            raise ValueError("on_s, off_s, burst and burst_gap_s must be >= 0")
        self.shape: RateShape | None = None
        if s.shape:
            if (s.on_s > 0 and s.off_s > 0) or s.burst:
                raise ValueError("a rate shape does not combine with on/off or multi-burst")
            self.shape = RateShape(s.pps, s.shape, s.shape_repeat, s.shape_phase_s)
        self.schedule = s
        self.pps = float(s.pps)
        self.start_s = float(s.start_s)
        self.on_s = float(s.on_s)
        self.period_s = float(s.on_s + s.off_s)
        self.onoff = s.on_s > 0 and s.off_s > 0
        self.burst = int(s.burst)
        self.burst_period_s = self.burst / self.pps + float(s.burst_gap_s) if self.burst else 0.0
        self.random = s.idt != "constant"
        self.per_on = 0
        if self.onoff and not self.random and not self.burst:
            self.per_on = max(1, round(s.on_s * s.pps))  # count-based on/off
        p = tuple(s.idt_params)
        if s.idt == "pareto":
            self._shape = float(p[0]) if p else 1.5
            if self._shape <= 1.0:
                raise ValueError("pareto shape must be > 1 for a finite mean")
        elif s.idt == "normal":
            self._sd = float(p[0]) if p else 0.1
        elif s.idt == "uniform":
            self._w = float(p[0]) if p else 0.5
        elif s.idt in IDT_DEFAULTS:
            self._param = float(p[0]) if p else IDT_DEFAULTS[s.idt]
            if not (self._param > 0 and math.isfinite(self._param)):
                raise ValueError(f"{s.idt} parameter must be > 0, got {self._param!r}")
        # random IDT state: checkpoints of the running tick sum (tick of frame k*CHECKPOINT)
        self._ck: list[int] = [0]
        self._cur_idx = 0  # running cursor: tick of frame _cur_idx
        self._cur_tick = 0
        # cache for count_until on random schedules: last block of wall times
        self._blk_idx = 0
        self._blk: np.ndarray | None = None
        self._total: int | None | bool = False  # False = not computed yet
        self._factors: dict[int, float] = {}  # MEAN_HELD: block -> scale

    # ------------------------------------------------------------------ active time
    def _gap_ticks(self, idx: np.ndarray) -> np.ndarray:
        """Gap after frame idx (to frame idx+1), in int64 ticks."""
        s = self.schedule
        g = self._raw_gaps(idx)
        if s.idt in MEAN_HELD:  # the mean-rate guarantee: each block sums to its mean
            blocks, which = np.unique(idx // MEAN_BLOCK, return_inverse=True)
            g = g * np.array([self._block_factor(int(b)) for b in blocks])[which]
        g = np.minimum(np.rint(g), _MAX_GAP_TICKS)  # pathological pareto tails
        t = g.astype(np.int64)
        if self.burst:
            t[(idx + 1) % self.burst == 0] += int(round(s.burst_gap_s * TICKS_PER_S))
        return t

    def _block_factor(self, b: int) -> float:
        """The scale that makes the gaps of block ``b`` (MEAN_BLOCK frames) sum to exactly
        MEAN_BLOCK mean gaps, so the mean rate holds over every block (D-ITG's mean-rate
        guarantee) while each gap keeps its law (the scale is 1 +- 1.6 % for exponential)."""
        f = self._factors.get(b)
        if f is None:
            raw = self._raw_gaps(np.arange(b * MEAN_BLOCK, (b + 1) * MEAN_BLOCK, dtype=np.int64))
            f = MEAN_BLOCK * (TICKS_PER_S / self.pps) / float(raw.sum())
            if len(self._factors) > 64:
                self._factors.clear()
            self._factors[b] = f
        return f

    def _raw_gaps(self, idx: np.ndarray) -> np.ndarray:
        """The law's own gaps after frames ``idx``, in (float) ticks."""
        s = self.schedule
        mean = TICKS_PER_S / self.pps
        u = uniform01(s.key, idx)
        if s.idt == "exponential":
            g = -np.log(u) * mean
        elif s.idt == "pareto":
            a = self._shape
            g = (mean * (a - 1.0) / a) * np.power(u, -1.0 / a)
        elif s.idt == "normal":
            z = normal_lane(s.key, idx, 0)
            g = np.maximum(0.0, mean * (1.0 + self._sd * z))
        elif s.idt == "uniform":
            g = np.maximum(0.0, mean * (1.0 + self._w * (2.0 * u - 1.0)))
        elif s.idt == "quake3":
            p_exp, m_exp, m_const = QUAKE3_PARTS
            pick = uniform_lane(s.key, idx, 1) < p_exp
            g = mean * np.where(pick, -np.log(u) * m_exp, m_const)
        else:
            g = self._shaped_gaps(idx, u, mean)
        return g

    def _shaped_gaps(self, idx: np.ndarray, u: np.ndarray, mean: float) -> np.ndarray:
        """Gaps of the gamma, weibull, lognormal and truncated cauchy laws (mean ``mean``)."""
        law, p, key = self.schedule.idt, self._param, self.schedule.key
        if law == "gamma":
            return gamma_unit(key, idx, p) * (mean / p)
        if law == "weibull":
            return (mean / math.gamma(1.0 + 1.0 / p)) * np.power(-np.log(u), 1.0 / p)
        if law == "lognormal":
            return np.exp(math.log(mean) - 0.5 * p * p + p * normal_lane(key, idx, 0))
        lo, hi = cauchy_bounds(p)  # cauchy, truncated to 0 .. 2 * mean
        return mean * (1.0 + p * np.tan(np.pi * (lo + u * (hi - lo) - 0.5)))

    def _ticks_from(self, base_idx: int, base_tick: int, start: int, n: int) -> np.ndarray:
        """Ticks of frames start..start+n-1, given the tick of frame base_idx <= start."""
        m = start + n - base_idx
        out = np.empty(m, dtype=np.int64)
        out[0] = base_tick
        if m > 1:
            g = self._gap_ticks(np.arange(base_idx, start + n - 1, dtype=np.int64))
            np.cumsum(g, out=out[1:])
            out[1:] += base_tick
        # remember checkpoints we passed
        k0 = len(self._ck)
        while k0 * _CHECKPOINT < start + n and k0 * _CHECKPOINT >= base_idx:
            self._ck.append(int(out[k0 * _CHECKPOINT - base_idx]))
            k0 += 1
        return out[start - base_idx :]

    def _random_ticks(self, start: int, n: int) -> np.ndarray:
        if start >= self._cur_idx:
            base_idx, base_tick = self._cur_idx, self._cur_tick
        else:
            base_idx, base_tick = 0, 0
        k = min(start // _CHECKPOINT, len(self._ck) - 1)
        if k * _CHECKPOINT > base_idx:
            base_idx, base_tick = k * _CHECKPOINT, self._ck[k]
        # bound temporary memory when the cursor is far behind: walk in blocks
        while start - base_idx > _MAX_BLOCK:
            step = self._ticks_from(base_idx, base_tick, base_idx + _MAX_BLOCK, 1)
            base_idx, base_tick = base_idx + _MAX_BLOCK, int(step[0])
        out = self._ticks_from(base_idx, base_tick, start, n)
        self._cur_idx = start + n - 1
        self._cur_tick = int(out[-1])
        return out

    def _active(self, start: int, n: int) -> np.ndarray:
        """Active time (s) of frames start..start+n-1 (burst gaps included, on/off not)."""
        if self.random:
            return self._random_ticks(start, n).astype(np.float64) * (1.0 / TICKS_PER_S)
        i = np.arange(start, start + n, dtype=np.int64)
        if self.burst:
            q, r = np.divmod(i, self.burst)
            return q * self.burst_period_s + r / self.pps
        return i / self.pps

    # ------------------------------------------------------------------ public API
    def due(self, start: int, n: int) -> np.ndarray:
        """Due times (s since port start) of frames start .. start+n-1."""
        if start < 0 or n < 0:
            raise ValueError("start and n must be >= 0")
        if n == 0:
            return np.empty(0, dtype=np.float64)
        if self.per_on:
            i = np.arange(start, start + n, dtype=np.int64)
            q, r = np.divmod(i, self.per_on)
            return self.start_s + (q * self.period_s + r / self.pps)
        if self.shape is not None:  # frame units through the shape's inverse integral
            if self.random:
                u = self._random_ticks(start, n).astype(np.float64) * (self.pps / TICKS_PER_S)
            else:
                u = np.arange(start, start + n, dtype=np.float64)
            return self.start_s + self.shape.time_of(u)
        a = self._active(start, n)
        if self.onoff:
            q = np.floor(a / self.on_s)
            a = q * self.period_s + (a - q * self.on_s)
        return self.start_s + a

    def due_one(self, i: int) -> float:
        """Due time of frame i; a scalar fast path, bit-identical to ``due(i, 1)[0]``."""
        if self.per_on:
            q, r = divmod(i, self.per_on)
            return self.start_s + (float(q) * self.period_s + float(r) / self.pps)
        if not self.random and not self.onoff and self.shape is None:
            if self.burst:
                q, r = divmod(i, self.burst)
                return self.start_s + (float(q) * self.burst_period_s + float(r) / self.pps)
            return self.start_s + float(i) / self.pps
        return float(self.due(i, 1)[0])

    _due1 = due_one

    def _count_le(self, t: float) -> int:
        """Frames due at or before t, ignoring count and stop_s."""
        if t < self.start_s:
            return 0
        if self.random or (self.onoff and not self.per_on):
            return self._count_le_search(t)
        x = t - self.start_s
        if self.shape is not None:
            n = math.floor(self.shape.frames_until(x)) + 1  # total() caps a shape sent once
        elif self.per_on:
            q = math.floor(x / self.period_s)
            r = x - q * self.period_s
            n = q * self.per_on + min(self.per_on, math.floor(r * self.pps) + 1)
        elif self.burst:
            q = math.floor(x / self.burst_period_s)
            r = x - q * self.burst_period_s
            n = q * self.burst + min(self.burst, math.floor(r * self.pps) + 1)
        else:
            n = math.floor(x * self.pps) + 1
        n = max(0, int(n))
        # fix up float rounding so that due(i) <= t  <=>  i < n
        while self._due1(n) <= t:
            n += 1
        while n > 0 and self._due1(n - 1) > t:
            n -= 1
        return n

    def _count_le_search(self, t: float) -> int:
        blk = self._blk
        if blk is None or (t < blk[0] and self._blk_idx > 0):
            # restart from the last checkpoint whose due time is <= t
            cks = self._ck
            j = len(cks) - 1
            while j > 0 and self._due1(j * _CHECKPOINT) > t:
                j -= 1
            self._blk_idx = j * _CHECKPOINT
            blk = self._blk = self.due(self._blk_idx, 1024)
        while blk[-1] <= t:
            nxt = self._blk_idx + len(blk)
            mean_rate = self.pps
            est = int((t - blk[-1]) * mean_rate * 1.25) + 1024
            blk = self._blk = self.due(nxt, min(_MAX_BLOCK, est))
            self._blk_idx = nxt
        return self._blk_idx + int(np.searchsorted(blk, t, side="right"))

    def total(self) -> int | None:
        """Frames the stream will send in all (count and stop_s), or None if unbounded."""
        if self._total is False:
            s = self.schedule
            tot = s.count
            once = self.shape.total_frames() if self.shape is not None else None
            if once is not None:  # a shape sent once: the frames of its integral
                end = self.start_s + self.shape.period_s - self.shape.phase_s  # type: ignore[union-attr]
                n_end = self._count_le(end) if self.random else math.ceil(once - 1e-9)
                tot = n_end if tot is None else min(tot, n_end)
            if s.stop_s is not None:
                n_stop = self._count_le(math.nextafter(float(s.stop_s), -math.inf))
                tot = n_stop if tot is None else min(tot, n_stop)
            self._total = tot
        return self._total  # type: ignore[return-value]

    def count_until(self, t: float) -> int:
        """Number of frames due at or before ``t`` (s since port start), capped by total()."""
        n = self._count_le(t)
        tot = self.total()
        return n if tot is None else min(n, tot)

    def rate_at(self, t: float) -> float:
        """The asked rate (frames/s) at ``t`` (s since the port start): the shape's rate
        there, else the schedule's rate (0 before the start and after the stop)."""
        s = self.schedule
        if t < self.start_s or (s.stop_s is not None and t >= s.stop_s):
            return 0.0
        if self.shape is not None:
            return self.shape.rate_at(t - self.start_s)
        return self.pps

    def shape_phase(self, t: float) -> float:
        """Where in its shape the stream is at ``t`` (s since the port start), for a
        re-based schedule (a rate change keeps the shape's phase)."""
        return self.schedule.shape_phase_s + max(0.0, t - self.start_s)

    def mean_pps(self) -> float:
        """Long-run mean rate (frames/s) including burst gaps and off phases."""
        if self.shape is not None:
            return self.shape.mean_pps()
        r = self.pps
        if self.burst:
            r = self.burst / self.burst_period_s
        if self.onoff:
            if self.per_on:
                r = self.per_on / self.period_s
            else:
                r = r * self.on_s / self.period_s
        return r


def is_on(schedule: Schedule, t: float) -> bool:
    """Whether the schedule has its stream or flow sending at ``t`` (s since the port
    start): after ``start_s``, before ``stop_s``, and in an "on" phase of the on/off
    pattern (the same phases :class:`DueTimes` makes frames due in). A socket flow that
    sends as fast as TCP lets it is switched by this; its count does not apply."""
    if t < schedule.start_s or (schedule.stop_s is not None and t >= schedule.stop_s):
        return False
    if not (schedule.on_s > 0 and schedule.off_s > 0):
        return True
    return (t - schedule.start_s) % (schedule.on_s + schedule.off_s) < schedule.on_s


def due_times(schedule: Schedule, n: int, start: int = 0) -> np.ndarray:
    """Convenience: due times of frames start..start+n-1 of a schedule."""
    return DueTimes(schedule).due(start, n)


__all__ = [
    "DueTimes",
    "due_times",
    "gamma_unit",
    "is_on",
    "uniform01",
    "TICKS_PER_S",
    "IDTS",
    "IDT_DEFAULTS",
    "QUAKE3_PARTS",
]
