"""A stream's rate over time: steps and linear ramps, once or repeated.

Why: real traffic is not a constant rate ("10 Mpps for 10 s, then 20 Mpps"; TRex's ramp-up),
and a DUT's queues, conntrack and policers answer to the changes. The shape is a list of
segments ``(duration_s, m_start, m_end)``: the rate goes linearly from ``pps × m_start`` to
``pps × m_end`` over the segment (a step has m_start == m_end), where ``pps`` is the
schedule's rate (the shape's peak, so scaling the rate scales the whole shape).

Frames stay against absolute deadlines (DESIGN rule 7): frame ``u`` (in frame units, the
``u``-th frame of the shape) is due when the integral of the rate reaches ``u``, so
``N(t) = ∫ rate`` gives the count due by ``t`` and "achieved" stays exact. Inverting a ramp
is a quadratic: ``τ = 2x / (r0 + sqrt(r0² + 2 a x))`` (``a`` the slope, ``x`` the frames
into the segment), which is exact for ``a = 0`` too. Import-light (stdlib + numpy): the
worker's pacer uses it.
"""

from __future__ import annotations

import math

import numpy as np

MAX_SEGMENTS = 1000


class RateShape:
    """The integral of a shaped rate and its inverse, vectorised."""

    def __init__(
        self,
        pps: float,
        segments: tuple[tuple[float, float, float], ...],
        repeat: bool = False,
        phase_s: float = 0.0,
    ) -> None:
        if not segments or len(segments) > MAX_SEGMENTS:
            raise ValueError(f"a rate shape has 1 to {MAX_SEGMENTS} segments")
        d = np.array([float(s[0]) for s in segments])
        m0 = np.array([float(s[1]) for s in segments])
        m1 = np.array([float(s[2]) for s in segments])
        if not (np.all(d > 0) and np.all(m0 >= 0) and np.all(m1 >= 0)):
            raise ValueError("shape segments need a duration > 0 and rates >= 0")
        if not np.all(np.isfinite(d)) or phase_s < 0:
            raise ValueError("shape durations must be finite and the phase >= 0")
        self.pps = float(pps)
        self.repeat = bool(repeat)
        self.r0 = m0 * self.pps
        self.slope = (m1 - m0) * self.pps / d
        self.t_start = np.concatenate([[0.0], np.cumsum(d)])  # segment k starts at t_start[k]
        frames = d * (self.r0 + 0.5 * self.slope * d)
        self.n_start = np.concatenate([[0.0], np.cumsum(frames)])  # frames due before seg k
        self.period_s = float(self.t_start[-1])
        self.period_frames = float(self.n_start[-1])
        if self.period_frames <= 0:
            raise ValueError("a rate shape must send frames (every rate is 0)")
        self.phase_s = float(phase_s)
        self.lead = self._frames_in_period(phase_s) if phase_s else 0.0  # frames before phase

    # ------------------------------------------------------------- time -> frames
    def _frames_in_period(self, t: float) -> float:
        """Frames due in [0, t) of the shape's time (t beyond one period: repeated)."""
        if self.repeat:
            q, r = divmod(t, self.period_s)
            return q * self.period_frames + self._within(r)
        return self._within(min(t, self.period_s))

    def _within(self, t: float) -> float:
        k = min(int(np.searchsorted(self.t_start, t, side="right")) - 1, len(self.r0) - 1)
        tau = t - float(self.t_start[k])
        return float(self.n_start[k] + tau * (self.r0[k] + 0.5 * self.slope[k] * tau))

    def frames_until(self, t: float) -> float:
        """Frames (a real number) due in [0, t) of the stream's time (the phase applied)."""
        return self._frames_in_period(self.phase_s + max(0.0, t)) - self.lead

    def total_frames(self) -> float | None:
        """Frames of a shape sent once (from the phase on); None when it repeats."""
        return None if self.repeat else self.period_frames - self.lead

    def rate_at(self, t: float) -> float:
        """The asked rate (frames/s) at the stream's time ``t``; 0 after a shape sent once."""
        x = self.phase_s + max(0.0, t)
        if self.repeat:
            x = math.fmod(x, self.period_s)
        elif x >= self.period_s:
            return 0.0
        k = min(int(np.searchsorted(self.t_start, x, side="right")) - 1, len(self.r0) - 1)
        return float(self.r0[k] + self.slope[k] * (x - self.t_start[k]))

    # ------------------------------------------------------------- frames -> time
    def time_of(self, u: np.ndarray) -> np.ndarray:
        """The stream time (s) at which the integral reaches ``u`` frames (frame ``u`` is
        due then); ``u`` beyond a shape sent once gets +inf (never due)."""
        u = np.asarray(u, dtype=np.float64) + self.lead
        if self.repeat:
            q = np.floor(u / self.period_frames)
            r = u - q * self.period_frames
        else:
            q = np.zeros_like(u)
            r = u
        k = np.searchsorted(self.n_start, r, side="right") - 1
        k = np.clip(k, 0, len(self.r0) - 1)
        x = r - self.n_start[k]
        r0 = self.r0[k]
        a = self.slope[k]
        disc = np.maximum(r0 * r0 + 2.0 * a * x, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            tau = np.where(x > 0, 2.0 * x / (r0 + np.sqrt(disc)), 0.0)
        t = q * self.period_s + self.t_start[k] + tau - self.phase_s
        if not self.repeat:
            t = np.where(r < self.period_frames, t, np.inf)
        return t

    def mean_pps(self) -> float:
        return self.period_frames / self.period_s


__all__ = ["MAX_SEGMENTS", "RateShape"]
