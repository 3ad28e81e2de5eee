"""Recording a run in the results store: the one entry point for every verb.

``tgen run``, the console and the methodology verbs call :func:`store_result` with their
typed :class:`StoreOptions` (or :func:`record_run`) once they have a result document.
Storing never makes a run fail: a database that cannot be written costs one warning line
on stderr and the run keeps its exit code.

Contract for callers:
  result  the result document (``tgen run --json`` shape; see tgen_tui.engine.result).
          Optional extras: ``result["metrics"]`` = {name: number} headline figures of the
          verb (e.g. throughput_fps), ``result["started_at"]`` = ISO 8601 start time.
  params  the test parameters (JSON-serialisable); default: none.
  trials  the raw trials, each a JSON-serialisable dict. A trial with a ``"repeat"`` key
          (its index) is a repeat of the same measurement: its numeric values, top-level
          or under ``"metrics"``, give the spread that ``compare`` and ``check`` use.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from tgen_tui.results import metrics as M
from tgen_tui.results import models, store

UNKNOWN = "unknown"
NEARLY_FULL = 1 << 20  # bytes free under which a failed write is put down to the disk


def add_db_option(parser) -> None:
    """--db FILE: the results database (recording verbs and tgen results)."""
    parser.add_argument(
        "--db",
        metavar="FILE",
        help="results database (default: $TGEN_DB, else $XDG_DATA_HOME/tgen/results.db, "
        "else ~/.local/share/tgen/results.db)",
    )


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """--db, --no-store, --dut and --build, for every verb that produces a result."""
    g = parser.add_argument_group(
        "results store",
        "every run is recorded in a SQLite database (see: tgen results --help)",
    )
    add_db_option(g)
    g.add_argument("--no-store", action="store_true", help="do not record this run")
    g.add_argument(
        "--dut",
        metavar="NAME",
        help="DUT label the run is filed under (default: the lab DUT's kernel release, "
        "else 'unknown')",
    )
    g.add_argument(
        "--build",
        metavar="ID",
        help="DUT build or release, e.g. b2 or v2.3 (default: the lab DUT's kernel "
        "version string, else 'unknown')",
    )


@dataclass(frozen=True)
class StoreOptions:
    """Where and how a run is filed: ``--db``, ``--no-store``, ``--dut``, ``--build``;
    ``quiet``: no "stored as run N" line."""

    db: str | None = None
    no_store: bool = False
    dut: str | None = None
    build: str | None = None
    quiet: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> StoreOptions:
        """The options :func:`add_store_options` declared (and --quiet), as parsed."""
        return cls(
            db=getattr(args, "db", None),
            no_store=bool(getattr(args, "no_store", False)),
            dut=getattr(args, "dut", None),
            build=getattr(args, "build", None),
            quiet=bool(getattr(args, "quiet", False)),
        )


def store_result(
    result: dict | BaseModel,
    opts: StoreOptions,
    *,
    test: str = "run",
    params: dict | None = None,
    trials: list | None = None,
) -> int | None:
    """:func:`record_run` under ``opts``; says where it stored on stderr unless quiet."""
    if opts.no_store:
        return None
    rid = record_run(
        result, db=opts.db, dut=opts.dut, build=opts.build, test=test, params=params, trials=trials
    )
    if rid is not None and not opts.quiet:
        print(stored_line(rid, opts.db, result, dut=opts.dut, build=opts.build), file=sys.stderr)
    return rid


def _plain(result: dict | BaseModel) -> dict:
    return result.model_dump(exclude_unset=True) if isinstance(result, BaseModel) else result


def lab_dut(result: dict | BaseModel) -> bool:
    """True when the result's DUT probe read a tgen lab DUT namespace on this machine."""
    d = _plain(result).get("dut") or {}
    src = d.get("source") or "" if isinstance(d, dict) else ""
    return src.startswith("netns:") and src.endswith("-dut")


def dut_defaults(result: dict | BaseModel) -> tuple[str, str, str]:
    """(dut, build, source): the lab DUT shares this kernel, so uname names it; else unknown."""
    if lab_dut(result):
        u = os.uname()
        return u.release, u.version, "lab"
    return UNKNOWN, UNKNOWN, UNKNOWN


def _started_at(result: dict) -> str:
    s = result.get("started_at")
    if isinstance(s, str) and s:
        return s
    dur = M._num(result.get("duration_s")) or 0.0
    t = _dt.datetime.now(_dt.UTC) - _dt.timedelta(seconds=dur)
    return t.isoformat(timespec="milliseconds")


def _profile_text(path: str | None) -> str | None:
    if not path:
        return None
    try:
        p = Path(path)
        if p.is_file() and p.stat().st_size <= 1_000_000:
            return p.read_text(errors="replace")
    except OSError:
        return None
    return None


def build_record(
    result: dict | BaseModel,
    *,
    dut: str | None,
    build: str | None,
    test: str,
    params: dict | None,
) -> store.RunRecord:
    """The ``runs`` row for a result, with the DUT label and build filled in; the result
    goes through its test's model (:func:`tgen_tui.results.models.parse_result`)."""
    typed = models.parse_result(test, result)
    result = typed.to_doc()
    d_dut, d_build, d_src = dut_defaults(result)
    source = "option" if dut else d_src
    env = result.get("environment") or {}
    seed = result.get("seed")
    passed = result.get("passed")
    return store.RunRecord(
        started_at=_started_at(result),
        test=test,
        tester=env.get("tester") if isinstance(env, dict) else None,
        dut=dut or d_dut,
        build=build or d_build,
        dut_source=source,
        profile=result.get("profile"),
        profile_path=result.get("profile_path"),
        profile_hash=result.get("profile_hash"),
        profile_text=_profile_text(result.get("profile_path")),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        duration_s=M._num(result.get("duration_s")),
        partial=bool(result.get("partial")),
        passed=None if passed is None else bool(passed),
        params=params or {},
        result=typed,
    )


def record_run(
    result: dict | BaseModel,
    *,
    db: str | None = None,
    dut: str | None = None,
    build: str | None = None,
    test: str = "run",
    params: dict | None = None,
    trials: list[dict | BaseModel] | None = None,
    no_store: bool = False,
) -> int | None:
    """Store one result atomically; return its run id, or None (not stored; warned on stderr)."""
    if no_store:
        return None
    path = store.resolve(db)
    try:
        rec = build_record(result, dut=dut, build=build, test=test, params=params)
        rows = M.extract(rec.result.to_doc())
        typed_trials = [models.parse_trial(t) for t in trials or []]
        conn = store.connect(path)
        try:
            return store.insert_run(conn, rec, rows, typed_trials)
        finally:
            conn.close()
    except store.StoreError as e:
        _warn(f"result not stored: {e}{no_space(path)}")
    except Exception as e:  # noqa: BLE001 - storing must never lose the run's exit code
        _warn(f"result not stored in {path}: {type(e).__name__}: {e}{no_space(path)}")
    return None


def no_space(path: Path) -> str:
    """``" (no space left in FOLDER: 0 bytes free)"`` when the store's folder is (nearly)
    full, else "": SQLite says only "disk I/O error" or "database or disk is full"."""
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return ""
    return f" (no space left in {path.parent}: {free:,} bytes free)" if free < NEARLY_FULL else ""


def _warn(msg: str) -> None:
    print(f"tgen: warning: {msg}", file=sys.stderr)


def stored_line(
    run_id: int, db: str | None, result: dict | BaseModel, *, dut: str | None, build: str | None
) -> str:
    """'stored as run 7 in /root/.local/share/tgen/results.db' (+ how the DUT was labelled)."""
    line = f"stored as run {run_id} in {store.resolve(db)}"
    d_dut, d_build, src = dut_defaults(result)
    missing = [o for o, v in (("--dut", dut), ("--build", build)) if not v]
    if missing and src == UNKNOWN:
        line += f" (DUT {UNKNOWN}: give {' and '.join(missing)} to file it under a DUT and build)"
    elif missing:
        got = []
        if not dut:
            got.append(f"DUT {d_dut}")
        if not build:
            got.append(f"build {d_build!r}")
        line += f" ({' and '.join(got)} from the lab kernel)"
    return line
