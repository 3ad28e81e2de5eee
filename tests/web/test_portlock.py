"""Per-port locks: a second holder gets PortInUse naming the port and the holder's pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tgen_tui.diagnostics import EnvironmentProblem, ExitCode
from tgen_tui.engine import portlock
from tgen_tui.engine.portlock import PortInUse, acquire_ports, lock_path

HOLDER = """
import sys, time
from pathlib import Path
from tgen_tui.engine.portlock import acquire_ports
locks = acquire_ports([(sys.argv[2], sys.argv[3])], names=["p0"], lock_dir=Path(sys.argv[1]))
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path: Path):
    """A separate process holding the lock of (ns1, veth0) in tmp_path."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), "ns1", "veth0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_second_holder_gets_port_and_pid(tmp_path: Path, holder: subprocess.Popen) -> None:
    with pytest.raises(PortInUse) as ei:
        acquire_ports([("ns1", "veth0")], names=["p0"], lock_dir=tmp_path)
    err = ei.value
    assert isinstance(err, EnvironmentProblem) and err.code == ExitCode.ENVIRONMENT
    assert (err.port, err.netns, err.interface, err.pid) == ("p0", "ns1", "veth0", holder.pid)
    assert str(err).startswith(f"port p0 is in use by tgen pid {holder.pid} (")
    assert "interface veth0 in netns ns1" in str(err)


def test_all_or_nothing(tmp_path: Path, holder: subprocess.Popen) -> None:
    """p1 is free, p0 is held: acquiring both fails and leaves p1 unlocked."""
    with pytest.raises(PortInUse) as ei:
        acquire_ports([("ns1", "veth1"), ("ns1", "veth0")], names=["p1", "p0"], lock_dir=tmp_path)
    assert ei.value.port == "p0"
    free = acquire_ports([("ns1", "veth1")], lock_dir=tmp_path)
    assert free.held
    free.release()


def test_release_and_holder_death_free_the_port(tmp_path: Path, holder: subprocess.Popen) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    locks = acquire_ports([("ns1", "veth0"), (None, "eth9")], lock_dir=tmp_path)
    assert sorted(p.name for p in locks.paths) == ["-__eth9.lock", "ns1__veth0.lock"]
    assert lock_path("ns1", "veth0", tmp_path).read_text().strip() == str(os.getpid())
    with pytest.raises(PortInUse) as ei:  # a second open in the same process conflicts too
        acquire_ports([(None, "eth9")], lock_dir=tmp_path)
    assert ei.value.pid == os.getpid() and ei.value.port == "eth9"
    locks.release()
    locks.release()  # idempotent
    assert list(tmp_path.iterdir()) == []  # release removes the lock files
    with acquire_ports([(None, "eth9")], lock_dir=tmp_path) as again:
        assert again.held
    assert not again.held


def test_locking_a_removed_file_retries(tmp_path: Path, monkeypatch) -> None:
    """A releaser unlinks the file between our open and our flock: we must lock the new one."""
    real_open = portlock._open
    opened: list[int] = []

    def open_then_lose_the_race(path: Path) -> int:
        fd = real_open(path)
        opened.append(fd)
        if len(opened) == 1:
            path.unlink()  # what a releaser does while we are between open and flock
        return fd

    monkeypatch.setattr(portlock, "_open", open_then_lose_the_race)
    with acquire_ports([("n", "a")], lock_dir=tmp_path) as locks:
        path = lock_path("n", "a", tmp_path)
        assert len(opened) == 2 and path.exists()  # noticed the removed file, took the new one
        assert len(locks.paths) == 1
        monkeypatch.setattr(portlock, "_open", real_open)
        with pytest.raises(PortInUse):  # the new file really is locked
            acquire_ports([("n", "a")], lock_dir=tmp_path)


def test_same_interface_twice_is_one_lock(tmp_path: Path) -> None:
    with acquire_ports([("n", "a"), ("n", "a")], names=["p0", "p1"], lock_dir=tmp_path) as locks:
        assert len(locks.paths) == 1


def test_unsafe_names_stay_in_the_folder(tmp_path: Path) -> None:
    path = lock_path("../x", "a/b", tmp_path)
    assert path.parent == tmp_path and "/" not in path.name


def test_unwritable_folder_is_an_environment_problem(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(EnvironmentProblem, match="port lock folder"):
        acquire_ports([("n", "a")], lock_dir=blocker / "locks")


@pytest.mark.root  # writes /run/tgen/locks
def test_default_folder_under_run(tmp_path: Path) -> None:
    iface = f"t{os.getpid()}{int(time.time() * 1000) % 100000}"
    with acquire_ports([("tgen-test-nonexistent", iface)]) as locks:
        assert str(locks.paths[0]).startswith("/run/tgen/locks/")
        assert locks.paths[0].exists()
    assert not locks.held
    assert not lock_path("tgen-test-nonexistent", iface).exists()


def test_remove_unheld_keeps_held_locks_and_removes_left_ones(tmp_path):
    from tgen_tui.engine.portlock import acquire_ports, lock_path, remove_unheld

    held = acquire_ports([("lab-tester", "p0")], lock_dir=tmp_path)
    left = lock_path("lab-tester", "p1", tmp_path)
    left.write_text("4242\n")  # a holder killed with SIGKILL leaves its file
    other = lock_path("other-tester", "p0", tmp_path)
    other.write_text("4243\n")
    try:
        assert remove_unheld("lab-tester", tmp_path) == [left]
        assert lock_path("lab-tester", "p0", tmp_path).exists()  # still held: kept
        assert other.exists()  # another namespace: not ours to tidy
    finally:
        held.release()
    assert remove_unheld("lab-tester", tmp_path) == []
