"""Issue 14 on a real local Ray cluster: two nodes, tester-a and tester-b, on this machine.

The lab's p0 runs on tester-a and p1 on tester-b (``profiles/lab.yaml`` with a host per
port, in a NAT lab with a unique prefix, at 4 kfps per stream). ``tgen run --cluster``
is the driver, as a user would run it. One cluster per module (starting one takes
10-20 s); the test that kills tester-b runs last and adds the node back.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: the cluster tests need pip install '.[cluster]'"
)

REPO = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]
MB = 1024 * 1024

pytestmark = pytest.mark.root


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _node_pids(node) -> set[int]:
    pids = set()
    for infos in node.all_processes.values():
        for info in infos:
            if info.process is not None:
                pids.add(info.process.pid)
    return pids


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from ray.cluster_utils import Cluster

    # the agents resolve tx_path 'auto' from the host's calibration cache, which other
    # tests rewrite while these run: an empty one of our own keeps the default path
    # (the nodes, their agents and every tgen run below inherit it)
    old_cache = os.environ.get("TGEN_CACHE_DIR")
    os.environ["TGEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("tgen-cache"))
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 * MB},
    )
    nodes = {}
    pids: set[int] = set()
    try:
        for h in ("tester-a", "tester-b"):
            nodes[h] = c.add_node(
                num_cpus=1, resources={f"tgen:{h}": 1}, object_store_memory=80 * MB
            )
        c.wait_for_nodes()

        def add_b():
            nodes["tester-b"] = c.add_node(
                num_cpus=1, resources={"tgen:tester-b": 1}, object_store_memory=80 * MB
            )
            c.wait_for_nodes()

        for n in c.list_all_nodes():
            pids |= _node_pids(n)
        yield c, nodes, add_b
    finally:
        for n in c.list_all_nodes():
            pids |= _node_pids(n)
        if ray.is_initialized():  # the console test made this process a driver
            ray.shutdown()
        c.shutdown()
        if old_cache is None:
            os.environ.pop("TGEN_CACHE_DIR", None)
        else:
            os.environ["TGEN_CACHE_DIR"] = old_cache
        end = time.monotonic() + 20
        left = pids
        while left and time.monotonic() < end:
            left = {p for p in left if _pid_alive(p)}
            time.sleep(0.2)
        assert not left, f"Ray processes left after cluster.shutdown(): {sorted(left)}"


@pytest.fixture(scope="module")
def nat_lab(make_lab):
    """One NAT lab for the module (the cluster fixture is module-wide too)."""
    with make_lab("nat", "r") as prefix:
        yield prefix


def lab_profile(prefix: str, tmp: Path, hosts=("tester-a", "tester-b")) -> Path:
    """profiles/lab.yaml in this lab, p0 and p1 placed on ``hosts``."""
    text = (REPO / "profiles" / "lab.yaml").read_text()
    for i, h in enumerate(hosts):
        old = f"p{i}: {{interface: p{i}, netns: tgen-tester, speed: 10G}}"
        assert old in text, "profiles/lab.yaml changed: update this test's placement"
        text = text.replace(
            old, f"p{i}: {{interface: p{i}, netns: {prefix}-tester, speed: 10G, host: {h}}}"
        )
    assert "netns: tgen-dut" in text
    text = text.replace("netns: tgen-dut", f"netns: {prefix}-dut")
    p = tmp / "lab-two-hosts.yaml"
    p.write_text(text)
    return p


def run_args(profile: Path, address: str, out: Path, *extra: str) -> list[str]:
    # lab.yaml sends 20 kfps per stream: scaled to 4 kfps for this 2-core machine
    return [
        *TGEN,
        "run",
        str(profile),
        "--rate-scale",
        "0.2",
        "--cluster",
        address,
        "--json",
        str(out),
        "--no-store",
        "-q",
        *extra,
    ]


def _workers_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tgen_tui.worker" in cmd and str(pid).encode() in cmd and _pid_alive(int(d.name)):
            i = cmd.index(b"--parent-pid")
            if cmd[i + 1] == str(pid).encode():
                out.append(int(d.name))
    return out


def _assert_agents_left_nothing(res: dict, timeout: float = 30.0) -> None:
    """No worker with an agent as its parent, and no counter file of an agent."""
    agents = [h["agent_pid"] for h in res["cluster"]["hosts"] if h["agent_pid"]]
    assert agents
    end = time.monotonic() + timeout
    while True:
        left = {a: _workers_of(a) for a in agents}
        files = [f for f in os.listdir("/dev/shm") for a in agents if f.startswith(f"tgen-{a}-")]
        if not any(left.values()) and not files:
            return
        assert time.monotonic() < end, f"left behind: workers {left}, counter files {files}"
        time.sleep(0.5)


def wait_until_both_send(proc: subprocess.Popen, nd: Path, timeout: float = 90) -> None:
    """Until the NDJSON stream shows p0 and p1 both sending (the run must stay alive)."""
    end = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < end, "the ports never started sending"
        lines = nd.read_text().splitlines() if nd.exists() else []
        snaps = [json.loads(x) for x in lines if x.startswith('{"t"')]
        if snaps and all(snaps[-1]["ports"][p]["tx_frames"] > 0 for p in ("p0", "p1")):
            return
        time.sleep(0.2)


def test_two_hosts_run_the_lab_profile(cluster, nat_lab, tmp_path):
    """Must show 1 and 3: counts equal the interface counters, lost 0, the result names
    each port's host, and the clock offset of each host is measured with its uncertainty."""
    c, _, _ = cluster
    prof = lab_profile(nat_lab, tmp_path)
    out = tmp_path / "r.json"
    cp = subprocess.run(
        run_args(prof, c.address, out, "--duration", "3"),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert cp.returncode == 0, cp.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["ports"]["p0"]["host"] == "tester-a"
    assert res["ports"]["p1"]["host"] == "tester-b"
    for name, p in res["ports"].items():
        assert p["state"] == "stopped", (name, p["failure"])
        assert p["tx_frames"] > 0
        assert p["tx_frames"] == p["if_tx_frames"], name
        assert p["rx_frames"] == p["if_rx_frames"], name
    up, down = res["streams"]["up"], res["streams"]["down"]
    for s in (up, down):
        assert s["tx_frames"] > 0
        assert s["lost"] == 0
        assert s["rx_frames"] == s["tx_frames"]
        # across hosts, with the measured offset subtracted, and said so
        assert "clock offset" in s["latency_note"] and "subtracted" in s["latency_note"]
        assert s["latency_ns"]["min"] is not None and s["latency_ns"]["min"] >= 0
    assert up["tx_frames"] == res["ports"]["p0"]["tx_frames"] == res["ports"]["p1"]["rx_frames"]
    assert down["tx_frames"] == res["ports"]["p1"]["tx_frames"] == res["ports"]["p0"]["rx_frames"]
    hosts = {h["host"]: h for h in res["cluster"]["hosts"]}
    assert set(hosts) == {"tester-a", "tester-b"}
    for h in hosts.values():
        assert h["lost"] is None
        assert h["clock_rounds"] >= 8
        assert h["uncertainty_ns"] is not None and h["uncertainty_ns"] > 0
        # one machine, one clock: t1 <= t2 <= t3 <= t4, so |offset| <= half the round trip
        assert abs(h["clock_offset_ns"]) <= h["uncertainty_ns"]
        assert any(f"host {h['host']}: agent pid {h['agent_pid']}" in e for e in res["events"])
    # Must show 3: the offset between the two nodes, with its uncertainty
    (pair,) = res["cluster"]["between_hosts"]
    assert (pair["from"], pair["to"]) == ("tester-a", "tester-b")
    a, b = hosts["tester-a"], hosts["tester-b"]
    assert pair["clock_offset_ns"] == b["clock_offset_ns"] - a["clock_offset_ns"]
    assert pair["uncertainty_ns"] == a["uncertainty_ns"] + b["uncertainty_ns"]
    assert abs(pair["clock_offset_ns"]) <= pair["uncertainty_ns"]
    assert f"{pair['clock_offset_ns'] / 1e3:+.1f} us" in up["latency_note"]
    _assert_agents_left_nothing(res)


def test_console_on_two_hosts(cluster, nat_lab, tmp_path):
    """tgen tui's engine with --cluster (trio guest mode, in this process): 0 s starts p0
    on tester-a, t stops it; the console's result names the hosts; q leaves no worker."""
    import asyncio

    from tgen_tui.cluster.transport import cluster_transport
    from tgen_tui.session.options import RunOptions
    from tgen_tui.session.owner import RunOwner
    from tgen_tui.ui.app import TgenApp
    from tgen_tui.ui.host import GuestEngineHost

    c, _, _ = cluster
    prof = lab_profile(nat_lab, tmp_path)
    opts = RunOptions(  # as tgen tui --cluster builds its run (tgen_tui.ui.cli)
        profile=str(prof),
        rate_scale=0.2,
        cluster=c.address,
        transport=cluster_transport(c.address),
        test="tui",
    )
    owner = RunOwner(opts)
    host = GuestEngineHost(owner.open, owner=owner)
    app = TgenApp(
        host, compiled=owner.compiled, profile_path=str(prof), json_path=str(tmp_path / "s.json")
    )

    async def until(pilot, cond, timeout):
        end = time.monotonic() + timeout
        while not cond() and time.monotonic() < end:
            await pilot.pause(0.1)

    async def go():
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.snap is not None, 60)
            assert app.snap is not None, "the engine did not come up"
            assert {p.name: p.host for p in app.snap.ports} == {"p0": "tester-a", "p1": "tester-b"}
            await pilot.press("0", "s")
            await until(pilot, lambda: app.snap.port("p0").tx_frames > 2000, 20)
            assert app.snap.port("p0").tx_frames > 2000
            assert app.snap.port("p1").tx_frames == 0  # only p0 was started
            await pilot.press("t")
            await until(pilot, lambda: app.snap.port("p0").state == "stopped", 15)
            assert app.snap.port("p0").state == "stopped"
            await pilot.press("q")
            await pilot.pause(0.5)

    asyncio.run(go())
    res = app.result
    assert res is not None
    p0 = res["ports"]["p0"]
    assert p0["host"] == "tester-a" and res["ports"]["p1"]["host"] == "tester-b"
    assert p0["tx_frames"] == p0["if_tx_frames"] > 2000
    assert res["streams"]["up"]["lost"] == 0
    assert res["streams"]["up"]["rx_frames"] == p0["tx_frames"]
    agents = [int(a) for a in re.findall(r"agent pid (\d+)", "\n".join(res.get("events", [])))]
    assert len(agents) == 2, res.get("events")
    end = time.monotonic() + 30
    while any(_workers_of(a) for a in agents):  # q quit the workers on both hosts
        assert time.monotonic() < end, {a: _workers_of(a) for a in agents}
        time.sleep(0.5)


def test_reload_respawns_on_the_same_hosts(cluster, nat_lab, tmp_path):
    """An edit that is more than a rate change re-spawns the workers on their hosts; an
    edit that moves a port to a host without an agent is refused."""
    import trio

    from tgen_tui.cluster.transport import cluster_transport
    from tgen_tui.diagnostics import BadInput
    from tgen_tui.engine.controller import open_engine
    from tgen_tui.engine.options import EngineOptions
    from tgen_tui.packets.compile import compile_profile
    from tgen_tui.profiles.loader import load_profile

    c, _, _ = cluster
    prof = lab_profile(nat_lab, tmp_path)
    first = compile_profile(load_profile(prof), rate_scale=0.2)
    text = prof.read_text()
    prof.write_text(text.replace("size: 64", "size: 128"))
    bigger = compile_profile(load_profile(prof), rate_scale=0.2)
    prof.write_text(text.replace("host: tester-b", "host: tester-c"))
    moved = compile_profile(load_profile(prof), rate_scale=0.2)
    out = {}

    async def go():
        async with open_engine(
            first,
            EngineOptions(cluster=c.address, transport=cluster_transport(c.address), drain_ms=300),
        ) as eng:
            await eng.reload(bigger)
            await eng.start()
            await trio.sleep(1.5)
            await eng.stop()
            out["snap"] = await eng.final_snapshot()
            try:
                await eng.reload(moved)
            except BadInput as e:
                out["refused"] = str(e)
            # refused before anything stopped: the engine still runs the old profile
            await eng.start()
            await trio.sleep(0.5)
            await eng.stop()
            out["after"] = await eng.final_snapshot()

    trio.run(go)
    snap = out["snap"]
    for p in snap.ports:
        assert p.state == "stopped" and p.tx_frames > 0, (p.name, p.failure)
        assert p.tx_frames == p.if_tx_frames and p.rx_frames == p.if_rx_frames, p
        assert p.tx_bytes == p.tx_frames * 124  # 128 B frames (without the FCS) after the reload
    for s in snap.streams:
        assert s.lost == 0 and s.rx_frames == s.tx_frames > 0
    assert "tester-c" in out["refused"] and "restart tgen" in out["refused"]
    after = out["after"]
    assert {p.name: p.host for p in after.ports} == {"p0": "tester-a", "p1": "tester-b"}
    assert after.port("p0").tx_frames > snap.port("p0").tx_frames
    assert all(p.state == "stopped" for p in after.ports)


def test_bad_input_and_unknown_host(cluster, nat_lab, tmp_path):
    c, _, _ = cluster
    prof = lab_profile(nat_lab, tmp_path, hosts=("tester-a", "tester-c"))
    out = tmp_path / "r.json"
    cp = subprocess.run(
        run_args(prof, c.address, out, "--duration", "1"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert cp.returncode == 3, cp.stderr[-2000:]
    err = cp.stderr.strip().splitlines()[-1]
    assert err.startswith("tgen: error:")
    assert "tester-c" in err and "ray start --address" in err
    assert not out.exists()
    cp = subprocess.run(
        run_args(prof, " ", out, "--duration", "1"), capture_output=True, text=True, cwd=REPO
    )
    assert cp.returncode == 2
    # bad input is one line, as diagnostics.report renders BadInput (no traceback)
    assert cp.stderr.strip().splitlines() == [
        "--cluster: ' ': give the Ray head's IP:PORT, or 'auto'"
    ]


def test_ctrl_c_stops_every_host_and_leaves_no_worker(cluster, nat_lab, tmp_path):
    """SIGINT: the ports on both hosts stop, the partial result is written (exit 130), and
    no worker or counter file is left on either host."""
    c, _, _ = cluster
    prof = lab_profile(nat_lab, tmp_path)
    out = tmp_path / "r.json"
    nd = tmp_path / "snaps.ndjson"
    proc = subprocess.Popen(
        run_args(prof, c.address, out, "--duration", "60", "--ndjson", str(nd)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        wait_until_both_send(proc, nd)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    res = json.loads(out.read_text())
    assert res["partial"] is True and res["signal"] == "SIGINT"
    for name, p in res["ports"].items():
        assert p["state"] == "stopped", (name, p["failure"])
        assert p["tx_frames"] == p["if_tx_frames"]
    for s in res["streams"].values():
        assert s["lost"] == 0  # stopped with a drain: every frame sent was counted
    _assert_agents_left_nothing(res, timeout=10)


def test_sigkill_of_the_engine_leaves_no_worker_on_any_host(cluster, nat_lab, tmp_path):
    """tgen run SIGKILLed mid-run: each agent's watchdog kills its workers (no call from
    the engine), and Ray removes the agents; no worker or counter file is left."""
    c, _, _ = cluster
    prof = lab_profile(nat_lab, tmp_path)
    nd = tmp_path / "snaps.ndjson"
    proc = subprocess.Popen(
        run_args(prof, c.address, tmp_path / "r.json", "--duration", "60", "--ndjson", str(nd)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    try:
        wait_until_both_send(proc, nd)
        agents = [
            int(m.group(1))
            for x in nd.read_text().splitlines()
            for m in [re.search(r"agent pid (\d+)", x)]
            if m
        ]
        assert len(agents) == 2
        assert all(_workers_of(a) for a in agents), "each agent runs a worker"
    finally:
        proc.kill()
        proc.wait()
    end = time.monotonic() + 30
    while any(_workers_of(a) for a in agents):
        assert time.monotonic() < end, {a: _workers_of(a) for a in agents}
        time.sleep(0.5)
    files = [f for f in os.listdir("/dev/shm") for a in agents if f.startswith(f"tgen-{a}-")]
    assert not files
    end = time.monotonic() + 60  # Ray removes the dead engine's agents (frees the hosts)
    while any(_pid_alive(a) for a in agents):
        assert time.monotonic() < end, "Ray did not remove the agents of a dead engine"
        time.sleep(0.5)


def test_killing_node_b_fails_p1_and_p0_goes_on(cluster, nat_lab, tmp_path):
    """Must show 2: killing node tester-b during a run marks p1 failed with the reason,
    p0 keeps sending, and the run still writes its result."""
    c, nodes, add_b = cluster
    prof = lab_profile(nat_lab, tmp_path)
    out = tmp_path / "r.json"
    nd = tmp_path / "snaps.ndjson"
    proc = subprocess.Popen(
        run_args(prof, c.address, out, "--duration", "8", "--ndjson", str(nd)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        # wait until both ports send (p1's stream starts 0.5 s after p0's)
        wait_until_both_send(proc, nd)
        c.remove_node(nodes["tester-b"], allow_graceful=False)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        assert proc.returncode == 3, err[-3000:]
        assert "port(s) p1 failed" in err
        res = json.loads(out.read_text())
        p0, p1 = res["ports"]["p0"], res["ports"]["p1"]
        assert p1["state"] == "failed"
        assert "host tester-b" in p1["failure"] and "node lost" in p1["failure"]
        assert p0["state"] == "stopped" and p0["failure"] is None
        hosts = {h["host"]: h for h in res["cluster"]["hosts"]}
        assert hosts["tester-b"]["lost"] and hosts["tester-a"]["lost"] is None
        # p0 kept sending after p1 failed: its count grew after the first failed snapshot
        snaps = [json.loads(x) for x in nd.read_text().splitlines() if x.startswith('{"t"')]
        at_fail = next(s for s in snaps if s["ports"]["p1"]["state"] == "failed")
        assert p0["tx_frames"] > at_fail["ports"]["p0"]["tx_frames"]
        assert p0["tx_frames"] == p0["if_tx_frames"]
        assert res["streams"]["up"]["tx_frames"] == p0["tx_frames"]
        events = "\n".join(res["events"])
        assert re.search(r"port p1: running -> failed \(.*host tester-b", events)
        _assert_agents_left_nothing(res)
    finally:
        add_b()


def test_methodology_trials_run_on_the_hosts(cluster, nat_lab, tmp_path):
    """tgen rfc2544 throughput --cluster: every trial's engine places p0 and p1 on their
    hosts; a maximum the lab forwards without loss gives 'upper bound not reached'."""
    c, _, _ = cluster
    prof = lab_profile(nat_lab, tmp_path)
    out = tmp_path / "t.json"
    cp = subprocess.run(
        [
            *TGEN,
            "rfc2544",
            "throughput",
            str(prof),
            "--cluster",
            c.address,
            "--quick",
            "--repeats",
            "1",
            "--max-rate",
            "4000",
            "--error",
            "1000",
            "--duration",
            "1s",
            "--timeout",
            "200ms",
            "--settle",
            "100ms",
            "--no-plot",
            "--no-store",
            "--quiet",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    assert cp.returncode == 0, cp.stderr[-3000:]
    doc = json.loads(out.read_text())
    (search,) = doc["searches"]
    assert search["status"] == "upper bound not reached", search["status"]
    assert search["l_pps"] == 4000
    trials = search["trials"]
    assert trials and all(t["lost"] == 0 and t["tx_frames"] > 0 for t in trials)
