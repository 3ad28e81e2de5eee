"""A worker lives as long as its parent process, not as long as the thread that forked it.

trio starts processes from its thread cache, whose idle threads end after 10 s; Linux sends
PR_SET_PDEATHSIG when that *thread* exits. Before the fix a live engine lost healthy
workers that way (SIGKILL). These tests fork the worker from a short-lived thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil

SPAWN_FROM_A_THREAD = r"""
import os, subprocess, sys, threading, time
r, w = os.pipe()
# a bystander keeps the pipe's write end open: the worker must not end by EOF on stdin
holder = subprocess.Popen(["sleep", "20"], pass_fds=[w], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
out = []
def spawn():
    out.append(subprocess.Popen(
        [sys.executable, "-m", "tgen_tui.worker", "--parent-pid", str(os.getpid())],
        stdin=r, stdout=subprocess.PIPE))
    out[0].stdout.readline()        # the worker's hello: its death signal is armed
t = threading.Thread(target=spawn)
t.start(); t.join()                 # the forking thread is gone: the death signal fires now
p = out[0]
time.sleep(0.5)
print(p.pid, holder.pid, "alive" if p.poll() is None else f"dead {p.returncode}", flush=True)
os._exit(0)                         # the parent process dies: now the worker must go
"""


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def test_worker_survives_its_forking_thread_and_dies_with_its_parent_process() -> None:
    cp = subprocess.run(
        [sys.executable, "-c", SPAWN_FROM_A_THREAD], capture_output=True, text=True, timeout=60
    )
    assert cp.returncode == 0, cp.stderr
    worker, holder, state = cp.stdout.split(maxsplit=2)
    try:
        assert state.strip() == "alive"  # the thread's exit did not kill it
        assert _gone(int(worker), within=5.0), "the worker outlived its parent process"
    finally:
        for pid in (int(worker), int(holder)):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def test_worker_started_by_a_thread_in_this_process_keeps_running() -> None:
    procs: list[subprocess.Popen] = []

    def spawn() -> None:
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "tgen_tui.worker", "--parent-pid", str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        )
        assert procs[0].stdout is not None and procs[0].stdout.readline()  # hello: armed

    t = threading.Thread(target=spawn)
    t.start()
    t.join()  # the forking thread ends after the worker armed its death signal
    p = procs[0]
    try:
        time.sleep(0.5)
        assert p.poll() is None
    finally:
        p.kill()
        p.wait(timeout=10)
