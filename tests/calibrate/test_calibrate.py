"""tgen calibrate: the cache, tx_path resolution, and a real (short) calibration into a sink."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tgen_tui.calibrate import cache
from tgen_tui.calibrate.resolve import resolve

ROOT = Path(__file__).resolve().parents[2]
TGEN = [sys.executable, "-m", "tgen_tui"]


def _entry(path: str = "tx_ring", batch: int = 4096, **host) -> dict:
    return {
        "measured_at": "2026-11-30T13:00:00+0000",
        "host": cache.host_facts() | host,
        "choice": {"tx_path": path, "max_batch": batch},
        "kpps": 500.0,
        "table": [
            {"tx_path": path, "max_batch": batch, "kpps": 500.0, "best_for_path": True},
            {"tx_path": "sendmmsg", "max_batch": 2048, "kpps": 400.0, "best_for_path": True},
        ],
    }


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TGEN_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_cache_round_trip_most_specific_first(cache_dir):
    cache.store(_entry("sendmmsg", 256), cache.keys("veth"))
    cache.store(_entry("tx_ring", 4096), cache.keys("veth", "p0", "lab-tester")[:1])
    k, e, stale = cache.lookup("veth", "p0", "lab-tester")
    assert (k.endswith("|veth|lab-tester/p0"), e["choice"]["tx_path"], stale) == (
        True,
        "tx_ring",
        None,
    )
    k, e, _ = cache.lookup("veth", "p1", "lab-tester")  # another interface: the driver's entry
    assert k.endswith("|veth") and e["choice"] == {"tx_path": "sendmmsg", "max_batch": 256}
    assert cache.lookup("ixgbe", "eth1", None) == (None, None, None)


def test_stale_and_corrupt_cache(cache_dir):
    cache.store(_entry(kernel="0.0.1-other"), cache.keys("veth"))
    _k, _e, stale = cache.lookup("veth", None, None)
    assert stale and "kernel changed" in stale
    (cache_dir / cache.FILE_NAME).write_text("{not json")
    assert cache.lookup("veth", None, None) == (None, None, None)


@pytest.mark.root
def test_resolve_profile_cache_default(cache_dir):
    from tgen_tui.calibrate.measure import SinkPair

    with SinkPair("tgct") as pair:
        d = resolve("auto", pair.if_a, pair.ns_a)
        assert (d.tx_path, d.source) == ("sendmmsg", "default") and "driver veth" in d.why
        cache.store(_entry("tx_ring", 4096), cache.keys("veth"))
        c = resolve("auto", pair.if_a, pair.ns_a)
        assert (c.tx_path, c.max_batch, c.source) == ("tx_ring", 4096, "cache")
        p = resolve("sendmmsg", pair.if_a, pair.ns_a)  # the profile wins, with its best batch
        assert (p.tx_path, p.max_batch, p.source) == ("sendmmsg", 2048, "profile")
        cache.store(_entry("af_xdp", 1024), cache.keys("veth"))
        x = resolve("auto", pair.if_a, pair.ns_a, max_frame=2048)
        assert (x.tx_path, x.source) == ("af_xdp", "cache") and "tcpdump" in x.why
        # a port well within sendmmsg's calibrated 400 kpps keeps it (kernel tx stamps,
        # tcpdump); above half of it the faster calibrated path is used
        k = resolve("auto", pair.if_a, pair.ns_a, max_frame=2048, pps=150_000)
        assert (k.tx_path, k.max_batch, k.source) == ("sendmmsg", 2048, "cache")
        assert "kernel transmit timestamps" in k.why and "af_xdp" in k.why
        f = resolve("auto", pair.if_a, pair.ns_a, max_frame=2048, pps=250_000)
        assert (f.tx_path, f.source) == ("af_xdp", "cache")
        j = resolve("auto", pair.if_a, pair.ns_a, max_frame=9000)  # jumbo: not in a UMEM chunk
        assert (j.tx_path, j.source) == ("sendmmsg", "default") and "9000 B" in j.why
        cache.store(_entry("tx_ring", 4096, cpu_model="another CPU"), cache.keys("veth"))
        s = resolve("auto", pair.if_a, pair.ns_a)
        assert s.source == "default" and "stale" in s.why
    with pytest.raises(ValueError, match="unknown tx_path"):
        resolve("carrier-pigeon", "lo", None)  # (xdp is a path now: issue 37)


@pytest.mark.root
@pytest.mark.parametrize(
    "asked, ran, batch, source",
    [("auto", "tx_ring", 4096, "cache"), ("af_xdp", "af_xdp", 1024, "profile")],
)
def test_worker_uses_the_resolved_path(cache_dir, asked, ran, batch, source):
    """port_config resolves the path (auto: from the cache); the real worker opens it and sends."""
    from tgen_tui.calibrate import iface
    from tgen_tui.calibrate.measure import SinkPair, sink_program
    from tgen_tui.engine.workers import port_config
    from tgen_tui.packets.program import program_from_dict

    cache.store(_entry("tx_ring", 4096), cache.keys("veth"))
    prog = program_from_dict(sink_program())
    prog = prog.__class__(**{**prog.__dict__, "schedule": prog.schedule.__class__(
        **{**prog.schedule.__dict__, "pps": 300_000.0, "count": 20_000})})  # fmt: skip
    shm = f"/dev/shm/tgen-caltest-{os.getpid()}"
    with SinkPair("tgcw") as pair:
        spec = port_config("a", pair.if_a, pair.ns_a, [prog], tx_path=asked) | {"rx": False}
        assert (spec["tx_path"], spec["max_batch"], spec["tx_path_source"]) == (ran, batch, source)
        rx0 = iface.counters(pair.if_b, pair.ns_b)[0]
        w = subprocess.Popen([sys.executable, "-m", "tgen_tui.worker"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=str(ROOT))  # fmt: skip

        def cmd(m: dict, want: str) -> dict:
            w.stdin.write(json.dumps(m) + "\n")
            w.stdin.flush()
            while True:
                ev = json.loads(w.stdout.readline())
                assert ev["event"] != "error", ev
                if ev["event"] == want:
                    return ev

        try:
            assert json.loads(w.stdout.readline())["event"] == "hello"
            ready = cmd({"cmd": "configure", "shm": shm, "n_streams": 1, "ports": [spec]}, "ready")
            assert ready["tx_path"] == {"a": ran}
            cmd({"cmd": "start", "t0_ns": time.monotonic_ns()}, "tx_done")
            w.stdin.write(json.dumps({"cmd": "stop", "drain_ms": 0}) + "\n")
            w.stdin.flush()
            while (ev := json.loads(w.stdout.readline()))["event"] != "stopped":
                pass
            assert ev["counters"]["tx_frames"] == 20_000
            assert iface.counters(pair.if_b, pair.ns_b)[0] - rx0 == 20_000
            cmd({"cmd": "quit"}, "bye")
            w.wait(5)
        finally:
            if w.poll() is None:
                w.kill()
                w.wait(5)
            if os.path.exists(shm):
                os.unlink(shm)


@pytest.mark.root
def test_calibrate_cli_writes_cache(cache_dir):
    before = set(
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    )
    r = subprocess.run(
        TGEN + ["calibrate", "--rounds", "1", "--seconds", "0.3", "--warm", "0.1", "--json"],
        capture_output=True, text=True, cwd=str(ROOT), timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    e = json.loads(r.stdout)
    rows = {(x["tx_path"], x["max_batch"]): x for x in e["table"]}
    assert {p for p, _ in rows} == {"sendmmsg", "tx_ring", "af_xdp"} and len(rows) == 7
    packet = [x for (p, _), x in rows.items() if p != "af_xdp"]
    assert all(x["kpps"] > 0 and not x["errors"] for x in packet), e["table"]
    assert all(x["eligible"] for x in rows.values())  # AF_XDP too, unless --no-xdp
    best = max((x for x in rows.values() if not x["errors"]), key=lambda x: x["kpps"])
    assert e["choice"] == {"tx_path": best["tx_path"], "max_batch": best["max_batch"]}
    assert e["driver"] == "veth" and e["host"]["kernel"] == os.uname().release
    k, got, stale = cache.lookup("veth", None, None)
    assert got["choice"] == e["choice"] and stale is None
    # the spacing: every method at every rate, counted by the receiver; ceilings cached
    from tgen_tui.calibrate.pacing import ceilings
    from tgen_tui.calibrate.spacing import METHODS, RATES

    sp = e["spacing"]
    assert {(p["method"], p["pps"]) for p in sp["points"]} == {
        (m, r) for m in METHODS for r in RATES
    }
    assert all(p["gaps"] > 0.3 * p["pps"] * 0.3 for p in sp["points"]), sp["points"]
    assert set(sp["ceiling_pps"]) == set(METHODS) and got["spacing"] == sp
    q, t, src = ceilings("veth", "p0", "some-netns")
    assert (q, t, src) == (sp["ceiling_pps"]["qdisc"], sp["ceiling_pps"]["timer"], "cache")
    after = set(
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    )
    assert not {n for n in after - before if n.startswith("tgcal")}


def test_calibrate_bad_input(cache_dir):
    r = subprocess.run(TGEN + ["calibrate", "--netns", "x"], capture_output=True, text=True,
                       cwd=str(ROOT))  # fmt: skip
    assert r.returncode == 2 and r.stderr.strip() == "tgen: error: --netns needs --interface"
    r = subprocess.run(TGEN + ["calibrate", "--rounds", "0"], capture_output=True, text=True,
                       cwd=str(ROOT))  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.root
def test_calibrate_missing_interface(cache_dir):
    r = subprocess.run(TGEN + ["calibrate", "--interface", "nope0"], capture_output=True,
                       text=True, cwd=str(ROOT))  # fmt: skip
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "nope0" in r.stderr
    assert not (cache_dir / cache.FILE_NAME).exists()


@pytest.mark.root
def test_no_xdp_keeps_auto_on_af_packet(cache_dir):
    from tgen_tui.calibrate.measure import calibrate

    e = calibrate(rounds=1, seconds=0.2, warm_s=0.05, allow_xdp=False,
                  candidates=(("sendmmsg", 64), ("af_xdp", 64)))  # fmt: skip
    rows = {r["tx_path"]: r for r in e["table"]}
    assert e["choice"] == {"tx_path": "sendmmsg", "max_batch": 64} and not e["allow_xdp"]
    assert rows["sendmmsg"]["eligible"] and not rows["af_xdp"]["eligible"]
    assert rows["sendmmsg"]["kpps"] > 0


def test_spacing_table_and_ceiling_names_every_method():
    from tgen_tui.commands.calibrate_cmd import spacing_table

    sp = {"points": [{"method": "qdisc", "pps": 10_000.0, "within_10pct": 0.97},
                     {"method": "qdisc", "pps": 50_000.0, "within_10pct": 0.5},
                     {"method": "timer", "pps": 10_000.0, "within_10pct": 0.8}],
          "ceiling_pps": {"qdisc": 10_000.0, "timer": 0.0}}  # fmt: skip
    text = spacing_table(sp)
    assert "qdisc" in text and "97.0%" in text and "10 kpps" in text
    assert "none (below every rate)" in text.splitlines()[2]
