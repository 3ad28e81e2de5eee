"""A console whose terminal goes away (SIGHUP, e.g. tmux kill-session or a dropped ssh)
must still end, write its result and leave no process: Textual's shutdown can block for good
writing to the dead terminal, so a watchdog exits after FORCED_EXIT_S."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

from tgen_tui.ui.app import FORCED_EXIT_S

from .engine_helpers import profile_yaml, stream_yaml

# CSI and OSC sequences, and the two-byte ones: what Textual writes between the words
ANSI = re.compile(rb"\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b.")


class _Terminal:
    """The console's side of the pty, read as it comes (so the console never blocks
    writing), and a wait for a text to appear on it (escape sequences removed)."""

    def __init__(self, fd: int, p: subprocess.Popen) -> None:
        self.fd, self.p = fd, p
        self.raw = bytearray()

    def _read(self) -> None:
        r, _, _ = select.select([self.fd], [], [], 0.1)
        if r:
            with contextlib.suppress(BlockingIOError):
                self.raw += os.read(self.fd, 65536)

    def wait_for(self, pattern: str, timeout: float) -> None:
        """Read until ``pattern`` (a regular expression) appears in the output that comes
        after this call; fail naming it, with the last output, if the console exits or
        ``timeout`` passes."""
        want = re.compile(pattern.encode())
        start = scanned = len(self.raw)
        end = time.monotonic() + timeout
        while True:
            window = bytes(self.raw[max(start, scanned - 4096) :])  # overlap: split words
            scanned = len(self.raw)
            if want.search(ANSI.sub(b"", window)):
                return
            if self.p.poll() is not None or time.monotonic() > end:
                tail = ANSI.sub(b"", bytes(self.raw[-3000:])).decode(errors="replace")
                why = f"exit {self.p.returncode}" if self.p.poll() is not None else "timeout"
                raise AssertionError(f"{pattern!r} never appeared ({why}); last output: {tail!r}")
            self._read()


def test_a_hung_up_console_ends_and_writes_its_result(nat_lab, write_profile, tmp_path):
    """The real engine (its stop takes a while, and the console keeps drawing meanwhile)."""
    prof = write_profile(profile_yaml(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=2000)))
    out = tmp_path / "r.json"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))  # charts on
    os.set_blocking(master, False)
    env = dict(os.environ, TERM="xterm-256color")
    p = subprocess.Popen(
        [sys.executable, "-m", "tgen_tui", "tui", str(prof), "--no-store", "--json", str(out)],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    try:
        term = _Terminal(master, p)
        term.wait_for(r"State +idle", 60)  # the console is up, its engine described the ports
        os.write(master, b"S")  # start every port, so quitting has ports to stop
        term.wait_for(r"[1-9] running", 30)  # the Total column counts the running ports
        os.write(master, b"q")  # quit asks "stop the running ports?" and waits for an answer
        term.wait_for("Traffic is running on", 30)
        os.close(master)  # the terminal goes away ...
        p.send_signal(signal.SIGHUP)  # ... and the kernel would send this
        rc = p.wait(timeout=FORCED_EXIT_S + 10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 128 + signal.SIGHUP
    doc = json.loads(out.read_text())
    assert doc["signal"] == "SIGHUP"
    assert sum(s["tx_frames"] for s in doc["streams"].values()) > 0
