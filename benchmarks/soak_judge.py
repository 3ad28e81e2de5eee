"""The judge of benchmarks/soak_faults.py: the run's result, its NDJSON and what the
script saw (the kill, RSS, the store) -> the figures and a pass/fail per promise.

Kept apart from the runner so that each stays small; pure (no processes, no files).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

NAMED_WITHIN_S = 2.0  # a fault is named "at the moment" when its event is this close
RSS_TOLERANCE = 0.10  # RSS at the end against RSS at minute 2


class Digest:
    """What the judge keeps of the run's NDJSON, read once line by line (30 minutes at
    10 Hz is 18,000 snapshots of ~9 KB: not all held at once): every event line, each
    snapshot's few figures in order with them, the streams over their interfaces, and
    the last snapshot whole."""

    def __init__(self, lines: Iterable[str | dict]) -> None:
        self.items: list[dict] = []  # events as they are; snapshots as {"snap": figures}
        self.over: list[tuple] = []
        self.snapshots = 0
        self.last: dict = {"ports": {}, "streams": {}}
        for line in lines:
            self._add(json.loads(line) if isinstance(line, str) else line)

    def _add(self, d: dict) -> None:
        if "streams" not in d:
            self.items.append(d)
            return
        self.snapshots += 1
        for s in d["streams"].values():
            p = d["ports"][s["rx_port"]]
            if s["rx_frames"] > p["if_rx_frames"]:
                self.over.append((d.get("seq"), s["name"], s["rx_frames"], p["if_rx_frames"]))
        self.items.append({"snap": _figures(d)})
        self.last = d

    def events(self, kind: str) -> list[dict]:
        return [d for d in self.items if d.get("event") == kind]


def _figures(d: dict) -> dict:
    """A snapshot's figures the judge reads: p0's frames sent, the flows' bytes received,
    the reply stream's learned tuples."""
    down = d["streams"].get("down") or {}
    return {
        "t": d["t"],
        "p0_tx": d["ports"]["p0"]["tx_frames"],
        "tcp_rx": sum(f["rx_bytes"] for f in (d.get("flows") or {}).values()),
        "learned": down.get("learned"),
    }


def dut_commands(times: dict, fill: str, nft: str) -> dict[str, list[str]]:
    """Fault -> the DUT event commands that make it (as tgen_argv passes them)."""
    out = {
        "nft_reload": [nft],
        "conntrack_flush": ["conntrack -F"],
        "link_flap": ["ip link set d1 down", "ip link set d1 up"],
        "store_full": [fill],
    }
    return {k: v for k, v in out.items() if k in times}


def named(dg: Digest, mon, times: dict, commands: dict[str, list[str]]) -> dict[str, dict]:
    """Fault -> where the run's log named it: the notice as each DUT command began (its
    delay after the fault's time), whether it ended ok; the kill's worker_failed event;
    the flap's carrier events."""
    notices = [d for d in dg.events("notice") if d["message"].startswith("DUT event")]
    t0 = mon.t_run_wall
    out: dict[str, dict] = {}
    for fault, cmds in commands.items():
        rec: dict = {"commands": cmds, "named": True, "ok": True, "delay_s": []}
        for i, cmd in enumerate(cmds):
            began = next((d for d in notices if d["message"].endswith(f" s: {cmd}")), None)
            done = next((d for d in notices if d["message"].endswith(f"): {cmd}")), None)
            if began is None or t0 is None:
                rec["named"] = False
                continue
            at = times["flap_up"] if i else times[fault]
            rec["delay_s"].append(round(began["wall"] - (t0 + at), 3))
            rec["message"] = began["message"]
            rec["ok"] = rec["ok"] and done is not None and "(ok)" in done["message"]
        out[fault] = rec
    if "link_flap" in out:
        links = [e for e in dg.events("link") if e["port"] == "p1"]
        out["link_flap"]["link_events"] = [(e["old"], e["new"], e.get("away_s")) for e in links]
        out["link_flap"]["named"] &= [(e["old"], e["new"]) for e in links] == [
            ("up", "no carrier"),
            ("no carrier", "up"),
        ]
    if "worker_kill" in times:
        k = mon.killed
        failed = [e for e in dg.events("worker_failed") if "p1" in e["ports"]]
        rec = {"killed": k, "named": bool(k and failed and "SIGKILL" in failed[0]["reason"])}
        if rec["named"]:
            rec["message"] = f"worker {failed[0]['worker']} failed: {failed[0]['reason']}"
            rec["delay_s"] = [round(failed[0]["wall"] - k["wall"], 3)]
        states = [e for e in dg.events("port_state") if e["port"] == "p1"]
        rec["p1_failed"] = any(e["new"] == "failed" for e in states)
        out["worker_kill"] = rec
    return out


def counts(res: dict, dg: Digest, failed: set[str]) -> dict:
    """The count checks: every snapshot's streams within their interfaces; each port's
    frames sent less unsent minus its interface's tx (0 for each surviving port)."""
    settled = {}
    for name, p in res["ports"].items():
        sent = sum(s["tx_frames"] for s in res["streams"].values() if s["port"] == name)
        settled[name] = sent - p["tx_unsent"] - p["if_tx_frames"]
    survivors = {n: v for n, v in settled.items() if n not in failed}
    return {
        "snapshots": dg.snapshots,
        "snapshots_with_a_stream_over_its_interface": len(dg.over),
        "first_over": dg.over[:3],
        "sent_less_unsent_minus_if_tx": settled,
        "exact": not dg.over and bool(survivors) and all(v == 0 for v in survivors.values()),
    }


def _around(dg: Digest, mark: dict | None) -> tuple[list[dict], list[dict]]:
    """The snapshots' figures before and after the event line ``mark`` in the NDJSON (its
    order is the engine's: events and snapshots as they were published), less the one on
    each side nearest it (sampled, perhaps, across it)."""
    if mark is None:
        return [], []
    i = next(k for k, d in enumerate(dg.items) if d is mark)
    before = [d["snap"] for d in dg.items[:i] if "snap" in d][:-1]
    after = [d["snap"] for d in dg.items[i + 1 :] if "snap" in d][1:]
    return before, after


def kept_running(dg: Digest, dead: dict | None) -> dict:
    """What p0 and the TCP flow did after the kill (``dead``: the worker_failed event):
    frames and bytes since the first snapshot after it, and p0's state at the end."""
    after = _around(dg, dead)[1]
    if not after:
        return {"measured": False}
    end = _figures(dg.last)
    out = {
        "measured": True,
        "p0_tx_after_kill": end["p0_tx"] - after[0]["p0_tx"],
        "tcp_rx_bytes_after_kill": end["tcp_rx"] - after[0]["tcp_rx"],
        "p0_state_at_end": dg.last["ports"]["p0"]["state"],
    }
    out["ok"] = out["p0_tx_after_kill"] > 0 and out["tcp_rx_bytes_after_kill"] > 0
    return out


def learned(dg: Digest, res: dict) -> dict:
    """The reply stream's learned tuples: in the last snapshot before the conntrack flush
    and at the end (after a flush the NAT may map a flow anew: more tuples)."""
    notices = dg.events("notice")
    flush = next((d for d in notices if d["message"].endswith(": conntrack -F")), None)
    before = _around(dg, flush)[0]
    return {
        "before_flush": before[-1]["learned"] if before else None,
        "end": res["streams"]["down"].get("learned"),
    }


def rss_flat(rss: list[dict], duration: float, killed_pid: int | None) -> dict:
    """RSS (MB) at minute 2 (or at 20 % of a shorter run) and at the end, of the tgen
    process and each worker alive at both; flat when each is within RSS_TOLERANCE. The
    end is the last sample with every such worker still there (not one taken while the
    workers quit); ``series``: every sample, the tgen process and its workers' sum."""
    at2 = next((r for r in rss if r["t_s"] >= min(120.0, 0.2 * duration) and r.get("main")), None)
    series = [
        (r["t_s"], r["main"], round(sum(r["workers"].values()), 1)) for r in rss if r.get("main")
    ]
    if at2 is None:
        return {"at_2min": None, "end": None, "samples": len(rss), "flat": None}
    kept = [pid for pid in at2["workers"] if pid != killed_pid]
    end = next(
        (r for r in reversed(rss) if r.get("main") and all(p in r["workers"] for p in kept)), None
    )
    if end is None or end is at2:
        return {"at_2min": at2, "end": end, "samples": len(rss), "flat": None, "series": series}
    pairs = {"main": (at2["main"], end["main"])}
    pairs |= {f"worker {pid}": (at2["workers"][pid], end["workers"][pid]) for pid in kept}
    change = {k: round(b / a - 1, 4) for k, (a, b) in pairs.items()}
    flat = all(abs(v) <= RSS_TOLERANCE for v in change.values())
    return {
        "at_2min": at2,
        "end": end,
        "samples": len(rss),
        "change": change,
        "flat": flat,
        "series": series,
    }


TESTER_OWN = ("tester_ring_drop", "tester_if_drop", "tester_tx_unsent")


def tester_own(res: dict) -> dict:
    """The tester's own shortfalls (what makes a rate too high for this host): per port
    the RX ring's and the interface's receive drops, frames due but not sent, achieved
    against requested; per tester-side loss cause, its frames over the streams (the
    flap's no-carrier frames are tester_tx_unsent too: read them with the flap's time)."""
    ports = {
        n: {k: p.get(k) for k in ("rx_drops", "if_rx_dropped", "backlog", "tx_unsent")}
        | {"achieved_pct": round(100 * p["achieved_pps"] / p["requested_pps"], 2)}
        for n, p in res["ports"].items()
        if p.get("requested_pps")
    }
    causes: dict[str, int] = {}
    for s in res["streams"].values():
        for c in s.get("loss_causes") or []:
            if c["cause"] in TESTER_OWN:
                causes[c["cause"]] = causes.get(c["cause"], 0) + c["frames"]
    return {"ports": ports, "loss_causes": causes}


def judge(res, lines, mon, times, stored, stderr, rc, duration, rules, commands) -> dict:
    """The soak's document: checks, the pass/fail of each promise, the figures.
    ``lines``: the run's NDJSON (lines or a :class:`Digest` of them)."""
    dg = lines if isinstance(lines, Digest) else Digest(lines)
    warn = [ln for ln in stderr.splitlines() if "result not stored" in ln]
    faults = named(dg, mon, times, commands)
    failed = {e["port"] for e in dg.events("port_state") if e["new"] == "failed"}
    checks: dict = {"tgen_exit": rc, "faults": faults, "store": stored, "store_warnings": warn}
    checks["failed_ports"] = sorted(failed)
    checks["reload_extra_rules_loaded"] = rules
    if res is not None:
        checks["counts"] = counts(res, dg, failed)
        dead = next((e for e in dg.events("worker_failed") if "p1" in e["ports"]), None)
        checks["kept_running"] = kept_running(dg, dead)
        checks["learned"] = learned(dg, res)
        checks["tester_own"] = tester_own(res)
    checks["rss_mb"] = rss_flat(mon.rss, duration, (mon.killed or {}).get("pid"))
    passed = {
        "every_fault_named": all(
            f["named"] and f.get("ok", True) and all(abs(x) <= NAMED_WITHIN_S for x in f["delay_s"])
            for f in faults.values()
        ),
        "counts_exact": bool(res) and checks["counts"]["exact"],
        "others_kept_running": (checks.get("kept_running") or {}).get("ok")
        if "worker_kill" in times
        else None,
        "rss_flat": checks["rss_mb"]["flat"],
        "store_intact": stored.get("integrity_check") == ["ok"],
        "store_full_one_warning": (len(warn) == 1 and stored.get("runs") == 0)
        if "store_full" in times
        else None,
        "json_written": bool(res) and "streams" in res,
    }
    return {
        "benchmark": "soak_faults",
        "duration_s": duration,
        "faults": {"at_s": times},
        "passed": passed,
        "checks": checks,
        "streams": {n: _pick(s, STREAM_KEYS) for n, s in (res or {}).get("streams", {}).items()},
        "ports": {n: _pick(p, PORT_KEYS) for n, p in (res or {}).get("ports", {}).items()},
        "transport": (res or {}).get("transport"),
        "dut_events": (res or {}).get("dut_events"),
        "events": [e for e in (res or {}).get("events", []) if _is_fault_line(e)],
        "warnings": (res or {}).get("warnings"),
    }


STREAM_KEYS = ("tx_frames", "rx_frames", "lost", "rx_elsewhere", "outage_ms", "outage_at_s")
STREAM_KEYS += ("outage_recovered", "learned", "loss_causes", "loss_unexplained")
PORT_KEYS = ("state", "tx_frames", "if_tx_frames", "tx_unsent", "if_tx_dropped", "rx_frames")
PORT_KEYS += ("if_rx_frames", "achieved_pps", "requested_pps")


def _pick(d: dict, keys: tuple[str, ...]) -> dict:
    return {k: d.get(k) for k in keys}


def _is_fault_line(text: str) -> bool:
    return any(w in text for w in ("DUT event", "carrier", "failed"))
