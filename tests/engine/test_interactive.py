"""The engine driven key by key, as the console does: restart-safe counting, the port
state machine, live rates in any unit, typed events, and no leftovers after SIGKILL."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
import trio

from tgen_tui.engine.api import (
    EngineCommandError,
    PortStateChanged,
    RateChanged,
    RateError,
    StreamPaused,
)
from tgen_tui.engine.controller import open_engine
from tgen_tui.engine.options import EngineOptions
from tgen_tui.packets.compile import compile_profile
from tgen_tui.profiles.loader import load_profile_text

from .engine_helpers import profile_yaml, stream_yaml, wait_sent

TGEN = [sys.executable, "-m", "tgen_tui"]


@pytest.fixture(scope="module")
def nat_lab(make_lab):
    """One NAT lab for this module: its tests only send through the DUT and read counts
    that start at each run (the DUT's settings are never changed here; a test that
    changes them brings up a lab of its own)."""
    with make_lab("nat", "e") as prefix:
        yield prefix


def _compiled(text: str):
    return compile_profile(load_profile_text(text))


@pytest.mark.trio
async def test_three_start_stop_cycles_with_a_clear_count_no_phantom_loss(nat_lab):
    c = _compiled(profile_yaml(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=4000)))
    async with open_engine(c, EngineOptions(drain_ms=300)) as eng:
        cursor = 0
        prev_tx = 0
        for cycle in range(3):
            if cycle == 2:
                await eng.clear()
                prev_tx = 0
            await eng.start(["p0"])
            await wait_sent(eng, {"up": prev_tx + 1501})
            await eng.stop(["p0"])
            snap = await eng.final_snapshot()
            up, p0, p1 = snap.stream("up"), snap.port("p0"), snap.port("p1")
            assert up.tx_frames > prev_tx + 1500, f"cycle {cycle}: too few frames sent"
            assert up.lost == 0 and up.duplicates == 0 and up.out_of_order == 0, cycle
            assert up.rx_frames == up.tx_frames, cycle
            assert up.tx_frames == p0.if_tx_frames, cycle  # the kernel's count of p0
            assert up.rx_frames == p1.if_rx_frames, cycle
            prev_tx = up.tx_frames
            cursor, evs = eng.events_since(cursor)
            states = [e.new for e in evs if isinstance(e, PortStateChanged) and e.port == "p0"]
            assert states == ["starting", "running", "stopping", "stopped"], cycle
        # stopping a stopped port does nothing and says so; p1 never ran
        await eng.stop(["p0"])
        _, evs = eng.events_since(cursor)
        assert any("not running" in e.text() for e in evs)
        assert eng.describe().port("p1").streams == ()


@pytest.mark.trio
async def test_live_rates_in_units_are_applied_and_line_rate_is_refused(direct_lab):
    """A rate set live, in % of line rate or in kpps, is applied to the running stream: the
    rate returned, the RateChanged event and the snapshots' requested rate agree, and the
    stream goes on sending without loss. How closely the sender keeps the new rate over
    wall time is a measurement (benchmarks/live_rate.py), not a pass/fail test."""
    text = (
        profile_yaml(
            direct_lab, stream_yaml("up", "p0", rx_port="p1", nat=False, pps=5000), dut=False
        )
        .replace(
            "netns: " + direct_lab + "-tester}", "netns: " + direct_lab + "-tester, speed: 1G}"
        )
        .replace("size: 64", "size: 256")
    )
    c = _compiled(text)
    assert c.ports["p0"].speed_bps == 1e9

    def rate_events(cursor: int) -> tuple[int, list[tuple]]:
        cursor, evs = eng.events_since(cursor)
        got = [
            (e.stream, e.port, e.old_pps, e.new_pps, e.request)
            for e in evs
            if isinstance(e, RateChanged)
        ]
        return cursor, got

    async with open_engine(c, EngineOptions(drain_ms=200)) as eng:
        await eng.start(["p0", "p1"])
        assert eng.ports["p0"].state == "running"
        cursor, _ = eng.events_since(0)
        s0 = (await wait_sent(eng, {"up": 1})).stream("up")
        assert s0.requested_pps == 5000
        total = await eng.set_rate("p0", "10%")  # 10 % of 1 Gbit/s at 256 B (+20 B L1)
        assert total == pytest.approx(1e9 / (8 * 276) * 0.10)
        cursor, got = rate_events(cursor)
        assert got == [("up", "p0", 5000, total, "10%")]
        s1 = (await wait_sent(eng, {"up": s0.tx_frames + 5000})).stream("up")
        assert s1.requested_pps == pytest.approx(total)
        assert s1.pacer_pps == pytest.approx(total, abs=0.001)  # the worker's pacer took it
        assert (await eng.sample_now()).port("p0").requested_pps == pytest.approx(total)
        assert await eng.set_rate("up", "25kpps") == 25000
        cursor, got = rate_events(cursor)
        assert got == [("up", "p0", pytest.approx(total), 25000, "25kpps")]
        s2 = (await wait_sent(eng, {"up": s1.tx_frames + 5000})).stream("up")
        assert s2.requested_pps == 25000 and s2.pacer_pps == 25000 and not s2.paused
        with pytest.raises(RateError, match=r"maximum is 1 Gbit/s = 452,899 fps at 256 B"):
            await eng.set_rate("p0", "2Gbit")
        with pytest.raises(RateError, match="ambiguous rate"):
            await eng.set_rate("up", "lots")
        with pytest.raises(EngineCommandError, match="p9: no such stream"):
            await eng.set_rate("p9", "1kpps")  # neither a port nor a stream: named
        _, got = rate_events(cursor)
        assert got == [] and (await eng.sample_now()).stream("up").requested_pps == 25000
        # pause and resume one stream while the port runs
        await eng.pause("up")
        p1 = (await eng.sample_now()).stream("up")
        await trio.sleep(0.3)
        p2 = (await eng.sample_now()).stream("up")
        assert p1.paused and p2.paused and p2.tx_frames - p1.tx_frames < 50
        assert p2.pacer_pps == 0
        await eng.resume("up")
        assert not (await wait_sent(eng, {"up": p2.tx_frames + 5000})).stream("up").paused
        await eng.stop()
        fin = await eng.final_snapshot()
        kinds = [type(e) for e in eng.event_log()]
    up = fin.stream("up")
    assert up.lost == 0 and up.duplicates == 0 and up.rx_frames == up.tx_frames
    assert up.tx_frames == fin.port("p0").if_tx_frames  # the kernel's count of p0
    assert RateChanged in kinds and StreamPaused in kinds


@pytest.mark.trio
async def test_start_waits_for_a_stopping_port_and_refuses_a_failed_one(direct_lab):
    c = _compiled(
        profile_yaml(
            direct_lab, stream_yaml("up", "p0", rx_port="p1", nat=False, pps=2000), dut=False
        )
    )
    async with open_engine(c, EngineOptions(drain_ms=400)) as eng:
        await eng.start(["p0"])
        await wait_sent(eng, {"up": 1})
        async with trio.open_nursery() as n:
            n.start_soon(eng.stop, ["p0"])
            with trio.fail_after(10):  # the stop drains for 400 ms: long enough to be seen
                while eng.ports["p0"].state != "stopping":
                    await trio.sleep(0.005)
            await eng.start(["p0"])  # waits for the stop, then starts
        assert eng.ports["p0"].state == "running"
        await eng.start(["p0"])  # already running: a notice, no error
        assert "already running" in eng.event_log()[-1].text()
        os.kill(eng.states[eng.ports["p0"].spec.worker].pid, signal.SIGKILL)
        with trio.fail_after(5):
            while eng.ports["p0"].state != "failed":
                await trio.sleep(0.05)
        with pytest.raises(EngineCommandError, match="p0: cannot start: failed"):
            await eng.start(["p0"])


def _ndjson_lines(p: subprocess.Popen) -> queue.Queue:
    """The run's NDJSON lines, read by a thread (the pipe never fills; the test can time out)."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in p.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (a dead worker whose reaper has not run yet)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigkill_of_tgen_run_leaves_no_worker_and_no_counter_file(nat_lab, write_profile):
    # The run says when its ports run and which pids its workers have (NDJSON). Counting
    # the processes below tgen instead was wrong both ways: each worker runs `ldconfig -p`
    # while it imports (ctypes.util.find_library), so "2 processes" could be worker 0 and
    # its ldconfig (the next look found one: "never started its workers", empty stderr),
    # and a kill while worker 1 was still configuring left its counter file behind.
    prof = write_profile(profile_yaml(nat_lab, stream_yaml("up", "p0", rx_port="p1", pps=2000)))
    p = subprocess.Popen(
        [*TGEN, "run", str(prof), "-d", "60", "-q", "--no-store", "--ndjson", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = _ndjson_lines(p)
        workers: list[int] = []
        deadline = time.monotonic() + 40
        while not workers and time.monotonic() < deadline and p.poll() is None:
            with contextlib.suppress(queue.Empty):
                d = json.loads(lines.get(timeout=0.2))
                if "workers" in d and d["ports"]["p0"]["state"] == "running":
                    workers = [w["pid"] for w in d["workers"]]
        if len(workers) < 2:
            p.kill()
            p.wait(5)
            raise AssertionError(
                f"the run never started its workers (exit {p.returncode}): {p.stderr.read()}"
            )
        assert {c.pid for c in psutil.Process(p.pid).children()} >= set(workers)
        time.sleep(0.5)
        p.kill()
        p.wait(5)
        deadline = time.monotonic() + 5
        while any(_running(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = [w for w in workers if _running(w)]
        assert not alive, f"workers left behind: {alive}"
        assert not glob.glob(f"/dev/shm/tgen-{p.pid}-*")
    finally:
        if p.poll() is None:
            p.kill()


def test_ndjson_shows_port_states_and_a_killed_worker(direct_lab, write_profile):
    prof = write_profile(
        profile_yaml(
            direct_lab,
            stream_yaml("a", "p0", rx_port="p1", nat=False, pps=1000)
            + stream_yaml("b", "p1", rx_port="p0", nat=False, pps=1000),
            dut=False,
        )
    )
    p = subprocess.Popen(
        [*TGEN, "run", str(prof), "-d", "3", "--ndjson", "-", "-q", "--no-store"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    killed = None
    try:
        assert p.stdout is not None
        for line in p.stdout:
            d = json.loads(line)
            lines.append(d)
            if killed is None and "workers" in d and d["ports"]["p0"]["state"] == "running":
                pid = next(w["pid"] for w in d["workers"] if "p0" in w["ports"])
                os.kill(pid, signal.SIGKILL)
                killed = pid
        rc = p.wait(20)
    finally:
        if p.poll() is None:
            p.kill()
    assert killed is not None
    events = [d for d in lines if "event" in d]
    assert any(d["event"] == "worker_failed" and "SIGKILL" in d["reason"] for d in events)
    failed = [d for d in events if d["event"] == "port_state" and d["new"] == "failed"]
    assert [d["port"] for d in failed] == ["p0"]
    p1 = [d["new"] for d in events if d["event"] == "port_state" and d["port"] == "p1"]
    assert p1 == ["starting", "running", "stopping", "stopped"]
    snaps = [d for d in lines if "event" not in d]
    assert snaps and snaps[-1]["ports"]["p1"]["tx_frames"] > 1500  # p1 kept sending
    assert rc == 3
