"""What the console's counters count: the Help screen's "Counters" rows.

Each entry is a label as the screens show it and its meaning in lines of at most 44
characters (the Help screen's column at 80x24), so nothing is cut off on a small terminal.
"""

from __future__ import annotations

GLOSSARY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Tx retries", (
        "send attempts the kernel refused for a",
        "moment (EAGAIN/ENOBUFS) that the worker",
        "retried: frames were not lost (see Lost)",
    )),
    ("Lost frames", (
        "frames of the port's streams that never",
        "arrived (sequence gaps at the receiver)",
    )),
    ("Rx drops", (
        "frames the kernel dropped on receive:",
        "RX ring drops plus interface rx_dropped",
    )),
    ("Due unsent", (
        "frames due by the schedule but not yet",
        "sent: the sender is behind by this many",
    )),
    ("Late max", ("worst lateness of a batch vs its due time",)),
    ("Achieved", ("frames sent / frames due, as % of requested",)),
    ("If tx/rx", ("the kernel's interface counters (frames)",)),
    ("Goodput", (
        "bytes the receiving application read,",
        "per second (socket flows; Main: the flows",
        "the port sends)",
    )),
    ("Jain", (
        "fairness: (sum x)^2 / (n sum x^2) over the",
        "TCP flows due to send; 1 = equal shares",
    )),
    ("Charts", (
        "history kept 60 s at 10 Hz and 10 min at",
        "1 point/s; g switches the window",
    )),
)  # fmt: skip


def glossary_rows() -> list[tuple[str, str]]:
    """(label, one line of its meaning) rows: the label on the first line only."""
    return [
        (label if i == 0 else "", line) for label, lines in GLOSSARY for i, line in enumerate(lines)
    ]


__all__ = ["GLOSSARY", "glossary_rows"]
