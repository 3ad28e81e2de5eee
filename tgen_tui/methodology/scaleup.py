"""Scale-up over cores: one run of a test per core count k, with the tester's workers
pinned to the last k cores, and ``relative scale-up = rate_k / (k × rate_1)``.

The state's test is ``scaleup-TEST``; its body holds ``counts`` (the core counts),
``avail`` (this machine's CPUs) and, as they run, ``runs``: one state per core count.
"""

from __future__ import annotations

import dataclasses
import time

from tgen_tui.methodology.procedures import relative_scaleup
from tgen_tui.methodology.run import RunState


async def run_scaleup(state: RunState) -> None:
    from tgen_tui.methodology.registry import scaled

    test = state.test.split("-", 1)[1]
    inner = scaled(state.test)
    b = state.body
    for k in b["counts"]:
        cores = b["avail"][-k:]
        # over lanes: each port gets k sender lanes on the k cores (one port over its cores)
        lanes = k if b.get("over") == "lanes" else state.params.lanes
        how = f", {k} lane(s) per port" if b.get("over") == "lanes" else ""
        state.note(f"scaleup: {test} with {k} core(s): {cores}{how}")
        if state.progress:
            state.progress.restart()
        sub = RunState(
            test=test,
            params=dataclasses.replace(state.params, cores=cores, lanes=lanes),
            progress=state.progress,
        )
        b.setdefault("runs", []).append({"cores": k, "core_list": list(cores), "state": sub})
        await inner.run(sub)
        sub.finished = time.time()


def scaleup_report(state: RunState, partial: bool) -> dict:
    """One report per core count (the last one partial when the run was interrupted),
    the rates, their relative scale-up and the caveat of a small machine."""
    from tgen_tui.methodology.documents import build_document
    from tgen_tui.methodology.registry import scaled

    b = state.body
    done = b.get("runs", [])
    runs = [
        {
            "cores": r["cores"],
            "core_list": r["core_list"],
            "report": build_document(r["state"], partial=partial and i == len(done) - 1),
        }
        for i, r in enumerate(done)
    ]
    sm = {r["cores"]: r["report"].get("summary", {}) for r in runs}
    med = {k: s.get("median") for k, s in sm.items()}
    rel = relative_scaleup(med)
    first = runs[0]["report"] if runs else {}
    avail = b.get("avail", [])
    return {
        "test": state.test,
        "partial": partial,
        "quick": state.params.quick,
        "unit": scaled(state.test).unit,
        "scaled": "tester worker cores (pinned to the last k cores)"
        + (", with k sender lanes per port" if b.get("over") == "lanes" else ""),
        "cores": b.get("counts", []),
        "rows": [
            {
                "cores": r["cores"],
                "core_list": r["core_list"],
                "median": med[r["cores"]],
                "min": sm[r["cores"]].get("min"),
                "max": sm[r["cores"]].get("max"),
                "relative_scaleup": rel.get(r["cores"]),
            }
            for r in runs
        ],
        "runs": runs,
        "seed": first.get("seed"),
        "dut": first.get("dut"),
        "profile_path": state.params.profile,
        "profile_hash": first.get("profile_hash"),
        "warnings": [
            f"this machine has {len(avail)} CPUs: the tester's workers, the kernel's veth "
            "receive work and the DUT namespace share them, so scale-up here measures "
            "contention, not the DUT"
        ]
        if len(avail) <= 2
        else [],
    }


def scaleup_metrics(doc: dict) -> dict:
    return {f"rate_{r['cores']}c": r["median"] for r in doc.get("rows", [])}
