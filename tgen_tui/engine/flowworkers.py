"""The flow workers' lines of the Workers screen (core, port, flows, CPU)."""

from __future__ import annotations

from tgen_tui.engine.flowsample import FlowCtx
from tgen_tui.engine.sampleinputs import LiveState, Readings, SampleContext, WorkerLive
from tgen_tui.engine.snapshot import WorkerStats


def flow_worker_stats(ctx: SampleContext, rd: Readings, live: LiveState) -> list[WorkerStats]:
    """The flow workers as the Workers screen lists them: core, port, flows, CPU."""
    by_worker: dict[int, list[FlowCtx]] = {}
    for c in ctx.flows:
        by_worker.setdefault(c.worker, []).append(c)
    out = []
    for wid, fs in by_worker.items():
        wl = live.workers.get(wid, WorkerLive(None, False))
        core = fs[0].core
        out.append(
            WorkerStats(
                id=wid,
                core=core,
                pid=wl.pid,
                ports=(fs[0].port,),
                streams=tuple(f.name for f in fs),
                alive=wl.alive,
                core_cpu_pct=rd.cores[core] if core < len(rd.cores) else 0.0,
                proc_cpu_pct=wl.proc_cpu_pct if wl.alive else 0.0,
                exit_reason=wl.exit_reason,
                kind="flows",
            )
        )
    return out


__all__ = ["flow_worker_stats"]
