"""The worker process: protocol, pinning, counting end to end, and dying with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tgen_tui.packets.program import program_to_dict
from tgen_tui.worker.client import FLOW_WORKER, FRAME_WORKER, WorkerClient, WorkerError
from tgen_tui.worker.counters import CounterView

from .wk_helpers import make_program

CORE = max(os.sched_getaffinity(0))


class WorkerProc(WorkerClient):
    """The shared worker client, killed (not asked to quit) at the end of a test."""

    def __init__(self, core: int = CORE):
        super().__init__(core)

    def expect(self, event: str, timeout: float = 10.0):
        try:
            return super().expect(event, timeout)
        except WorkerError as e:
            raise AssertionError(str(e)) from None

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(5)


@pytest.fixture
def worker():
    w = WorkerProc()
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def shm_path():
    path = f"/dev/shm/tgen-wtest-{os.getpid()}-{time.monotonic_ns()}.ctr"
    yield path
    if os.path.exists(path):
        os.unlink(path)


def test_hello_and_pinning(worker):
    h = worker.expect("hello")
    assert h["core"] == CORE
    with open(f"/proc/{h['pid']}/status") as f:
        status = f.read()
    line = next(ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list"))
    assert line.split(":")[1].strip() == str(CORE)


@pytest.mark.parametrize(
    "module,what", [(FRAME_WORKER, "worker"), (FLOW_WORKER, "flow worker")], ids=["frames", "flows"]
)
def test_a_failed_pin_is_a_fatal_error_naming_the_core(module, what):
    """Both kinds: a core this process may not use is refused, as a fatal error event that
    names the worker and the core, then exit 3 (the engine fails the worker's ports)."""
    bad = max(os.sched_getaffinity(0)) + 4096
    w = WorkerClient(bad, module=module)
    try:
        e = w.expect("error")
        assert e["fatal"] is True
        assert f"cannot pin the {what} to core {bad}" in e["message"], e["message"]
        assert w.p.wait(10) == 3
    finally:
        if w.p.poll() is None:
            w.p.kill()
        w.p.wait(5)


def test_errors_are_events(worker, shm_path):
    worker.expect("hello")
    worker.send(cmd="frobnicate", id=1)
    e = worker.expect("error")
    assert "frobnicate" in e["message"] and e["id"] == 1 and e["fatal"] is False
    worker.send(cmd="start")
    assert "not configured" in worker.expect("error")["message"]
    worker.send(cmd="ping", id=2)
    assert worker.expect("pong")["id"] == 2
    worker.p.stdin.write(b"{not json\n")  # a bad line is an error event; the worker lives on
    worker.p.stdin.flush()
    worker.expect("error")
    worker.send(
        cmd="configure",
        shm=shm_path,
        n_streams=1,
        ports=[{"name": "x", "interface": "no-such-if0", "netns": None, "rx": True}],
    )
    worker.expect("error")
    worker.send(cmd="quit")
    worker.expect("bye")
    assert worker.p.wait(5) == 0


def test_stdin_eof_exits(worker):
    worker.expect("hello")
    worker.p.stdin.close()
    assert worker.p.wait(5) == 0


@pytest.mark.root
def test_run_counts_end_to_end(worker, veth, shm_path):
    pytest.importorskip("tgen_tui.packets.batch")
    worker.expect("hello")
    progs = [
        program_to_dict(make_program(index=0, size=64, pps=20000.0, count=3000)),
        program_to_dict(make_program(index=2, size=128, pps=2000.0, count=300)),
    ]
    worker.send(
        cmd="configure",
        shm=shm_path,
        n_streams=3,
        ports=[
            {
                "name": "a",
                "interface": veth.if_a,
                "netns": veth.ns_a,
                "rx": False,
                "tx_streams": progs,
            },
            {"name": "b", "interface": veth.if_b, "netns": veth.ns_b, "rx": True, "tx_streams": []},
        ],
    )
    ready = worker.expect("ready")
    assert ready["rx_tables"] == {"b": 0}
    assert [t["stream"] for t in ready["tx"]] == [0, 2]
    r0 = veth.rx_packets("b")
    worker.send(cmd="start", ports=["a"], t0_ns=time.monotonic_ns() + 50_000_000)
    worker.expect("started")
    worker.expect("tx_done", timeout=20)
    worker.send(cmd="stop", drain_ms=100, id="s")
    stopped = {}
    while len(stopped) < 2:
        m = worker.expect("stopped")
        stopped[m["port"]] = m
    r1 = veth.rx_packets("b")
    a, b = stopped["a"], stopped["b"]
    assert a["counters"]["tx_frames"] == 3300
    assert {s["stream"]: s["tx_frames"] for s in a["streams"]} == {0: 3000, 2: 300}
    assert all(s["due"] == s["tx_frames"] for s in a["streams"])
    assert b["counters"]["rx_frames"] == r1 - r0 == 3300
    assert b["counters"]["rx_other"] == 0 and b["counters"]["ring_drops"] == 0
    snap = CounterView.open(shm_path).snapshot()
    rx = snap["rx"][0]
    assert rx[0]["frames"] == 3000 and rx[2]["frames"] == 300
    assert rx[0]["bytes"] == 3000 * 64 and rx[2]["bytes"] == 300 * 128
    # latency from the kernel's transmit timestamps: every 32nd frame at 20 kfps, every
    # 2nd at 2 kfps (tgen_tui.worker.txstamps.sample_every), all of them joined
    for s, every in ((0, 32), (2, 2)):
        assert rx[s]["ooo"] == 0 and rx[s]["dup"] == 0
        assert rx[s]["lat_every"] == every and rx[s]["lat_unstamped"] == 0
        assert rx[s]["lat_count"] == -(-rx[s]["frames"] // every) == sum(rx[s]["hist"])
        assert 0 <= rx[s]["lat_min_ns"] <= rx[s]["lat_max_ns"]
    assert rx[0]["max_seq"] == 2999 and rx[2]["max_seq"] == 299
    assert snap["tx"][0]["tx_frames"] == 3000 and snap["tx"][1]["requested_mpps"] == 2_000_000
    # clear, set_rate, and a second start of the same port
    worker.send(cmd="clear")
    worker.expect("cleared")
    worker.send(cmd="set_rate", stream=2, pps=5000.0)
    assert worker.expect("rate")["pps"] == 5000.0
    worker.send(cmd="start", ports=["a"], t0_ns=time.monotonic_ns())
    worker.expect("started")
    worker.expect("tx_done", timeout=20)
    worker.send(cmd="stop", ports=["a", "b"], drain_ms=100)
    worker.expect("stopped")
    worker.expect("stopped")
    snap = CounterView.open(shm_path).snapshot()
    rx = snap["rx"][0]
    assert rx[0]["frames"] == 6000 and rx[0]["dup"] == 0 and rx[0]["clears"] == 1
    worker.send(cmd="quit")
    worker.expect("bye")
    assert worker.p.wait(5) == 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(ln for ln in f if ln.startswith("State:"))
    except (FileNotFoundError, ProcessLookupError):
        return False
    return " Z " not in state and "zombie" not in state


def test_parent_sigkill_kills_worker():
    # an intermediate parent spawns the worker, prints its pid, and waits
    code = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        w = subprocess.Popen([sys.executable, "-m", "tgen_tui.worker", "--core", "{CORE}",
                              "--parent-pid", str(os.getpid())],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = w.stdout.readline()
        print(w.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=os.getcwd())
    try:
        wpid = int(parent.stdout.readline())
        assert _alive(wpid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(5)
        end = time.monotonic() + 5
        while _alive(wpid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(wpid), "worker outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(5)


def test_worker_refuses_wrong_parent():
    p = subprocess.run(
        [sys.executable, "-m", "tgen_tui.worker", "--parent-pid", "1"],
        input=b"",
        capture_output=True,
        timeout=20,
    )
    assert p.returncode == 3


def test_killed_worker_shows_dead(worker):
    worker.expect("hello")
    worker.p.send_signal(signal.SIGKILL)
    assert worker.p.wait(5) == -signal.SIGKILL
    # its event stream ends (EOF), nobody hangs
    end = time.monotonic() + 5
    while time.monotonic() < end:
        if worker.q.get(timeout=5) is None:
            break
    else:
        raise AssertionError("no EOF from a dead worker")


def test_worker_is_import_light():
    code = (
        "import sys, tgen_tui.worker.main, tgen_tui.packets.schedule, tgen_tui.packets.batch;"
        "bad = [m for m in ('trio', 'textual', 'scapy', 'pydantic', 'psutil') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
