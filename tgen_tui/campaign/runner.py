"""Running a campaign: point by point, each one a run owner's run, each stored when it ends.

The campaign's folder (``NAME.campaign/`` next to the file, or ``--out``) holds:

- ``state.jsonl``: a header (the campaign, the hash of its text, the seed), then one line
  per finished point (its id, axes, repeat, status, headline metrics, the result file),
  written and fsync'ed when the point ends: a crash, a SIGKILL or a reboot loses at most
  the point that was running, and ``--resume`` runs only the points that have no line;
- ``points/ID.yaml``: the profile of each point (the base profile with the point's axes);
- ``results/ID.json``: each point's result document (a run's or a procedure's report).

Each point's result also goes to the results store under the campaign's build and DUT
labels, with the campaign and the point's axes as parameters (``tgen results``).

Lab axes are applied with the lab's own ``set_dut`` before the point (only when they
change), and the lab's settings are put back as they were when the campaign ends.
"""

from __future__ import annotations

import json
import os
import signal as _signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tgen_tui.campaign import apply
from tgen_tui.campaign.points import Point, expand
from tgen_tui.diagnostics import BadInput, EnvironmentProblem, TgenError
from tgen_tui.profiles.campaign import Campaign, campaign_hash

STATE = "state.jsonl"


def out_dir_for(path: Path, out: str | None) -> Path:
    return Path(out) if out else path.with_suffix(".campaign")


# ------------------------------------------------------------------ the state file
@dataclass
class State:
    """``state.jsonl``: its header and the finished points by id."""

    path: Path
    header: dict = field(default_factory=dict)
    done: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> State:
        st = cls(path)
        if not path.exists():
            return st
        for i, line in enumerate(path.read_text().splitlines()):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:  # a line cut by a crash: the point runs again
                continue
            if i == 0 and rec.get("kind") == "header":
                st.header = rec
            elif rec.get("kind") == "point":
                st.done[rec["id"]] = rec
        return st

    def write_header(self, header: dict) -> None:
        self.header = header
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(header) + "\n")

    def append(self, rec: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(rec, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done[rec["id"]] = rec


# ------------------------------------------------------------------ metrics
def run_metrics(doc: dict) -> dict[str, float | None]:
    """A run's headline figures: frames/s received and sent, loss %, worst p99 (µs)."""
    streams = (doc.get("streams") or {}).values()
    dur = float(doc.get("duration_s") or 0) or None
    tx = sum(int(s.get("tx_frames") or 0) for s in streams)
    rx = sum(int(s.get("rx_frames") or 0) for s in streams)
    lost = sum(int(s.get("lost") or 0) for s in streams)
    p99 = [((s.get("latency_ns") or {}).get("p99")) for s in streams]
    p99 = [p for p in p99 if p is not None]
    return {
        "rx_fps": round(rx / dur, 1) if dur else None,
        "tx_fps": round(tx / dur, 1) if dur else None,
        "loss_pct": round(100.0 * lost / tx, 6) if tx else None,
        "p99_us": round(max(p99) / 1000, 2) if p99 else None,
    }


# ------------------------------------------------------------------ one point
class CampaignRunner:
    """One campaign run (see the module docstring)."""

    def __init__(
        self,
        campaign: Campaign,
        text: str,
        path: Path,
        *,
        out: str | None = None,
        resume: bool = False,
        fresh: bool = False,
        db: str | None = None,
        ndjson=None,
        quiet: bool = False,
        stop_after: int | None = None,
    ) -> None:
        self.c = campaign
        self.path = path
        self.base_dir = path.parent
        self.profile_path = (self.base_dir / campaign.profile).resolve()
        if not self.profile_path.is_file():
            raise BadInput(f"{path}: profile: no such file {self.profile_path}")
        from tgen_tui.profiles.loader import load_profile

        self.profile = load_profile(self.profile_path)  # bad input before anything runs
        self.base = apply.load_plain(self.profile_path)
        self.out = out_dir_for(path, out)
        self.hash = campaign_hash(text)
        self.db = db
        self.nd = ndjson
        self.quiet = quiet
        self.stop_after = stop_after
        self.state = State.read(self.out / STATE)
        if self.state.done and not (resume or fresh):
            n = len(self.state.done)
            raise BadInput(
                f"{self.out}: {n} of {campaign.n_points()} points are done: --resume runs "
                "the missing ones, --fresh starts over"
            )
        if resume and self.state.header and self.state.header.get("hash") != self.hash:
            raise BadInput(
                f"{path} changed since the campaign in {self.out} began: --fresh starts over "
                "(or restore the file)"
            )
        if fresh or not self.state.header:
            seed = campaign.seed if campaign.seed is not None else int(time.time()) % 100000
            if fresh and self.out.exists():
                (self.out / STATE).unlink(missing_ok=True)
                self.state = State(self.out / STATE)
            self.seed = seed
        else:
            self.seed = int(self.state.header.get("seed") or 0)
        self.points = expand(campaign, self.seed)
        self.lab_prefix = campaign.lab or self._lab_from_profile()
        self._lab_applied: dict[str, Any] = {}
        self._lab_initial: dict[str, Any] | None = None
        self.signal: str | None = None
        self._check_axes()

    def _lab_from_profile(self) -> str | None:
        ns = self.profile.dut.netns if self.profile.dut else None
        return ns[: -len("-dut")] if ns and ns.endswith("-dut") else None

    def _check_axes(self) -> None:
        if any(k.startswith("lab.") for k in self.c.axes) and not self.lab_prefix:
            raise BadInput(
                f"{self.path}: lab axes need a lab: give lab: PREFIX, or a profile whose "
                "dut.netns is PREFIX-dut"
            )
        for p in self.points[:1] + self.points[-1:]:  # a bad profile.PATH before any run
            doc = apply.point_profile(self.base, p)
            from tgen_tui.profiles.loader import load_profile_text

            load_profile_text(apply.dump_text(doc), f"{self.path} (point {p.label()})")

    # -- progress
    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def _event(self, ev: dict) -> None:
        if self.nd is not None:
            self.nd.write(json.dumps(ev, default=str) + "\n")
            self.nd.flush()

    # -- the DUT
    def _apply_lab(self, point: Point) -> None:
        changes = apply.lab_changes(point)
        todo = {k: v for k, v in changes.items() if self._lab_applied.get(k, object()) != v}
        if not todo:
            return
        from tgen_tui.lab import topology

        if self._lab_initial is None:
            cfg = (topology.status(self.lab_prefix).get("config") or {}) if self.lab_prefix else {}
            self._lab_initial = {
                k: cfg.get(k) for k in {k[4:] for k in self.c.axes if k.startswith("lab.")}
            }
        topology.set_dut(self.lab_prefix, **todo)
        self._lab_applied.update(todo)

    def restore_lab(self) -> None:
        if self._lab_initial and self.lab_prefix:
            from tgen_tui.lab import topology

            back = {k: v for k, v in self._lab_initial.items() if self._lab_applied.get(k) != v}
            if back:
                try:
                    topology.set_dut(self.lab_prefix, **back)
                    self._say(f"tgen: lab {self.lab_prefix}: settings put back: {back}")
                except TgenError as e:
                    self._say(f"tgen: lab {self.lab_prefix}: could not put its settings back: {e}")

    def _dut_commands(self, point: Point) -> list[dict]:
        cmds = apply.dut_commands(point, self.c.dut_commands)
        if not cmds:
            return []
        from tgen_tui.dut.channel import DutChannel

        ch = DutChannel.of(self.profile.dut.netns if self.profile.dut else None,
                           self.profile.dut.ssh if self.profile.dut else None)  # fmt: skip
        if ch is None:
            raise BadInput("dut axes need a DUT: dut.netns or dut.ssh in the profile")
        out = []
        for cmd in cmds:
            r = ch.run(cmd, timeout=120)
            if r.returncode != 0 or r.timed_out:
                raise EnvironmentProblem(
                    f"DUT command `{cmd}` failed (exit {r.returncode}): {r.stderr.strip()[:200]}"
                )
            out.append({"command": cmd, "stdout": r.stdout[-2000:]})
        return out

    # -- the procedures
    def _store_opts(self):
        from tgen_tui.results.record import StoreOptions

        return StoreOptions(db=self.db, dut=self.c.dut, build=self.c.build, quiet=True)

    def _params(self, point: Point) -> dict:
        return {"campaign": self.c.name, "point": point.id, "repeat": point.repeat, **point.values}

    def _run_point(self, point: Point, profile: Path) -> tuple[dict, dict]:
        """(result document, headline metrics) of one point."""
        ra = apply.run_axes(point)
        if self.c.procedure == "run":
            return self._run(point, profile, ra)
        return self._method(point, profile, ra)

    def _run(self, point: Point, profile: Path, ra: dict) -> tuple[dict, dict]:
        from tgen_tui.profiles.units import parse_duration
        from tgen_tui.session.headless import drive
        from tgen_tui.session.options import RunOptions
        from tgen_tui.session.owner import RunOwner

        o = self.c.options
        opts = RunOptions(
            profile=str(profile),
            duration_s=parse_duration(ra.get("duration", self.c.duration)),
            lanes=ra.get("lanes", o.get("lanes")),
            pacing=ra.get("pacing", o.get("pacing")),
            rate_scale=float(ra.get("rate_scale", o.get("rate_scale", 1.0))),
            drain_s=parse_duration(o.get("drain", "500ms")),
            quiet=True,
            store=self._store_opts(),
            test="run",
            front_end=f"tgen campaign {self.c.name}",
            extra_params=self._params(point),
        )
        owner = RunOwner(opts)
        owner.check_environment()
        owner.run(lambda ow: drive(ow, _Quiet()))
        self._stopped(owner.signal)
        result = owner.result()
        if result is None:
            raise EnvironmentProblem("the run ended before its engine opened")
        owner.store(result)
        doc = result.to_doc()
        return doc, run_metrics(doc)

    def _method(self, point: Point, profile: Path, ra: dict) -> tuple[dict, dict]:
        from tgen_tui.methodology.kit.params import Params
        from tgen_tui.methodology.kit.progress import Progress
        from tgen_tui.methodology.kit.state import RunState
        from tgen_tui.methodology.registry import build_report, flat_trials, procedure
        from tgen_tui.profiles.units import parse_count, parse_duration
        from tgen_tui.results.record import store_result
        from tgen_tui.session.options import RunOptions
        from tgen_tui.session.owner import RunOwner

        o = self.c.options
        test = {"rfc2544.throughput": "rfc2544-throughput", "search": "search",
                "rfc9693.cps": "rfc9693-cps"}[self.c.procedure]  # fmt: skip
        quick = bool(o.get("quick"))
        p = Params(
            profile=str(profile),
            duration_s=parse_duration(ra.get("duration", self.c.duration)),
            timeout_s=parse_duration(o.get("timeout", "500ms" if quick else "2s")),
            settle_s=parse_duration(o.get("settle", "500ms" if quick else "2s")),
            repeats=int(o.get("repeats", 1)),
            max_rate=float(parse_count(o["max_rate"])) if "max_rate" in o else None,
            error=float(parse_count(o.get("error", 1000))),
            quick=quick,
            pacing=ra.get("pacing", o.get("pacing")),
            lanes=ra.get("lanes"),
        )
        if "n" in o:
            p.n = int(parse_count(o["n"]))
        opts = RunOptions(
            profile=str(profile),
            pacing=p.pacing,
            tcp_handshake=False,
            quiet=True,
            store=self._store_opts(),
            test=test,
            front_end=f"tgen campaign {self.c.name}",
        )
        owner = RunOwner(opts)
        owner.check_environment()
        p.owner, p.hooks = owner, owner.hooks
        state = RunState(test=test, params=p)
        if test == "search":
            from tgen_tui.methodology.procedures.mlr.goals import PRESETS, goals_for
            from tgen_tui.methodology.procedures.mlr.goals import quick as quick_goals
            from tgen_tui.methodology.procedures.mlr.run import SearchConfig

            goals = goals_for(None, None, None)
            qt = ""
            if quick:
                goals, qt = quick_goals(goals)
            state.body["config"] = SearchConfig(goals=goals, preset="csit",
                                                preset_text=PRESETS["csit"][1], quick_text=qt)  # fmt: skip
        state.progress = Progress(1, ndjson=None, quiet=True)
        owner.run(lambda _: procedure(test).run(state))
        self._stopped(owner.signal)
        report = build_report(state, partial=False, signal_name=None)
        doc = report.to_doc()
        params = {k: v for k, v in (doc.get("parameters") or {}).items() if k != "profile"}
        store_result(doc, self._store_opts(), test=doc["test"],
                     params={**params, **self._params(point)}, trials=flat_trials(state))  # fmt: skip
        return doc, dict(procedure(test).metrics(report))

    def _stopped(self, sig: str | None) -> None:
        if sig:
            self.signal = sig
            raise KeyboardInterrupt(sig)

    # -- the whole
    def run(self) -> int:
        """Every missing point; the exit code (0 all ok, 1 a point failed, 130/143 stopped)."""
        if not self.state.header:
            self.state.write_header(
                {"kind": "header", "campaign": self.c.name, "hash": self.hash, "seed": self.seed,
                 "points": len(self.points), "file": str(self.path), "created": time.time()}
            )  # fmt: skip
        todo = [p for p in self.points if p.id not in self.state.done]
        done_before = len(self.points) - len(todo)
        if done_before:
            self._say(f"tgen: campaign {self.c.name}: {done_before} of {len(self.points)} points "
                      f"done already; running the {len(todo)} missing")  # fmt: skip
        failed = 0
        t0 = time.monotonic()
        try:
            for k, point in enumerate(todo, 1):
                if self.stop_after is not None and k > self.stop_after:
                    break
                n = done_before + k
                eta = ""
                if k > 1:
                    left = (time.monotonic() - t0) / (k - 1) * (len(todo) - k + 1)
                    eta = f", about {left:.0f} s left"
                self._say(
                    f"tgen: campaign {self.c.name} [{n}/{len(self.points)}] {point.label()}{eta}"
                )
                self._event({"event": "point_start", "n": n, "of": len(self.points),
                             "id": point.id, "axes": point.values, "repeat": point.repeat})  # fmt: skip
                rec = self._one(point)
                failed += rec["status"] != "ok"
                self._event({"event": "point_end", **rec})
                if rec["status"] != "ok":
                    self._say(f"tgen:   failed: {rec['reason']}")
                    if self.c.on_failure == "stop":
                        break
                else:
                    m = ", ".join(f"{k2} {v}" for k2, v in rec["metrics"].items() if v is not None)
                    self._say(f"tgen:   {m}")
        except KeyboardInterrupt:
            self._say(f"tgen: campaign {self.c.name} stopped ({self.signal or 'SIGINT'}); "
                      f"{len(self.state.done)} of {len(self.points)} points done: --resume goes on")  # fmt: skip
            return 143 if self.signal == "SIGTERM" else 130
        finally:
            self.restore_lab()
        left = len([p for p in self.points if p.id not in self.state.done])
        self._say(f"tgen: campaign {self.c.name}: {len(self.points) - left} of {len(self.points)} "
                  f"points done, {failed} failed; the folder: {self.out}")  # fmt: skip
        return 1 if failed else 0

    def _one(self, point: Point) -> dict:
        t = time.monotonic()
        profile = apply.write_profile(apply.point_profile(self.base, point),
                                      self.out / "points" / f"{point.id}.yaml")  # fmt: skip
        rec: dict[str, Any] = {"kind": "point", "id": point.id, "key": point.key,
                               "axes": point.values, "repeat": point.repeat}  # fmt: skip
        try:
            self._apply_lab(point)
            dut_out = self._dut_commands(point)
            doc, metrics = self._run_point(point, profile)
            res = self.out / "results" / f"{point.id}.json"
            res.parent.mkdir(parents=True, exist_ok=True)
            res.write_text(json.dumps(doc, indent=1, default=str))
            rec.update(status="ok", metrics=metrics, result=str(res.relative_to(self.out)),
                       dut_commands=dut_out or None)  # fmt: skip
        except KeyboardInterrupt:
            raise
        except TgenError as e:
            rec.update(status="failed", reason=str(e).splitlines()[0], metrics={})
        rec["seconds"] = round(time.monotonic() - t, 2)
        self.state.append(rec)
        return rec


class _Quiet:
    """A headless run's outputs, silenced (the campaign prints one line per point)."""

    def plan(self, lines: list[str]) -> None:
        pass

    def snapshot(self, snap: Any) -> None:
        pass

    def event(self, ev: Any) -> None:
        pass


def install_term_as_interrupt() -> None:
    """SIGTERM stops a campaign between points as Ctrl-C does (the run owner handles the
    signal inside a point)."""
    _signal.signal(_signal.SIGTERM, _signal.default_int_handler)


__all__ = ["CampaignRunner", "State", "out_dir_for", "run_metrics"]
