"""The report of ``tgen search``: its part of the JSON document (``goals[]`` with each
goal's bounds, conditional throughput and regularity; every trial with intended, offered
and received per direction; the latency ladder), metrics for the results store, tables,
text lines and the plot of loss ratio against load with the bounds marked."""

from __future__ import annotations

from tgen_tui.methodology.mlr.search import MlrResult
from tgen_tui.methodology.run import RunState
from tgen_tui.methodology.search import TrialResult
from tgen_tui.results.plot import chart


def _trial(t: TrialResult, index: int) -> dict:
    d = t.to_dict()
    d["extra"] = {k: v for k, v in d.get("extra", {}).items() if k != "streams"}
    d["loss_ratio"] = t.extra.get("loss_ratio")
    d["directions"] = t.extra.get("directions", {})
    return d | {"index": index}


def search_report(state: RunState, partial: bool) -> dict:
    b = state.body
    res: MlrResult | None = b.get("mlr")
    cfg = b.get("config")
    doc: dict = {
        "preset": getattr(cfg, "preset", None),
        "preset_definition": getattr(cfg, "preset_text", ""),
        "frame_size": b.get("frame_size"),
        "stream_names": b.get("streams", []),
        "load_unit": "frames/s per interface (each direction)",
        "aggregate_factor": b.get("aggregate_factor", 1),
        "max_load_source": b.get("max_load_source"),
        "dut_drops": getattr(cfg, "dut_drops", {}) or {},
    }
    if res is None:
        return doc | {"goals": [g.to_dict() for g in getattr(cfg, "goals", [])], "trials": []}
    mlr = res.to_dict()
    doc |= {k: v for k, v in mlr.items() if k != "goals"}
    doc["goals"] = mlr["goals"] or [
        {"name": g.name, "goal": g.to_dict(), "regular": False, "irregular": "search incomplete"}
        for g in res.goals
    ]
    doc["trials"] = [_trial(t, i) for i, t in enumerate(res.trials)]
    doc["ladder"] = [
        {k: v for k, v in row.items() if k != "trial"} | {"trial": _trial(row["trial"], i)}
        for i, row in enumerate(b.get("ladder", []))
    ]
    return doc


def search_metrics(doc: dict) -> dict:
    out: dict = {}
    for g in doc.get("goals", []):
        n = g["name"]
        out[f"{n}_pps"] = g.get("conditional_throughput_pps")
        out[f"{n}_rlb_pps"] = g.get("relevant_lower_bound_pps")
        out[f"{n}_rub_pps"] = g.get("relevant_upper_bound_pps")
    out["trials"] = doc.get("n_trials")
    return out


def search_trials(state: RunState) -> list[dict]:
    res: MlrResult | None = state.body.get("mlr")
    out = [_trial(t, i) for i, t in enumerate(res.trials)] if res else []
    for row in state.body.get("ladder", []):
        out.append(_trial(row["trial"], len(out)) | {"ladder_step": row["step"]})
    return out


def _n(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def search_tables(doc: dict) -> list[tuple]:
    goals = doc.get("goals", [])
    out = [
        (
            f"RFC 9971 search goals ({doc.get('load_unit')}; aggregate x{doc.get('aggregate_factor')})",
            "goal",
            [g["name"] for g in goals],
            [
                ("loss %", [f"{g['goal']['loss_pct']:g}" for g in goals]),
                ("exceed", [f"{g['goal']['exceed_ratio']:g}" for g in goals]),
                ("trial s", [f"{g['goal']['final_trial_duration_s']:g}" for g in goals]),
                ("sum s", [f"{g['goal']['duration_sum_s']:g}" for g in goals]),
                ("width %", [f"{100 * g['goal']['width']:g}" for g in goals]),
                ("RLB fps", [_n(g.get("relevant_lower_bound_pps")) for g in goals]),
                ("RUB fps", [_n(g.get("relevant_upper_bound_pps")) for g in goals]),
                ("cond. throughput fps", [_n(g.get("conditional_throughput_pps")) for g in goals]),
                (
                    "result",
                    [
                        "regular" if g.get("regular") else f"IRREGULAR: {g.get('irregular')}"
                        for g in goals
                    ],
                ),
            ],
        )
    ]
    ladder = doc.get("ladder") or []
    if ladder:
        dirs = sorted({d for r in ladder for d in r["latency"]})
        cols = []
        for d in dirs:
            for k in ("p50", "p99", "p999", "p9999", "max"):
                cols.append(
                    (
                        f"{d} {k} us",
                        [_us((r["latency"].get(d) or {}).get(f"{k}_ns")) for r in ladder],
                    )
                )
        out.append(
            (
                "Latency ladder (worst stream per direction)",
                "step",
                [f"{r['goal'] or ''} {r['step']}".strip() for r in ladder],
                [("rate fps", [_n(r["rate_pps"]) for r in ladder])] + cols,
            )
        )
    return out


def _us(ns) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"


def search_lines(doc: dict) -> list[str]:
    out = [
        f"max load {_n(doc.get('max_load_pps'))} fps ({doc.get('max_load_source')}); min load "
        f"{_n(doc.get('min_load_pps'))} fps; {doc.get('n_trials', 0)} trials, "
        f"{doc.get('trial_seconds', 0)} s of traffic; search {doc.get('status')}"
    ]
    if doc.get("preset"):
        out.append(f"preset {doc['preset']}: {doc.get('preset_definition')}")
    for g in doc.get("goals", []):
        if not g.get("regular"):
            out.append(f"goal {g['name']}: IRREGULAR result: {g.get('irregular')}")
    srcs = sorted(
        {v.get("source") for r in doc.get("ladder") or [] for v in r["latency"].values()}
        - {"", None}
    )
    if srcs:
        out.append(f"ladder latency source: {', '.join(srcs)}")
    return out


def search_plots(doc: dict, path) -> list[str]:
    trials = [t for t in doc.get("trials", []) if t.get("kind") != "warmup"]
    if not trials:
        return []
    x = [t["rate_pps"] for t in trials]
    y = [100 * (t.get("loss_ratio") or 0.0) for t in trials]
    top = max(y + [0.1])
    series = [("trial loss ratio (%)", x, y)]
    for g in doc.get("goals", []):
        for key, tag in (("relevant_lower_bound_pps", "RLB"), ("relevant_upper_bound_pps", "RUB")):
            v = g.get(key)
            if v is not None:
                series.append((f"{g['name']} {tag}", [v, v], [0.0, top]))
    return [
        chart(
            "Trial loss ratio against load (relevant bounds marked)",
            "load (fps per interface)",
            "loss ratio (%)",
            series,
            kind="scatter",
            path=path("loss_ratio_vs_load"),
        )
    ]
