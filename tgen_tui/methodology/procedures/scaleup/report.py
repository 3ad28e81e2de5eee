"""The scale-up's report: one report per core count, the rates, their relative scale-up."""

from __future__ import annotations

from tgen_tui.methodology.kit.documents import build_document
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.scaleup.run import Lookup, relative_scaleup


def scaleup_report(state: RunState, partial: bool, *, scaled: Lookup) -> dict:
    """One report per core count (the last one partial when the run was interrupted),
    the rates, their relative scale-up and the caveat of a small machine."""
    b = state.body
    inner = scaled(state.test)
    done = b.get("runs", [])
    runs = [
        {
            "cores": r["cores"],
            "core_list": r["core_list"],
            "report": build_document(r["state"], inner, partial=partial and i == len(done) - 1),
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
        "unit": inner.unit,
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
