"""DutChannel without root: argv, source text, commands and batched reads over a local
command prefix (``sh -c`` stands in for ``ssh root@dut``: the same code path), and the
description file's round trip."""

from __future__ import annotations

import pytest

from tgen_tui.diagnostics import EnvironmentProblem
from tgen_tui.dut import settings
from tgen_tui.dut.channel import DutChannel, DutCommandFailed, DutUnreachable
from tgen_tui.dut.probe import DutProbe


def test_exactly_one_way_and_the_source_text():
    with pytest.raises(ValueError):
        DutChannel()
    with pytest.raises(ValueError):
        DutChannel(netns="a", ssh="ssh b")
    assert DutChannel.of(None, None) is None
    assert DutChannel.of("x-dut", "ssh root@dut").source == "netns:x-dut"  # netns wins
    assert DutChannel.of(None, "ssh root@dut").source == "ssh:ssh root@dut"
    assert DutProbe().source == "none" and DutProbe().read().error == "no DUT probe configured"


def test_argv_for_a_namespace_and_a_prefix():
    ns = DutChannel(netns="x-dut")
    assert ns.argv("cat /a; cat /b") == [
        "ip",
        "netns",
        "exec",
        "x-dut",
        "sh",
        "-c",
        "cat /a; cat /b",
    ]
    assert ns.argv(["conntrack", "-F"]) == ["ip", "netns", "exec", "x-dut", "conntrack", "-F"]
    ssh = DutChannel(ssh="ssh -p 2222 root@dut")
    assert ssh.argv("cat /a; cat /b") == ["ssh", "-p", "2222", "root@dut", "cat /a; cat /b"]
    assert ssh.argv(["echo", "a b"]) == ["ssh", "-p", "2222", "root@dut", "echo 'a b'"]


def test_commands_over_a_prefix_keep_output_exit_and_timeout():
    ch = DutChannel(ssh="sh -c")
    out = ch.run("echo out; echo err >&2; exit 3")
    assert (out.returncode, out.stdout, out.stderr, out.ok) == (3, "out\n", "err\n", False)
    assert ch.check(["echo", "a b"]) == "a b\n"
    with pytest.raises(DutCommandFailed, match=r"over ssh:sh -c failed \(exit 3\): err") as e:
        ch.check("echo err >&2; exit 3")
    assert e.value.output.returncode == 3 and isinstance(e.value, EnvironmentProblem)
    slow = ch.run("echo started; sleep 5", timeout=0.3)
    assert slow.timed_out and not slow.ok and slow.seconds < 3
    with pytest.raises(DutUnreachable, match="not installed"):
        DutChannel(ssh="no-such-ssh-binary-tgen root@dut").run("true")


def test_batched_reads_over_a_prefix(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1\n2\n")
    b.write_text("no newline")  # the separator must not glue onto it
    ch = DutChannel(ssh="sh -c")
    got = ch.read_files([str(a), str(tmp_path / "missing"), str(b)])
    assert got == {str(a): "1\n2", str(tmp_path / "missing"): None, str(b): "no newline"}
    assert ch.read_file(str(b)) == "no newline"
    with pytest.raises(FileNotFoundError):
        ch.read_file(str(tmp_path / "missing"))


def test_a_missing_namespace_is_unreachable():
    ch = DutChannel(netns="tgen-no-such-ns-9")
    assert not ch.exists()
    with pytest.raises(DutUnreachable, match="does not exist"):
        ch.run("true")
    with pytest.raises(DutUnreachable, match="does not exist"):
        ch.read_cached("/proc/sys/net/netfilter/nf_conntrack_count")
    assert "does not exist" in DutProbe(netns="tgen-no-such-ns-9").read().error
    assert "does not exist" in settings.dut_settings(DutChannel(netns="tgen-no-such-ns-9"))["error"]


def test_description_file_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "DESCRIPTION_DIR", str(tmp_path))
    desc = settings.DutDescription(
        topology="nat",
        nft_chain=("ip", "t", "c"),
        nft={"table": "ip t", "drop_percent": 1},
        tbf_interface="d1",
        tbf={"spec": "10mbit"},
        lab={"drop_percent": 1},
    )
    ident = [(7, 100)]  # the namespace's (st_dev, st_ino)
    monkeypatch.setattr(settings, "netns_identity", lambda netns: ident[0])
    settings.write_description("x-dut", desc)
    assert settings.read_description("x-dut") == desc
    ident[0] = (7, 101)  # deleted without `lab down`, and a namespace of that name made again
    assert settings.read_description("x-dut") is None
    ident[0] = (7, 100)
    settings.remove_description("x-dut")
    settings.remove_description("x-dut")  # twice is fine
    assert settings.read_description("x-dut") is None


def test_the_command_lines_dut_replaces_the_profiles_as_a_whole():
    from tgen_tui.dut.channel import pick_dut

    # a lab profile (dut.netns) run with --dut-ssh talks to the ssh host, not the namespace
    assert pick_dut(None, "ssh fw", "tgen-dut", None) == (None, "ssh fw")
    assert pick_dut("other-dut", None, "tgen-dut", None) == ("other-dut", None)
    assert pick_dut(None, None, "tgen-dut", None) == ("tgen-dut", None)
    assert pick_dut(None, None, None, "ssh fw") == (None, "ssh fw")
