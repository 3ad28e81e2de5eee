"""Voice presets (``preset: g711|g729|g723``): RTP behind UDP, the codec's size and packet
rate (RFC 3551), decoded by scapy and tshark as the codec's RTP stream."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from scapy.layers.rtp import RTP

from tgen_tui.diagnostics import BadInput
from tgen_tui.packets.batch import BatchBuilder
from tgen_tui.packets.compile import compile_profile
from tgen_tui.packets.flowsplit import flow_period
from tgen_tui.profiles.loader import load_profile_text

PROFILE = """
ports: {p0: {interface: veth0}}
streams:
  - {name: v, port: p0, preset: PRESET, ipv4: {src: 198.18.0.2, dst: 198.19.0.2}EXTRA}
"""


def _prog(preset: str, extra: str = ""):
    text = PROFILE.replace("PRESET", preset).replace("EXTRA", extra)
    return compile_profile(load_profile_text(text, "v.yaml")).streams[0]


@pytest.mark.parametrize(
    ("preset", "size", "pps", "pt", "step"),
    [("g711", 218, 50.0, 0, 160), ("g729", 78, 50.0, 18, 160), ("g723", 82, 1000 / 30, 4, 240)],
)
def test_the_codec_frames_on_the_wire(preset, size, pps, pt, step):
    prog = _prog(preset)
    assert prog.schedule.pps == pytest.approx(pps)
    frames = BatchBuilder(prog).frames(0, 70_000)[::7_000]  # across a sequence wrap
    for k, raw in zip(range(0, 70_000, 7_000), frames, strict=True):
        assert len(raw) + 4 == size  # + FCS
        pkt = Ether(raw)
        udp = pkt[UDP]
        assert udp.dport == 5004 and udp.sport == 5004
        sent = udp.chksum
        del udp.chksum
        assert Ether(bytes(pkt))[UDP].chksum == sent  # scapy recomputes the same checksum
        rtp = RTP(bytes(udp.payload))
        assert rtp.version == 2 and rtp.payload_type == pt and rtp.sourcesync == 0x74676E01
        assert rtp.sequence == k % 65536
        assert rtp.timestamp == (k * step) % (1 << 32)
        assert len(bytes(udp.payload)) - 12 == size - 14 - 20 - 8 - 12 - 4  # the payload


def test_rtp_fields_are_not_flows():
    prog = _prog("g711")
    assert flow_period(prog) == 1  # one 5-tuple: the RTP sequence does not make flows


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_reads_pcmu(tmp_path):
    prof = tmp_path / "v.yaml"
    prof.write_text(PROFILE.replace("PRESET", "g711").replace("EXTRA", ""))
    pcap = tmp_path / "v.pcap"
    subprocess.run([sys.executable, "-m", "tgen_tui", "pcap", str(prof), "--count", "3",
                    "--output", str(pcap)], check=True, capture_output=True)  # fmt: skip
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-d", "udp.port==5004,rtp", "-o", "udp.check_checksum:TRUE",
         "-T", "fields", "-e", "frame.len", "-e", "rtp.p_type", "-e", "rtp.seq",
         "-e", "rtp.timestamp", "-e", "udp.checksum.status"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [ln.split("\t") for ln in out.splitlines() if ln.strip()]
    assert rows == [["214", "0", str(i), str(160 * i), "1"] for i in range(3)]


def test_given_fields_override_the_preset():
    prog = _prog("g711", ", size: 300, rate: {pps: 100}")
    assert prog.sizes.max + 4 == 300 and prog.schedule.pps == 100.0
    lengths = BatchBuilder(prog).lengths(np.arange(3))
    assert set((lengths + 4).tolist()) == {300}


def test_rtp_without_udp_is_one_line():
    text = PROFILE.replace("preset: PRESET", "tcp: {}, rtp: {payload_type: 0}").replace("EXTRA", "")
    with pytest.raises(BadInput) as e:
        load_profile_text(text, "v.yaml")
    (line,) = e.value.lines()
    assert "rtp" in line and "UDP" in line
