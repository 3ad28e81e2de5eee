"""A console whose terminal goes away (SIGHUP, e.g. tmux kill-session or a dropped ssh)
must still end, write its result and leave no process: Textual's shutdown can block for good
writing to the dead terminal, so a watchdog exits after FORCED_EXIT_S."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

from tgen_tui.ui.app import FORCED_EXIT_S

from .engine_helpers import profile_yaml, stream_yaml


def _drain(fd: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                os.read(fd, 65536)
            except OSError:
                return


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
        _drain(master, 4.0)  # the console is up and drawing
        os.write(master, b"S")  # start every port, so quitting has ports to stop
        _drain(master, 1.5)
        os.write(master, b"q")  # quit asks "stop the running ports?" and waits for an answer
        _drain(master, 0.5)
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
