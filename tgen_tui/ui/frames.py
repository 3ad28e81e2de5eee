"""Captured frames for the Capture screen: one line each, the layers of one, the filter
check as the operator types, the default file name.

scapy decodes here (reading, never sending), and only the frames the console is handed
(a capture reports its last few frames four times a second, engine/capture.py): the
list decodes each such frame once, the detail pane the one the cursor is on.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from tgen_tui.engine.capture import SELECTOR_STREAM
from tgen_tui.packets.decode import summary

CAPTURE_DIR = "captures"  # under the current directory
_COMMENT = re.compile(r"^stream (?P<name>\S+) seq (?P<seq>\d+)(?: lane (?P<lane>\d+))?")


@dataclass(frozen=True)
class Signed:
    """What a frame's comment says about its signature (``stream up seq 12 lane 0``)."""

    stream: str | None  # None: no signature ("other")
    seq: int | None = None
    lane: int = 0

    def short(self) -> str:
        """``up #12`` (``up #12/1`` on lane 1), or ``other``."""
        if self.stream is None:
            return "other"
        lane = f"/{self.lane}" if self.lane else ""
        return f"{self.stream} #{self.seq}{lane}"


def parse_comment(comment: str) -> Signed:
    m = _COMMENT.match(comment)
    if m is None:
        return Signed(None)
    return Signed(m["name"], int(m["seq"]), int(m["lane"] or 0))


def stamp(ts_ns: int, digits: int = 6) -> str:
    """A CLOCK_REALTIME stamp as local ``HH:MM:SS.ffffff`` (``digits`` of the second)."""
    s, frac = divmod(int(ts_ns), 1_000_000_000)
    head = time.strftime("%H:%M:%S", time.localtime(s))
    return f"{head}.{frac:09d}"[: 9 + digits] if digits else head


def layers(data: bytes) -> str:
    """Every layer and field of the frame: scapy's ``Ether(data).show(dump=True)``."""
    from scapy.layers.l2 import Ether

    try:
        return str(Ether(data).show(dump=True)).rstrip()
    except Exception as e:  # noqa: BLE001 - shown, never raised into the screen
        return f"not decodable: {e}"


def hexdump(data: bytes, per_line: int = 16) -> str:
    """Offset, bytes in hex, and their printable characters, ``per_line`` bytes a line."""
    out = []
    for off in range(0, len(data), per_line):
        chunk = data[off : off + per_line]
        hx = " ".join(f"{b:02x}" for b in chunk).ljust(3 * per_line - 1)
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"{off:04x}  {hx}  {asc}")
    return "\n".join(out)


def filter_problem(text: str, streams: list[str]) -> str | None:
    """What is wrong with a filter as typed (None: it compiles): tgen's selectors
    (``stream NAME``, ``other``, ``arpnd``) or libpcap's message for an expression. The
    engine checks again at the start (engine/capture.py's check_spec)."""
    from tgen_tui.packets.bpf import check_filter

    f = text.strip()
    if f == "other":
        return None
    if f.startswith(SELECTOR_STREAM):
        name = f[len(SELECTOR_STREAM) :].strip()
        if name in streams:
            return None
        return f"no stream {name!r} (streams: {', '.join(streams) or 'none'})"
    return check_filter(f)


def default_file(port: str, now: float | None = None, folder: str = CAPTURE_DIR) -> str:
    """``captures/tgen-p1-20260512-101500.pcapng``: the file a capture of ``port``
    started at ``now`` writes (relative to the current directory)."""
    t = time.localtime(time.time() if now is None else now)
    return str(Path(folder) / f"tgen-{port}-{time.strftime('%Y%m%d-%H%M%S', t)}.pcapng")


__all__ = [
    "CAPTURE_DIR",
    "Signed",
    "default_file",
    "filter_problem",
    "hexdump",
    "layers",
    "parse_comment",
    "stamp",
    "summary",
]
