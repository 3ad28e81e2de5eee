"""The scale-up's report (ScaleupReport): one report per core count, the rates, and
their relative scale-up."""

from __future__ import annotations

from typing import Any

from tgen_tui.methodology.kit.documents import build_report
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.procedures.scaleup.run import Lookup, relative_scaleup
from tgen_tui.results.models import Report, ScaleupReport, ScaleupRow, ScaleupRun, Summary


def scaleup_report(state: RunState, partial: bool, *, scaled: Lookup) -> dict[str, Any]:
    """One report per core count (the last one partial when the run was interrupted),
    the rates, their relative scale-up and the caveat of a small machine."""
    b = state.body
    inner = scaled(state.test)
    done = b.get("runs", [])
    runs = [
        ScaleupRun(
            cores=r["cores"],
            core_list=r["core_list"],
            report=_inner(build_report(r["state"], inner, partial=partial and i == len(done) - 1)),
        )
        for i, r in enumerate(done)
    ]
    sm: dict[int, Summary] = {
        r.cores: getattr(r.report, "summary", None) or Summary() for r in runs
    }
    rel = relative_scaleup({k: s.median for k, s in sm.items()})
    first = runs[0].report if runs else None
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
            ScaleupRow(
                cores=r.cores,
                core_list=r.core_list,
                median=sm[r.cores].median,
                min=sm[r.cores].min,
                max=sm[r.cores].max,
                relative_scaleup=rel.get(r.cores),
            )
            for r in runs
        ],
        "runs": runs,
        "seed": first.seed if first else None,
        "dut": first.dut if first else None,
        "profile_path": state.params.profile,
        "profile_hash": first.profile_hash if first else None,
        "warnings": [
            f"this machine has {len(avail)} CPUs: the tester's workers, the kernel's veth "
            "receive work and the DUT namespace share them, so scale-up here measures "
            "contention, not the DUT"
        ]
        if len(avail) <= 2
        else [],
    }


def _inner(report: Report | ScaleupReport) -> Report:
    assert isinstance(report, Report), "a scale-up runs a test with the common fields"
    return report


def scaleup_metrics(report: ScaleupReport) -> dict[str, float | None]:
    return {f"rate_{r.cores}c": r.median for r in report.rows}
