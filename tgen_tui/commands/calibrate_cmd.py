"""``tgen calibrate``: measure the send paths on this host and cache the fastest."""

from __future__ import annotations

import argparse
import json
import os
import sys

from tgen_tui.diagnostics import EnvironmentProblem, TgenError

EPILOG = """\
What it does: sends 64-byte UDP frames flat out from one pinned core with each candidate
send path (AF_PACKET sendmmsg at 256/1024/2048-frame batches, PACKET_TX_RING at
1024/4096-frame flushes, AF_XDP at 256/1024), interleaved ROUNDS times (a candidate's figure is its best round: other work only
takes rate away), counts them with
the kernel's interface counter (frames per second, kpps = 1000 frames/s), and caches the
fastest for this host and interface driver in ~/.cache/tgen/txpath.json ($TGEN_CACHE_DIR
overrides). A port with `tx_path: auto` (the default) then uses it, except that a port
whose requested rate is at most half of sendmmsg's calibrated rate keeps sendmmsg: its
kernel transmit timestamps keep the tester's send path out of latency, and tcpdump sees
its frames. `tgen run --json` shows, per worker, which path ran and why (profile, cache or
default).

AF_XDP (copy mode) bypasses the qdisc and the packet taps: when it is chosen, tcpdump
on the tester port sees none of the frames tgen sends (the interface counters and the
far end do). --no-xdp keeps `auto` to the AF_PACKET paths; a profile can also pin a
port with `tx_path: sendmmsg`.

By default the frames go into a veth pair of its own, in two namespaces it creates and
removes, whose far end drops them: never the DUT, no test traffic touched. With
--interface the frames leave that interface (198.18.0.1 -> 198.18.0.2, to a MAC nobody
has) and are counted by its tx_packets: use a port whose far end is a sink.

It then measures tgen's own latency floor: one 64 B stream at 20 kfps for 1 s across the
same kind of pair, back to back with no DUT (RFC 2544's back-to-back tester check). Every
result records its median as latency_floor_ns, next to latency_source (how tgen takes the
two timestamps); --no-floor skips it.

Then the spacing (on its own pair only): one constant 64 B stream per pacing method
(qdisc: a TBF on the port; timer: each frame released at its due time) at 10k, 20k, 50k
and 100k fps for SECONDS each, and the share of gaps within 10 % of the asked gap at the
receiver. A method's ceiling is the highest of those rates at which that share is at
least 90 %; `pacing: auto` then uses the cached ceilings instead of the defaults (qdisc
20 kpps, timer 20 kpps with its compiled loop, 10 kpps without), and a run above them
says so. --no-spacing skips it.

Takes about ROUNDS x 7 x (SECONDS + 0.8) s (about 38 s by default), plus about 8 x
(SECONDS + 0.5) s for the spacing. Needs root. Run it
on an otherwise idle host: other work changes the ranking (it warns when the load is high).

examples:
  tgen calibrate                                   # own veth pair; caches for 'veth'
  tgen calibrate --rounds 3 --seconds 3            # steadier figures on a busy host
  tgen calibrate --no-xdp                          # keep tcpdump on the ports useful
  tgen calibrate --interface p0 --netns lab-tester --json

Exit codes: 0 ok, 2 bad option, 3 environment (not root, no such interface, nothing sent).
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure sendmmsg vs TX ring on this host; cache the fastest send path",
        description="Measure the send paths into a sink and cache the fastest (needs root).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--interface", metavar="IF", help="send on this interface instead of a pair of its own"
    )
    p.add_argument("--netns", metavar="NS", help="namespace of --interface (default: this one)")
    p.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds per candidate (default 3)"
    )
    p.add_argument(
        "--seconds", type=float, default=1.0, help="counted window per run, s (default 1)"
    )
    p.add_argument(
        "--warm", type=float, default=0.5, help="warm-up before counting, s (default 0.5)"
    )
    p.add_argument(
        "--cpu", type=int, help="CPU to pin the sender to (default: the highest allowed)"
    )
    p.add_argument(
        "--no-cache", action="store_true", help="measure and print, do not write the cache"
    )
    p.add_argument(
        "--no-xdp",
        action="store_true",
        help="never choose AF_XDP for auto (keeps tcpdump on the tester ports seeing the frames)",
    )
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the latency floor (tgen back to back on the pair: every result records it "
        "as latency_floor_ns)",
    )
    p.add_argument(
        "--no-spacing",
        action="store_true",
        help="skip the spacing of each pacing method (its ceilings, which pacing: auto uses)",
    )
    p.add_argument("--json", action="store_true", help="print the cache entry as JSON")
    p.set_defaults(func=cmd_calibrate)


def _check(a: argparse.Namespace) -> None:
    if a.rounds < 1 or a.rounds > 20:
        raise TgenError(f"--rounds must be 1..20, got {a.rounds}")
    if not 0.1 <= a.seconds <= 60 or not 0 <= a.warm <= 10:
        raise TgenError("--seconds must be 0.1..60 and --warm 0..10")
    if a.netns and not a.interface:
        raise TgenError("--netns needs --interface")
    if a.cpu is not None and a.cpu not in os.sched_getaffinity(0):
        raise TgenError(f"--cpu {a.cpu} is not an allowed CPU ({sorted(os.sched_getaffinity(0))})")
    if a.netns and ("/" in a.netns or a.netns in (".", "..")):
        raise TgenError(f"--netns {a.netns!r}: not a network namespace name (a name in /run/netns)")
    if os.geteuid() != 0:
        raise EnvironmentProblem("tgen calibrate needs root (network namespaces, AF_PACKET)")
    if a.netns and not os.path.exists(f"/run/netns/{a.netns}"):
        raise EnvironmentProblem(
            f"--netns {a.netns}: network namespace {a.netns!r} does not exist (ip netns list)"
        )


def table(entry: dict) -> str:
    rows = entry["table"]
    lines = [f"{'path':10s} {'batch':>6s} {'best kpps':>9s}  rounds (kpps)"]
    for r in rows:
        runs = " ".join(f"{x:.0f}" for x in r["kpps_runs"])
        mark = (
            "  <- fastest"
            if r["tx_path"] == entry["choice"]["tx_path"]
            and r["max_batch"] == entry["choice"]["max_batch"]
            else ""
        )
        err = f"  failed: {r['errors'][0]}" if r["errors"] else ""
        if not r.get("eligible", True) and not err:
            err = "  (excluded: --no-xdp)"
        lines.append(f"{r['tx_path']:10s} {r['max_batch']:6d} {r['kpps']:9.1f}  {runs}{mark}{err}")
    return "\n".join(lines)


def _spacing(a: argparse.Namespace) -> dict:
    from tgen_tui.calibrate.spacing import measure_spacing

    def progress(pt: dict) -> None:
        if not a.json:
            print(f"  spacing: {pt['method']:5s} {pt['pps'] / 1e3:5.0f} kfps "
                  f"{100 * pt['within_10pct']:5.1f} % of gaps within 10 %",
                  file=sys.stderr, flush=True)  # fmt: skip

    try:
        return measure_spacing(seconds=a.seconds, cpu=a.cpu, progress=progress)
    except (RuntimeError, OSError) as e:
        raise EnvironmentProblem(f"spacing: {e}") from None


def spacing_table(sp: dict) -> str:
    """The spacing points as a table: rates across, methods down, and the ceilings."""
    rates = sorted({p["pps"] for p in sp["points"]})
    head = "spacing    " + "".join(f"{r / 1e3:>8.0f}k" for r in rates) + "   ceiling"
    lines = [head + "   (% of gaps within 10 % of the asked gap)"]
    for m, top in sp["ceiling_pps"].items():
        got = {p["pps"]: p["within_10pct"] for p in sp["points"] if p["method"] == m}
        cells = "".join(f"{100 * got[r]:8.1f}%" if r in got else f"{'-':>9s}" for r in rates)
        ceil = f"{top / 1e3:g} kpps" if top else "none (below every rate)"
        lines.append(f"{m:10s} {cells}   {ceil}")
    return "\n".join(lines)


def cmd_calibrate(a: argparse.Namespace) -> int:
    _check(a)
    from tgen_tui.calibrate import cache, iface
    from tgen_tui.calibrate.measure import calibrate

    if a.interface:
        try:
            iface.driver(a.interface, a.netns)
        except OSError as e:
            raise EnvironmentProblem(str(e)) from None

    def progress(r: int, row, kpps: float) -> None:
        if not a.json:
            print(f"  round {r + 1}: {row.name:14s} {kpps:8.1f} kpps", file=sys.stderr, flush=True)

    try:
        entry = calibrate(a.interface, a.netns, rounds=a.rounds, seconds=a.seconds,
                          warm_s=a.warm, cpu=a.cpu, progress=progress,
                          allow_xdp=not a.no_xdp)  # fmt: skip
    except (RuntimeError, OSError) as e:
        raise EnvironmentProblem(f"calibration failed: {e}") from None
    if a.interface is None and not a.no_spacing:
        entry["spacing"] = _spacing(a)
    written = None
    if not a.no_cache:
        ks = cache.keys(entry["driver"], a.interface, a.netns)
        written = str(cache.store(entry, ks))
        entry["cache"] = {"path": written, "keys": ks}
    if not a.no_floor:
        from tgen_tui.calibrate.floor import measure_floor, store_floor

        try:
            fl = measure_floor(cpu=a.cpu)
        except (RuntimeError, OSError) as e:
            raise EnvironmentProblem(f"latency floor: {e}") from None
        if not a.no_cache:
            store_floor(fl)
        entry["latency_floor"] = fl
    if a.json:
        print(json.dumps(entry, indent=2))
        return 0
    print(table(entry))
    c = entry["choice"]
    print(f"fastest: {c['tx_path']} batch {c['max_batch']} at {entry['kpps']:.1f} kpps "
          f"(driver {entry['driver']}, CPU {entry['cpu']}, 64 B frames)")  # fmt: skip
    if "latency_floor" in entry:
        from tgen_tui import fmt

        fl = entry["latency_floor"]
        print(
            f"latency floor (tgen back to back, no DUT; {fl['frames']:,} frames): "
            f"min {fmt.ns(fl['min_ns'])}  p50 {fmt.ns(fl['p50_ns'])}  p99 {fmt.ns(fl['p99_ns'])}"
            f"  max {fmt.ns(fl['max_ns'])}: every result records the p50 as latency_floor_ns"
        )
    if "spacing" in entry:
        print(spacing_table(entry["spacing"]))
    print(f"cached in {written}" if written else "not cached (--no-cache)")
    load = max(entry["loadavg_before"][0], entry["loadavg_after"][0])
    if load > 0.5 * (os.cpu_count() or 1):
        print(
            f"warning: load average {load:.1f} on {os.cpu_count()} CPUs while measuring: other "
            "work shifts the ranking (sendmmsg suffers most); calibrate again on an idle host",
            file=sys.stderr,
        )
    return 0
