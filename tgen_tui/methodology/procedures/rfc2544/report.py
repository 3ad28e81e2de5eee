"""The RFC 2544 / RFC 8219 procedures' part of the report: the searches and their summary
per frame size (throughput), the loss curves, the latency and PDV trials; their metrics
and their trials for the results store."""

from __future__ import annotations

from tgen_tui.methodology.kit.documents import search_trials, trial_doc
from tgen_tui.methodology.kit.search import RepeatedSearch
from tgen_tui.methodology.kit.state import RunState
from tgen_tui.methodology.kit.stats import summary


def throughput_report(state: RunState, partial: bool) -> dict:
    per, allsearch = [], []
    for fs in state.body.get("frame_sizes", []):
        rec: RepeatedSearch = fs["record"]
        per.append(
            {
                "frame_size": fs["frame_size"],
                "max_rate": fs["max_rate"],
                "streams": fs["streams"],
                "summary": rec.summary(),
            }
            | rec.to_dict()
        )
        allsearch += [{"frame_size": fs["frame_size"]} | s.to_dict() for s in rec.searches]
    if not per:
        return {}
    return {
        "searches": allsearch,
        "summary": {"frame_size": per[0]["frame_size"]} | per[0]["summary"],
        "by_frame_size": per,
    }


def throughput_metrics(doc: dict) -> dict:
    per = doc.get("by_frame_size") or []
    return {"throughput_fps": per[0]["summary"].get("median")} if per else {}


def throughput_trials(state: RunState) -> list[dict]:
    out: list[dict] = []
    for fs in state.body.get("frame_sizes", []):
        out += search_trials(fs["record"], "throughput_fps", frame_size=fs["frame_size"])
    return out


def loss_report(state: RunState, partial: bool) -> dict:
    fss = state.body.get("frame_sizes", [])
    if not fss:
        return {}
    return {
        "frame_loss": [
            {
                "frame_size": fs["frame_size"],
                "max_rate": fs["max_rate"],
                "points": [pt.to_dict() for pt in fs["points"]],
            }
            for fs in fss
        ]
    }


def loss_trials(state: RunState) -> list[dict]:
    return [
        trial_doc(pt.trial, frame_size=fs["frame_size"], load_pct=pt.load_pct)
        for fs in state.body.get("frame_sizes", [])
        for pt in fs["points"]
    ]


def latency_report(state: RunState, partial: bool, figures: tuple[str, ...]) -> dict:
    """Latency (``figures`` tl_ns, wcl_ns) or PDV (pdv_ns): trials and their summary."""
    per = []
    for fs in state.body.get("frame_sizes", []):
        figs = [tr["figures"] for tr in fs["trials"]]
        per.append(
            {
                "frame_size": fs["frame_size"],
                "rate_pps": fs["rate_pps"],
                "delay_s": fs["delay_s"],
                "trials": [
                    {
                        "repeat": tr["repeat"],
                        "figures": tr["figures"],
                        "trial": tr["trial"].to_doc(),
                    }
                    for tr in fs["trials"]
                ],
                "summary": {k: summary([f[k] for f in figs]) for k in figures},
            }
        )
    if not per:
        return {}
    out = {
        "by_frame_size": per,
        "summary": {"frame_size": per[0]["frame_size"]} | per[0]["summary"],
    }
    if state.body.get("throughput_searches"):
        out["throughput_searches"] = [
            {"frame_size": x["frame_size"]} | x["search"].to_dict()
            for x in state.body["throughput_searches"]
        ]
    return out


def latency_metrics(doc: dict) -> dict:
    s = (doc.get("by_frame_size") or [{}])[0].get("summary", {})
    return {k: v.get("median") for k, v in s.items()}


def latency_trials(state: RunState) -> list[dict]:
    return [
        trial_doc(tr["trial"], repeat=tr["repeat"], frame_size=fs["frame_size"])
        for fs in state.body.get("frame_sizes", [])
        for tr in fs["trials"]
    ]
