"""``tgen search``'s tables (the goals, the latency ladder), text lines and the plot of
loss ratio against load with the relevant bounds marked."""

from __future__ import annotations

from tgen_tui.results.plot import chart


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
