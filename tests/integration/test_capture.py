"""Packet capture on the real NAT lab (root), read back with tshark (an independent decoder):

- ``tgen run --capture p1:udp -w F``: the frames that p1 receives come from the DUT's
  public address (translated); every frame's comment names its stream and sequence
  number, and those equal the signature in the frame's payload; the rx count equals
  the run's own count of received frames;
- ``--capture-lost`` with the DUT dropping 1 %: the file holds exactly as many frames as
  the run counts lost, and none of their (stream, seq) is among the frames received;
- a filter that tcpdump rejects: one line, exit 2 (no lab needed); one that matches
  nothing: an empty pcapng that tshark reads without a word.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TGEN = [sys.executable, "-m", "tgen_tui"]
SIG_MAGIC = 0x7467


def _profile(prefix: str, tmp: Path, pps: int = 2000) -> Path:
    text = f"""
name: cap
seed: 1
duration: 1s
ports:
  p0: {{interface: p0, netns: {prefix}-tester}}
  p1: {{interface: p1, netns: {prefix}-tester}}
dut: {{netns: {prefix}-dut}}
streams:
  - name: up
    port: p0
    rx_port: p1
    eth: {{src: "02:74:67:00:00:01", dst: "02:74:67:00:00:fe"}}
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp: {{src_port: {{min: 10000, max: 10063, mode: inc}}, dst_port: 7}}
    size: 64
    rate: {{pps: {pps}}}
  - name: down
    port: p1
    rx_port: p0
    eth: {{src: "02:74:67:00:01:01", dst: "02:74:67:00:01:fe"}}
    ipv4: {{src: 198.19.0.2, dst: 198.19.0.1}}
    udp: {{src_port: 7, dst_port: {{min: 10000, max: 10063, mode: inc}}}}
    size: 128
    rate: {{pps: {pps}}}
    schedule: {{start: 300ms}}
"""
    p = tmp / "cap.yaml"
    p.write_text(text)
    return p


def tgen(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(TGEN + list(args), capture_output=True, text=True, timeout=timeout)


def tshark(path: Path, *fields: str) -> list[list[str]]:
    """Every frame's ``fields`` (tab-separated by tshark); asserts tshark said nothing."""
    cp = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", *[a for f in fields for a in ("-e", f)]],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    noise = [ln for ln in cp.stderr.splitlines() if "Running as user" not in ln and ln.strip()]
    assert not noise, noise
    return [ln.split("\t") for ln in cp.stdout.splitlines()]


def signature(frame_hex: str) -> tuple[int, int, int]:
    """(magic, stream, seq) from a frame's last 12 bytes (little-endian, DESIGN rule 8)."""
    b = bytes.fromhex(frame_hex)[-12:]
    return (
        int.from_bytes(b[0:2], "little"),
        int.from_bytes(b[2:4], "little"),
        int.from_bytes(b[4:8], "little"),
    )


@pytest.fixture(scope="module")
def lab(make_lab):
    with make_lab("nat", "c") as prefix:
        yield prefix


def test_capture_on_p1_is_translated_and_every_comment_is_the_signature(lab, tmp_path):
    prof = _profile(lab, tmp_path)
    cap, out = tmp_path / "cap.pcapng", tmp_path / "r.json"
    cp = tgen("run", str(prof), "--capture", "p1:udp", "-w", str(cap), "--json", str(out),
              "--no-store", "--quiet")  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    (c,) = doc["captures"]
    assert c["state"] == "done" and c["not_kept"] == {"ring_full": 0, "over_budget": 0}
    rows = tshark(cap, "frame.interface_name", "frame.p2p_dir", "frame.comment", "ip.src",
                  "udp.srcport", "udp.payload")  # fmt: skip
    names = {"up": 0, "down": 1}
    rx = [r for r in rows if r[0] == "p1 rx"]
    tx = [r for r in rows if r[0] == "p1 tx"]
    assert len(rx) == doc["streams"]["up"]["rx_frames"] > 1000
    assert len(tx) == doc["streams"]["down"]["tx_frames"] > 500
    assert c["kept"] == len(rows)
    for iface, direction, comment, src, _sport, payload in rows:
        magic, stream, seq = signature(payload)
        assert magic == SIG_MAGIC
        words = comment.split()  # stream NAME seq N lane L
        assert words[0] == "stream" and words[2] == "seq" and words[4] == "lane", comment
        assert (names[words[1]], int(words[3]), int(words[5])) == (stream, seq, 0)
        if iface == "p1 rx":
            assert direction == "1" and words[1] == "up"
            assert src == "198.19.0.1"  # the DUT's public address: translated
        else:
            assert direction == "0" and words[1] == "down" and src == "198.19.0.2"
    seqs = sorted(int(r[2].split()[3]) for r in rx)
    assert seqs == sorted(set(seqs))  # each frame once


def test_capture_lost_keeps_exactly_the_lost_frames(lab, tmp_path):
    subprocess.run(TGEN + ["lab", "set", "--prefix", lab, "--drop-percent", "1"], check=True,
                   capture_output=True)  # fmt: skip
    try:
        prof = _profile(lab, tmp_path, pps=5000)
        rxcap, out = tmp_path / "rx.pcapng", tmp_path / "r.json"
        cp = tgen("run", str(prof), "--capture", "p0,p1", "--capture-direction", "rx",
                  "-w", str(rxcap), "--capture-lost", "--json", str(out), "--no-store",
                  "--quiet")  # fmt: skip
        assert cp.returncode == 0, cp.stderr
    finally:
        subprocess.run(TGEN + ["lab", "set", "--prefix", lab, "--drop-percent", "0"],
                       check=True, capture_output=True)  # fmt: skip
    doc = json.loads(out.read_text())
    lost_total = sum(s["lost"] for s in doc["streams"].values())
    assert lost_total > 20  # 1 % of about 9,000 frames
    lost_doc = next(c for c in doc["captures"] if "lost_frames" in c)
    assert lost_doc["file"] == str(tmp_path / "rx-lost.pcapng")
    assert lost_doc["lost_frames"] == lost_total
    assert lost_doc["lost_by_stream"] == {
        n: s["lost"] for n, s in doc["streams"].items() if s["lost"]
    }
    lost = tshark(Path(lost_doc["file"]), "frame.interface_name", "frame.comment", "udp.payload")
    assert len(lost) == lost_total
    assert {r[0] for r in lost} <= {"p0 tx", "p1 tx"}
    got = tshark(rxcap, "udp.payload")
    received = {signature(r[0])[1:] for r in got}
    missing = {signature(r[2])[1:] for r in lost}
    assert len(missing) == lost_total and not (missing & received)
    per = {n: sum(1 for r in lost if r[1].split()[1] == n) for n in ("up", "down")}
    assert per == {n: doc["streams"][n]["lost"] for n in ("up", "down")}
    comment = subprocess.run(["capinfos", "-k", lost_doc["file"]], capture_output=True,
                             text=True).stdout  # fmt: skip
    assert "lost" in comment and f"{doc['streams']['up']['lost']} of" in comment


def test_a_filter_that_matches_nothing_writes_an_empty_valid_pcapng(lab, tmp_path):
    prof = _profile(lab, tmp_path, pps=500)
    cap = tmp_path / "none.pcapng"
    cp = tgen("run", str(prof), "--capture", "p1:tcp port 9", "-w", str(cap), "-d", "300ms",
              "--no-store", "--quiet")  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    assert tshark(cap, "frame.number") == []
    info = subprocess.run(["capinfos", "-c", "-I", str(cap)], capture_output=True, text=True)
    assert info.returncode == 0 and "Number of packets:   0" in info.stdout, info.stdout
    assert "p1 rx" in info.stdout and "p1 tx" in info.stdout


@pytest.mark.parametrize(
    "arg, words",
    [
        ("p1:udp and dst prot 7", "bad filter"),
        ("p1:ip host", "bad filter"),
        ("p9:udp", "unknown port p9"),
        ("p1:stream nosuch", "no stream 'nosuch'"),
    ],
)
def test_a_bad_capture_is_one_line_and_exit_2(tmp_path, arg, words):
    prof = _profile("nolab", tmp_path)
    cp = tgen("run", str(prof), "--capture", arg, "-w", str(tmp_path / "x.pcapng"))
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in cp.stderr, cp.stderr
    assert not (tmp_path / "x.pcapng").exists()


def test_write_into_a_missing_folder_is_exit_2(tmp_path):
    prof = _profile("nolab", tmp_path)
    cp = tgen("run", str(prof), "--capture", "p1", "-w", str(tmp_path / "no" / "x.pcapng"))
    assert cp.returncode == 2 and "does not exist" in cp.stderr, cp.stderr


def test_a_loss_trigger_without_loss_never_starts_and_a_dut_event_trigger_starts_at_it(
    lab, tmp_path
):
    prof = _profile(lab, tmp_path, pps=2000)
    quiet, out = tmp_path / "quiet.pcapng", tmp_path / "q.json"
    cp = tgen("run", str(prof), "--capture", "p1:udp", "--capture-trigger", "loss", "-w",
              str(quiet), "-d", "500ms", "--json", str(out), "--no-store", "--quiet")  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    (c,) = json.loads(out.read_text())["captures"]
    assert (c["state"], c["reason"], c["kept"]) == ("done", "never triggered", 0)
    assert not quiet.exists()
    # a --dut-event at 400 ms starts it: the first frames kept are from after it
    ev, out2 = tmp_path / "ev.pcapng", tmp_path / "e.json"
    cp = tgen("run", str(prof), "--capture", "p1:udp", "--capture-trigger", "dut-event",
              "-w", str(ev), "--dut-event", "400ms: true", "--json", str(out2),
              "--no-store", "--quiet")  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out2.read_text())
    (c,) = doc["captures"]
    assert c["state"] == "done" and 0 < c["kept"] < doc["streams"]["up"]["rx_frames"]
    first = min(int(r[0].split()[3]) for r in tshark(ev, "frame.comment") if "up" in r[0])
    assert first > 2000 * 0.3  # nothing from before the event (at 400 ms of 2 kpps)


def test_dut_event_trigger_without_a_dut_event_is_exit_2(tmp_path):
    prof = _profile("nolab", tmp_path)
    cp = tgen("run", str(prof), "--capture", "p1", "--capture-trigger", "dut-event")
    assert cp.returncode == 2 and "no --dut-event" in cp.stderr, cp.stderr
