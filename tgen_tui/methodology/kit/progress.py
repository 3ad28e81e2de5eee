"""Progress of long runs: a bar on stderr (trial number, l and h, time left) and NDJSON
lines, one per trial, for scripts."""

from __future__ import annotations

import json
import sys
import time
from typing import TextIO

from tgen_tui.results.models import Trial


class Progress:
    """``expected``: the trials the run will take (an estimate, for the bar and the ETA)."""

    def __init__(
        self, expected: int, *, ndjson: TextIO | None = None, quiet: bool = False, label: str = ""
    ) -> None:
        self.expected = max(1, expected)
        self.done = 0
        self.nd = ndjson
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.label = label
        self.unit = "/s"  # after each trial's load (a concurrent search's: " conn")

    def restart(self) -> None:
        """Count from zero again (the next run of a scale-up)."""
        self.expected, self.done, self.t0 = 1, 0, time.monotonic()

    def trial(self, t: Trial, *, l_pps=None, h_pps=None, **context) -> None:
        self.done += 1
        if self.nd is not None:
            rec = {"event": "trial", "n": self.done, **context}
            rec |= t.to_doc(exclude={"extra": {"streams"}})
            rec["l_pps"], rec["h_pps"] = l_pps, h_pps
            self.nd.write(json.dumps(rec, default=str, separators=(",", ":")) + "\n")
            self.nd.flush()
        if self.quiet:
            return
        self.expected = max(self.expected, self.done + 1)
        el = time.monotonic() - self.t0
        left = el / self.done * (self.expected - self.done)
        width = 20
        fill = round(width * self.done / self.expected)
        bar = "#" * fill + "." * (width - fill)
        lh = ""
        if l_pps is not None:
            lh = f"  l {l_pps:,.0f}  h {'-' if h_pps is None else f'{h_pps:,.0f}'}"
        ctx = "  ".join(f"{k} {v}" for k, v in context.items())
        line = (
            f"[{bar}] trial {self.done}/~{self.expected}  {ctx}  {t.rate_pps:,.0f}{self.unit} "
            f"{t.verdict}{lh}  ~{_dur(left)} left"
        )
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line)
        else:
            sys.stderr.write(line + (f"  ({t.reason})" if t.reason else "") + "\n")
        sys.stderr.flush()

    def note(self, text: str) -> None:
        if not self.quiet:
            self.end_line()
            print(text, file=sys.stderr)

    def end_line(self) -> None:
        if self.tty and not self.quiet and self.done:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _dur(s: float) -> str:
    s = int(s)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"
