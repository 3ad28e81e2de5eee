"""The fuzz of issue 36, in the suite: hostile and careless inputs over the verbs, each
run as ``python -m tgen_tui ...`` the way a new user would (no lab: every profile names
the namespace ``tgen-nofuzz``, which does not exist, so an input that slips through
ends in exit 3 at the namespace check instead of sending anything).

Each case asserts: exactly one line on stderr, the right exit code (2 for bad input, 3
only for a missing namespace or a database that is not one), no "Traceback", an end
within the subprocess timeout (no hang: a FIFO, /dev/zero, an alias bomb, a huge
--count), the words that name the cause, and no file written where none should be.
The profile cases run as one ``tgen validate`` of many files (one line each, in order);
the other cases run two at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 10.0
NS = "tgen-nofuzz"

BASE = f"""\
name: base
ports:
  p0: {{interface: p0, netns: {NS}, speed: 10G}}
  p1: {{interface: p1, netns: {NS}, speed: 10G}}
streams:
  - name: up
    port: p0
    rx_port: p1
    ipv4: {{src: 198.18.0.2, dst: 198.19.0.2}}
    udp:
      src_port: {{min: 10000, max: 10399, mode: unique}}
      dst_port: {{min: 80, max: 179, mode: unique}}
    size: 70
    rate: {{pps: 1000}}
"""
TRANSPORT = f"""\
name: tonly
ports:
  p0: {{interface: p0, netns: {NS}, speed: 10G}}
  p1: {{interface: p1, netns: {NS}, speed: 10G}}
hosts:
  p0: {{netns: {NS}-h0, ipv4: 198.18.100.2}}
  p1: {{netns: {NS}-h1, ipv4: 198.19.100.2}}
streams: []
transport:
  - {{name: bulk, port: p0, rx_port: p1, protocol: tcp, cc: cubic}}
"""
P0 = f"  p0: {{interface: p0, netns: {NS}, speed: 10G}}"
SRC = "src_port: {min: 10000, max: 10399, mode: unique}"


def _bomb(levels: int = 9, width: int = 9) -> str:
    lines = ['a0: &a0 ["lol"' + ', "lol"' * (width - 1) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _kernel_ccs() -> list[str]:
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return []


# name -> (profile text, words its one line must hold); every one is refused (exit 2)
BAD_PROFILES: dict[str, tuple[str, str]] = {
    "alias-bomb": (_bomb(), "YAML aliases expand to more than"),
    "step-huge": (
        BASE.replace(SRC, SRC.replace("unique}", "inc, step: 99999999999999999999999}")),
        "streams[0].udp.src_port.step: 99999999999999999999999 is larger than the range",
    ),
    "cc-unknown": (
        TRANSPORT.replace("cc: cubic", "cc: warpdrive"),
        "is not offered by this kernel",
    ),
    "dst-port-wraps": (
        TRANSPORT.replace("cc: cubic", "cc: cubic, dst_port: 65535, parallel: 8"),
        "transport[0].dst_port: 8 parallel flows from 65535 run past 65535",
    ),
    "gateway-network": (
        BASE.replace(P0, P0[:-1] + ", ipv4: 198.18.0.2/24, gateway: 198.18.0.0}"),
        "ports.p0.gateway: 198.18.0.0 is the network address",
    ),
    "gateway-broadcast": (
        BASE.replace(P0, P0[:-1] + ", ipv4: 198.18.0.2/24, gateway: 198.18.0.255}"),
        "ports.p0.gateway: 198.18.0.255 is the broadcast address",
    ),
    "port-address-network": (
        BASE.replace(P0, P0[:-1] + ", ipv4: 198.18.0.0/24, gateway: 198.18.0.1}"),
        "ports.p0.ipv4: 198.18.0.0/24 is the network address",
    ),
    "ifname-16-bytes": (
        BASE.replace("interface: p0,", "interface: ЖЖЖЖЖЖЖЖЖЖЖЖЖЖ,"),
        "is 28 bytes; Linux interface names are at most 15 bytes",
    ),
    "ifname-slash": (BASE.replace("interface: p0,", "interface: 'a/b',"), "may not contain '/'"),
    "ifname-space": (BASE.replace("interface: p0,", "interface: 'a b',"), "may not contain ' '"),
    "imix-nonsense": (
        BASE.replace("size: 70", "size: {imix: nonsense}"),
        "streams[0].size.imix: 'nonsense' is not an IMIX preset",
    ),
    "dut-ssh-quote": (BASE + 'dut: {ssh: "ssh \'x"}\n', 'dut.ssh: "ssh \'x": no closing'),
    "duplicate-key": (BASE.replace("size: 70", "size: 70\n    size: 80"), 'duplicate key "size"'),
}
# name -> (profile text, words of its one warning line); these validate (exit 0)
WARNED_PROFILES: dict[str, tuple[str, str]] = {
    "handshake-no-learner": (
        BASE.replace("    udp:\n", "    tcp:\n      handshake: true\n"),
        "streams[0].tcp.handshake: warning: no reply stream answers the SYNs",
    ),
    "learner-unreached": (
        BASE + "  - {name: back, port: p0, rx_port: p1, learn: true, size: 70,"
        " ipv4: {src: 198.19.0.2, dst: 198.19.0.1}, udp: {src_port: 80, dst_port: 10000}}\n",
        "streams[1].learn: warning: no stream arrives at port p0",
    ),
    "step-collapses": (
        BASE.replace(SRC, "src_port: {min: 10000, max: 10255, mode: inc, step: 256}"),
        "step 256 over 256 values (10000..10255) repeats after 1 value: the stream sends 100 flows",
    ),
}


@dataclass(frozen=True)
class Case:
    """One command line (``{d}``: the case folder), what it must exit with and say, and
    the paths (under ``{d}``) that must not exist afterwards."""

    id: str
    argv: tuple[str, ...]
    rc: int = 2
    words: str = ""
    absent: tuple[str, ...] = ()
    stdout_words: tuple[str, ...] = field(default=())
    stderr_lines: int = 1


def C(id: str, cmd: str, words: str, rc: int = 2, absent: tuple[str, ...] = ()) -> Case:
    import shlex

    return Case(id, tuple(shlex.split(cmd)), rc, words, absent)


ONLY_TRANSPORT = "only transport: flows (kernel TCP/UDP sockets), no frame streams"
CASES = [
    C("pcap-count-huge", "pcap base.yaml --count 100000000 -o out.pcap", "give 1 to 1,000,000",
      absent=("out.pcap",)),
    C("pcap-step-huge", "pcap bad/step-huge.yaml -o step.pcap", "is larger than the range",
      absent=("step.pcap",)),
    C("search-transport", "search transport.yaml --quick", ONLY_TRANSPORT),
    C("rfc9693-cps-transport", "rfc9693 cps transport.yaml --quick", ONLY_TRANSPORT),
    C("sweep-transport", "sweep transport.yaml sessions=1..10 --quick", ONLY_TRANSPORT),
    C("rfc2544-transport", "rfc2544 throughput transport.yaml --quick", ONLY_TRANSPORT),
    C("scaleup-transport", "scaleup rfc2544-throughput transport.yaml --quick --cores 1",
      ONLY_TRANSPORT, absent=("scaleup-plots",)),
    C("dut-ssh-quote", "run base.yaml -d 1 --dut-ssh \"ssh 'x\"", "--dut-ssh \"ssh 'x\": no closing"),
    C("preflight-dut-ssh", "preflight base.yaml --dut-ssh \"ssh 'x\"", "no closing quotation"),
    C("ndjson-dir", "run base.yaml -d 1 --ndjson outdir", "--ndjson outdir: is a directory"),
    C("ndjson-no-folder", "run base.yaml -d 1 --ndjson nodir/x.ndjson",
      "the folder nodir does not exist", absent=("nodir",)),
    C("ndjson-dev-full", "run base.yaml -d 1 --ndjson /dev/full", "/dev/full"),
    C("method-json-no-folder", "rfc2544 throughput base.yaml --quick --json nodir/r.json",
      "--json nodir/r.json: the folder nodir does not exist", absent=("nodir",)),
    C("export-dir", "results export --csv --output outdir", "--output outdir: is a directory"),
    C("export-no-folder", "results export --csv --output nodir/x.csv",
      "the folder nodir does not exist", absent=("nodir",)),
    C("export-dev-full", "results export --json --output /dev/full", "/dev/full"),
    C("pcap-dir", "pcap base.yaml -o outdir", "--output outdir: is a directory"),
    C("pcap-no-folder", "pcap base.yaml -o nodir/x.pcap", "the folder nodir does not exist",
      absent=("nodir",)),
    C("pcap-dev-full", "pcap base.yaml -o /dev/full", "/dev/full"),
    C("schema-dir", "schema --output outdir", "--output outdir: is a directory"),
    C("schema-no-folder", "schema --output nodir/s.json", "the folder nodir does not exist",
      absent=("nodir",)),
    C("schema-dev-full", "schema --output /dev/full", "/dev/full"),
    C("sweep-1e99", "sweep base.yaml sessions=1..1e99 --quick", "sessions '1e99': give 1 to"),
    C("sweep-beyond-ports", "sweep base.yaml sessions=1k..100M --quick",
      "100,000,000 sessions need 1,000,000 source ports"),
    C("sweep-fractional", "sweep base.yaml sessions=1.5..2.5 --quick", "a whole number"),
    C("sweep-points", "sweep base.yaml sessions=1..10 --points 1000000 --quick",
      "--points: 1000000: give 2 to 100"),
    C("list-limit", "results list --limit -1", "--limit: -1"),
    C("compare-spread", "results compare 1 2 --spread-factor -3", "--spread-factor: -3"),
    C("trend-height", "results trend rx_pps --height 0", "--height: 0"),
    C("retries", "rfc2544 throughput base.yaml --retries=-1 --quick", "--retries: -1"),
    C("alpha", "rfc9693 cps base.yaml --alpha 0 --quick", "--alpha: 0"),
    C("phase2-delay", "rfc9693 cps base.yaml -D 1ms --quick", "-D 1ms: phase 2 starts after"),
    C("goal-twice", "search base.yaml --goal ndr=0 --goal ndr=0.1 --quick",
      "--goal ndr: given twice"),
    C("run-duration-0", "run base.yaml -d 0", "--duration 0: must be > 0"),
    C("fail-on-empty", "run base.yaml -d 1 --fail-on ''", "--fail-on: empty"),
    C("db-empty-file", "results list --db empty.db", "empty.db is empty", rc=3),
    C("cores-word", "run base.yaml -d 1 --cores abc", "--cores: 'abc': give core numbers"),
    C("search-width", "search base.yaml --width=-1", "--width: -1"),
    C("goal-trial-0", "search base.yaml --goal ndr=0,trial=0", "trial=0: a duration must be > 0"),
    C("calibrate-netns", "calibrate --netns MISSING --interface p0",
      "network namespace 'MISSING' does not exist", rc=3),
]  # fmt: skip
GROUPS = ["validate-bad", "validate-warned", "results-help"]


def _setup(d: Path) -> None:
    (d / "base.yaml").write_text(BASE, encoding="utf-8")
    (d / "transport.yaml").write_text(TRANSPORT, encoding="utf-8")
    (d / "outdir").mkdir()
    (d / "empty.db").write_bytes(b"")
    for sub, table in (("bad", BAD_PROFILES), ("warned", WARNED_PROFILES)):
        (d / sub).mkdir()
        for name, (text, _) in table.items():
            (d / sub / f"{name}.yaml").write_text(text, encoding="utf-8")
    os.mkfifo(d / "bad" / "fifo.yaml")  # nobody writes: opening it for reading would block
    with open(d / "bad" / "huge.yaml", "wb") as f:
        f.truncate(17 << 20)  # sparse: over the 16 MiB limit, nothing written


EXTRA_BAD = {  # files that are not profiles: (path under {d}, words)
    "fifo": ("bad/fifo.yaml", "cannot read: a named pipe (FIFO)"),
    "dev-zero": ("/dev/zero", "cannot read: a character device"),
    "directory": ("outdir", "cannot read: a directory"),
    "huge": ("bad/huge.yaml", "a profile is at most 16 MiB"),
}


@dataclass
class Ran:
    rc: int | None
    stdout: str
    stderr: str
    seconds: float


def _tgen(d: Path, argv: tuple[str, ...] | list[str]) -> Ran:
    env = dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",
        COLUMNS="100",
        TGEN_DB=str(d / "no-such.db"),
        TGEN_CACHE_DIR=str(d / "cache"),
    )
    t = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "tgen_tui", *argv],
            cwd=d,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Ran(None, out, err, time.monotonic() - t)
    return Ran(r.returncode, r.stdout, r.stderr, time.monotonic() - t)


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> tuple[Path, dict[str, Ran], set[str]]:
    """Every case run once (two at a time); the folder and what it held before."""
    d = tmp_path_factory.mktemp("hostile")
    _setup(d)
    before = {str(p.relative_to(d)) for p in d.rglob("*")}
    bad = [f"bad/{n}.yaml" for n in BAD_PROFILES] + [p for p, _ in EXTRA_BAD.values()]
    jobs: dict[str, list[str] | tuple[str, ...]] = {c.id: c.argv for c in CASES}
    jobs["validate-bad"] = ["validate", *bad]
    jobs["validate-warned"] = [
        "validate",
        "--quiet",
        *[f"warned/{n}.yaml" for n in WARNED_PROFILES],
    ]
    jobs["results-help"] = ["results", "--help"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {k: pool.submit(_tgen, d, argv) for k, argv in jobs.items()}
        out = {k: f.result() for k, f in futures.items()}
    return d, out, before


def _common(r: Ran, lines: int) -> list[str]:
    assert r.rc is not None, f"no end within {TIMEOUT_S:g} s (a hang): {r.stderr[-300:]}"
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "internal error" not in r.stderr, r.stderr
    got = r.stderr.splitlines()
    assert len(got) == lines, r.stderr
    return got


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_option_is_one_line_and_its_exit_code(ran, case):
    d, out, _ = ran
    r = out[case.id]
    (line,) = _common(r, 1)
    assert r.rc == case.rc, (r.rc, line)
    assert case.words in line, line
    for p in case.absent:
        assert not (d / p).exists(), f"{p} was written"


def test_bad_profiles_are_one_positioned_line_each(ran):
    d, out, _ = ran
    r = out["validate-bad"]
    names = list(BAD_PROFILES) + list(EXTRA_BAD)
    lines = _common(r, len(names))
    assert r.rc == 2 and r.stdout == ""
    words = [w for _, w in BAD_PROFILES.values()] + [w for _, w in EXTRA_BAD.values()]
    paths = [f"bad/{n}.yaml" for n in BAD_PROFILES] + [p for p, _ in EXTRA_BAD.values()]
    if not _kernel_ccs():  # no list to check cc against: that file validates
        i = names.index("cc-unknown")
        names.pop(i), words.pop(i), paths.pop(i)
    for name, path, want, line in zip(names, paths, words, lines, strict=True):
        assert line.startswith(f"{path}:"), (name, line)
        assert want in line, (name, line)
        if name not in EXTRA_BAD and name != "alias-bomb":
            assert not line.startswith(f"{path}:1:1:"), (name, line)  # positioned


def test_traps_are_warnings_with_a_position(ran):
    _, out, _ = ran
    r = out["validate-warned"]
    lines = _common(r, len(WARNED_PROFILES))
    assert r.rc == 0 and r.stdout == ""
    for (name, (_, want)), line in zip(WARNED_PROFILES.items(), lines, strict=True):
        assert line.startswith(f"warned/{name}.yaml:"), line
        assert want in line, line


def test_results_help_keeps_metric_names_apart(ran):
    _, out, _ = ran
    r = out["results-help"]
    _common(r, 0)
    assert r.rc == 0
    rows = [x for x in r.stdout.splitlines() if x.startswith("  tcp_goodput_bps")]
    assert rows and rows[0].split()[1] == "transport:", rows


def test_no_case_hangs_and_nothing_is_written(ran):
    d, out, before = ran
    slow = {k: round(r.seconds, 1) for k, r in out.items() if r.seconds > TIMEOUT_S * 0.8}
    assert not slow, slow
    after = {str(p.relative_to(d)) for p in d.rglob("*")}
    assert after - before <= {"cache"}, sorted(after - before)
    assert (d / "empty.db").stat().st_size == 0  # a reading verb wrote no schema into it
    assert not any((d / "outdir").iterdir())


def test_no_process_is_left_behind(ran):
    import psutil

    d, _, _ = ran
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            if p.info["cwd"] == str(d):
                left.append((p.info["pid"], p.info["cmdline"]))
        except (psutil.Error, TypeError):
            continue
    assert not left, left
