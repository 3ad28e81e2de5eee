"""Running transport streams: plan the flows, start pinned workers, gather their reports.

Each enabled ``transport:`` entry of a profile becomes ``parallel`` flows (named ``NAME``,
or ``NAME.1`` ... ``NAME.N``) and one worker process
(``python -m tgen_tui.worker.transport_flow``), pinned to one core of ``cores`` in turn.
A worker opens its flows' sockets in the hosts' namespaces, says it is ready, starts at
the common instant ``go T0`` and reports cumulative counters every interval. This module
turns the k-th report of every worker into the k-th snapshot (per flow interval figures
and Jain's index over the flows that carried data), and the final reports into the result.

Plain threads and processes: the transport run does not need the trio engine (it has no
shared-memory counters; each worker writes its own JSON lines).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from tgen_tui.diagnostics import BadInput, EnvironmentProblem
from tgen_tui.engine import transport_stats as ts
from tgen_tui.worker.transport_flow import is_on

READY_TIMEOUT_S = 20.0


def plan_flows(profile) -> list[list[dict]]:
    """Per worker (one per enabled transport entry), the flow specs it runs."""
    groups: list[list[dict]] = []
    fid = 0
    for t in profile.transport:
        if not t.enabled:
            continue
        src, dst = profile.hosts[t.port], profile.hosts[t.rx_port]
        group = []
        for k in range(t.parallel):
            name = t.name if t.parallel == 1 else f"{t.name}.{k + 1}"
            port = (t.dst_port + k) if t.dst_port else ts_port(fid)
            group.append(
                {
                    "id": fid,
                    "name": name,
                    "stream": t.name,
                    "proto": t.protocol,
                    "cc": t.cc if t.protocol == "tcp" else None,
                    "port": port,
                    "msg": t.message_bytes,
                    "rate_bps": t.rate,
                    "src_ns": src.netns,
                    "dst_ns": dst.netns,
                    "src_ip": src.ipv4,
                    "dst_ip": dst.ipv4,
                    "start": t.schedule.start,
                    "stop": t.schedule.stop,
                    "on": t.schedule.on,
                    "off": t.schedule.off,
                    "port_name": t.port,
                    "rx_port_name": t.rx_port,
                }  # fmt: skip
            )
            fid += 1
        groups.append(group)
    return groups


def ts_port(fid: int) -> int:
    return 5201 + fid


def default_cores() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[1:] or cpus


@dataclass
class _Worker:
    proc: subprocess.Popen
    flows: list[dict]
    core: int | None
    reports: queue.Queue = field(default_factory=queue.Queue)


class TransportRun:
    """The workers of one run. ``start`` blocks until every flow is connected."""

    def __init__(self, groups: list[list[dict]], *, duration: float, interval: float,
                 cores: list[int] | None = None, drain: float = 10.0) -> None:  # fmt: skip
        self.groups = groups
        self.duration = duration
        self.interval = interval
        self.drain = drain
        self.cores = cores or default_cores()
        self.workers: list[_Worker] = []
        self.specs = {f["id"]: f for g in groups for f in g}
        self._prev: dict[int, dict] = {}
        self._rtts: dict[int, list[float]] = {i: [] for i in self.specs}
        self._t_prev = 0.0
        self.finals: dict[int, dict] = {}
        self.t_end = 0.0
        self.errors: list[str] = []

    # -- workers
    def start(self) -> None:
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for i, flows in enumerate(self.groups):
            core = self.cores[i % len(self.cores)] if self.cores else None
            proc = subprocess.Popen(  # noqa: S603 - fixed argv
                [sys.executable, "-m", "tgen_tui.worker.transport_flow"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            )  # fmt: skip
            w = _Worker(proc, flows, core)
            plan = {"core": core, "interval": self.interval, "duration": self.duration,
                    "drain": self.drain, "flows": flows}  # fmt: skip
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(plan) + "\n")
            proc.stdin.flush()
            threading.Thread(target=_pump, args=(w,), daemon=True).start()
            self.workers.append(w)
        for w in self.workers:
            msg = _get(w, READY_TIMEOUT_S)
            if msg is None or "ready" not in msg:
                self.kill()
                why = (msg or {}).get("error", "no answer")
                names = ", ".join(f["name"] for f in w.flows)
                raise EnvironmentProblem(
                    f"transport flows {names}: the worker could not connect ({why}); is the "
                    "lab up with its transport hosts (tgen lab up), and do hosts: match it?"
                )
        t0 = time.monotonic() + 0.2
        for w in self.workers:
            _send(w, f"go {t0!r}")

    def stop(self) -> None:
        for w in self.workers:
            _send(w, "stop")

    def kill(self) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.kill()
            w.proc.wait()

    def plan_text(self) -> list[str]:
        lines = [
            f"transport worker {i} on core {w.core}: "
            + ", ".join(
                f"{f['name']} ({f['proto']}{'/' + f['cc'] if f['cc'] else ''})" for f in w.flows
            )
            for i, w in enumerate(self.workers)
        ]
        cores = {w.core for w in self.workers}
        if len(self.workers) > len(cores):
            lines.append(
                f"note: {len(self.workers)} transport workers share {len(cores)} core(s) "
                f"({', '.join(str(c) for c in sorted(cores, key=str))}); --cores gives more"
            )
        return lines

    # -- reports
    def next_snapshot(self) -> dict | None:
        """The next interval's snapshot (blocks), or None once every worker sent its final."""
        msgs = []
        for w in self.workers:
            m = _get(w, self.duration + self.drain + 30)
            if m is None:
                self.errors.append(f"worker pid {w.proc.pid} ended without a final report")
                m = {"final": True, "t": self._t_prev, "flows": []}
            if m.get("error"):
                self.errors.append(str(m["error"]))
            msgs.append(m)
        finals = [m for m in msgs if m.get("final")]
        if finals:
            for w, m in zip(self.workers, msgs, strict=True):
                if not m.get("final"):  # drain the laggards to their final
                    while m is not None and not m.get("final"):
                        m = _get(w, self.drain + 10)
                for f in (m or {}).get("flows", []):
                    self.finals[f["id"]] = f
            self.t_end = max(m.get("t", 0.0) for m in finals)
            return None
        t = max(m["t"] for m in msgs)
        return self._snapshot(t, [f for m in msgs for f in m["flows"]])

    def _snapshot(self, t: float, reports: list[dict]) -> dict:
        dt = t - self._t_prev
        flows = {}
        for r in reports:
            spec = self.specs[r["id"]]
            fig = ts.interval_figures(self._prev.get(r["id"]), r, dt)
            sched = (spec["start"], spec["stop"], spec["on"], spec["off"])
            fig["on"] = is_on(max(0.0, t - dt / 2), *sched)  # scheduled on mid-interval
            if "rtt_ms" in fig and fig["goodput_bps"] > 0:
                self._rtts[r["id"]].append(fig["rtt_ms"])
            flows[spec["name"]] = fig
            self._prev[r["id"]] = r
        self._t_prev = t
        tcp = [f for f in flows.values() if "rtt_ms" in f] or list(flows.values())
        # Jain over the TCP flows scheduled on in this interval: a starved flow counts
        # (with 0), one that is off by its schedule does not
        active = [f["goodput_bps"] for f in tcp if f.get("on", True)]
        return {
            "t": round(t, 3),
            "kind": "transport",
            "flows": flows,
            "fairness_jain": ts.jain(active),
        }

    def summary(self, run_s: float) -> dict:
        """``transport`` of the result: per flow figures, Jain's index, Mathis for Reno."""
        streams = {}
        for fid, spec in self.specs.items():
            final = self.finals.get(fid) or self._prev.get(fid) or {}
            s = ts.flow_summary(spec, final, self._rtts[fid], run_s)
            s["port"], s["rx_port"] = spec["port_name"], spec["rx_port_name"]
            streams[spec["name"]] = s
        return {
            "streams": streams,
            "metrics": ts.run_metrics(streams) if streams else {},
            "workers": [
                {"pid": w.proc.pid, "core": w.core, "flows": [f["name"] for f in w.flows]}
                for w in self.workers
            ],  # fmt: skip
        }


def result_doc(prof, profile_path: str | None, run: TransportRun, tr: dict, run_s: float,
               started_at: str, signal_name: str | None = None) -> dict:  # fmt: skip
    """The run's result document (``tgen run --json``; stored like a raw-frame run's)."""
    from tgen_tui.engine.result import environment
    from tgen_tui.packets.compile import profile_hash

    return {
        "tool": "tgen-tui",
        "kind": "transport",
        "profile": prof.name,
        "profile_path": profile_path,
        "profile_hash": profile_hash(prof),
        "seed": prof.seed,
        "duration_s": run_s,
        "partial": signal_name is not None,
        "passed": not run.errors,
        "started_at": started_at,
        "environment": environment(),
        "transport": tr,
        "metrics": tr["metrics"],
        "warnings": list(run.errors),
        **({"signal": signal_name} if signal_name else {}),
    }


def _pump(w: _Worker) -> None:
    assert w.proc.stdout is not None
    for line in w.proc.stdout:
        try:
            w.reports.put(json.loads(line))
        except ValueError:
            continue
    w.reports.put(None)


def _get(w: _Worker, timeout: float) -> dict | None:
    try:
        return w.reports.get(timeout=timeout)
    except queue.Empty:
        return None


def _send(w: _Worker, text: str) -> None:
    try:
        assert w.proc.stdin is not None
        w.proc.stdin.write(text + "\n")
        w.proc.stdin.flush()
    except (OSError, ValueError):
        pass


def refuse_options(*given: tuple[str, object]) -> None:
    """One line, exit 2, for options a transport run cannot honour (accepted and ignored
    would surprise)."""
    refused = [opt for opt, value in given if value]
    if refused:
        raise BadInput(
            f"{', '.join(refused)}: not supported for transport streams (kernel TCP/UDP "
            "sockets); give the rate, flows and schedule in the profile's transport: entries"
        )
