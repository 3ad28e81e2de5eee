"""The SQLite results database: where it lives, its schema and migrations, atomic writes.

One run is one transaction: the ``runs`` row, its ``metrics`` rows and its ``trials`` rows
are committed together or not at all, so a crash, SIGKILL or Ctrl-C never leaves a
half-written record (``runs.n_metrics`` and ``runs.n_trials`` let anyone verify that).
WAL mode lets a reader (the console, ``tgen results``) read while a run writes.

Schema history (``schema_version`` holds one row):
  1  runs(id, started_at, dut, build, profile, profile_hash, result JSON)
  2  runs gains test, tester, dut_source, profile_path, profile_text, seed, duration_s,
     partial, passed, params, stored_at, n_metrics, n_trials; new tables metrics and
     trials; metrics of existing runs are extracted from their stored result JSON.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from tgen_tui.results import metrics as M
from tgen_tui.results import models

SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 10_000

_SCHEMA_V2 = """
CREATE TABLE runs (
    id           INTEGER PRIMARY KEY,
    started_at   TEXT NOT NULL,     -- ISO 8601, UTC
    stored_at    TEXT NOT NULL,
    test         TEXT NOT NULL DEFAULT 'run',
    tester       TEXT,
    dut          TEXT NOT NULL,
    build        TEXT NOT NULL,
    dut_source   TEXT NOT NULL DEFAULT 'option',  -- option | lab | unknown
    profile      TEXT,
    profile_path TEXT,
    profile_hash TEXT,
    profile_text TEXT,
    seed         INTEGER,
    duration_s   REAL,
    partial      INTEGER NOT NULL DEFAULT 0,
    passed       INTEGER,
    params       TEXT NOT NULL DEFAULT '{}',   -- JSON
    result       TEXT NOT NULL,                -- the whole result document, JSON
    n_metrics    INTEGER NOT NULL DEFAULT 0,
    n_trials     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_dut_build ON runs(dut, build, started_at);
CREATE INDEX runs_started ON runs(started_at);
CREATE TABLE metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    scope  TEXT NOT NULL,   -- run | port | stream
    name   TEXT NOT NULL,   -- '' for scope run, else the port or stream name
    metric TEXT NOT NULL,
    value  REAL NOT NULL,
    PRIMARY KEY (run_id, scope, name, metric)
) WITHOUT ROWID;
CREATE INDEX metrics_metric ON metrics(metric, scope);
CREATE TABLE trials (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx    INTEGER NOT NULL,
    data   TEXT NOT NULL,   -- JSON: the raw trial as the verb gave it
    PRIMARY KEY (run_id, idx)
);
"""


class StoreError(Exception):
    """The database cannot be opened, read or written (message for one line)."""


def default_path() -> Path:
    """``$TGEN_DB``, else ``$XDG_DATA_HOME/tgen/results.db``, else ``~/.local/share/tgen/results.db``."""
    env = os.environ.get("TGEN_DB")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")
    return Path(base) / "tgen" / "results.db"


def resolve(db: str | os.PathLike | None) -> Path:
    """The database path: ``db`` when given, else :func:`default_path`."""
    return Path(db).expanduser() if db else default_path()


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    add = [
        "stored_at TEXT NOT NULL DEFAULT ''",
        "test TEXT NOT NULL DEFAULT 'run'",
        "tester TEXT",
        "dut_source TEXT NOT NULL DEFAULT 'option'",
        "profile_path TEXT",
        "profile_text TEXT",
        "seed INTEGER",
        "duration_s REAL",
        "partial INTEGER NOT NULL DEFAULT 0",
        "passed INTEGER",
        "params TEXT NOT NULL DEFAULT '{}'",
        "n_metrics INTEGER NOT NULL DEFAULT 0",
        "n_trials INTEGER NOT NULL DEFAULT 0",
    ]
    for col in add:
        conn.execute(f"ALTER TABLE runs ADD COLUMN {col}")
    for stmt in _SCHEMA_V2.split(";"):
        s = stmt.strip()
        if s.startswith(("CREATE TABLE metrics", "CREATE TABLE trials", "CREATE INDEX")):
            conn.execute(s)
    rows = conn.execute("SELECT id, started_at, result FROM runs").fetchall()
    for rid, started, text in rows:
        try:
            res = json.loads(text)
        except ValueError:
            res = {}
        res = res if isinstance(res, dict) else {}
        mrows = M.extract(res)
        conn.executemany(
            "INSERT OR REPLACE INTO metrics VALUES (?, ?, ?, ?, ?)",
            [(rid, s, n, k, v) for s, n, k, v in mrows],
        )
        env = res.get("environment") or {}
        conn.execute(
            "UPDATE runs SET stored_at=?, tester=?, profile_path=?, seed=?, duration_s=?,"
            " partial=?, passed=?, n_metrics=? WHERE id=?",
            (
                started,
                env.get("tester"),
                res.get("profile_path"),
                res.get("seed") if isinstance(res.get("seed"), int) else None,
                M._num(res.get("duration_s")),
                int(bool(res.get("partial"))),
                None if res.get("passed") is None else int(bool(res.get("passed"))),
                len(mrows),
                rid,
            ),
        )


# MIGRATIONS[v] turns a version-v database into version v+1 (inside one transaction).
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_1_to_2}


def _version(conn: sqlite3.Connection) -> int | None:
    has = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
    ).fetchone()
    if not has:
        return None
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return int(row[0]) if row else None


def connect(db: str | os.PathLike | None = None, *, create: bool = True) -> sqlite3.Connection:
    """Open (and create or migrate) the database; raise :class:`StoreError` on failure."""
    path = resolve(db)
    if not create and not path.exists():
        raise StoreError(f"no results database at {path} (run something first, or give --db)")
    if not create:  # a reading verb writes nothing into a file that is not a database yet
        if path.is_dir():
            raise StoreError(f"{path} is a directory, not a results database")
        if path.stat().st_size == 0:
            raise StoreError(f"{path} is empty: not a tgen results database (nothing stored yet)")
    try:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except (OSError, sqlite3.Error) as e:
        raise StoreError(f"cannot open {path}: {e}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        _ensure_schema(conn, path)
    except sqlite3.Error as e:
        conn.close()
        raise StoreError(f"{path}: {e}") from None
    except StoreError:
        conn.close()
        raise
    return conn


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        v = _version(conn)
        if v is None:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            if tables:
                raise StoreError(f"{path} is not a tgen results database (no schema_version)")
            conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            for stmt in _SCHEMA_V2.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
        elif v > SCHEMA_VERSION:
            raise StoreError(
                f"{path} has schema version {v}, newer than this tgen understands "
                f"({SCHEMA_VERSION}): upgrade tgen-tui"
            )
        else:
            while v < SCHEMA_VERSION:
                MIGRATIONS[v](conn)
                v += 1
                conn.execute("UPDATE schema_version SET version=?", (v,))
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction, if any, without masking the error that got us here
    (a Ctrl-C must stay a KeyboardInterrupt, not become 'no transaction is active')."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection is closed next; SQLite discards the transaction then


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


@dataclass
class RunRecord:
    """One row of ``runs`` ready to insert (``result`` and ``params`` as Python objects)."""

    started_at: str
    test: str
    tester: str | None
    dut: str
    build: str
    dut_source: str
    profile: str | None
    profile_path: str | None
    profile_hash: str | None
    profile_text: str | None
    seed: int | None
    duration_s: float | None
    partial: bool
    passed: bool | None
    params: dict
    result: models.Doc  # the document through its test's model (models.parse_result)


def insert_run(
    conn: sqlite3.Connection,
    rec: RunRecord,
    metric_rows: list[tuple[str, str, str, float]],
    trials: Iterable[models.Doc],
) -> int:
    """Write one run, its metrics and its trials in one transaction; return its id."""
    trials = [t.to_doc() for t in trials]
    conn.execute("BEGIN IMMEDIATE")
    try:
        cur = conn.execute(
            "INSERT INTO runs (started_at, stored_at, test, tester, dut, build, dut_source,"
            " profile, profile_path, profile_hash, profile_text, seed, duration_s, partial,"
            " passed, params, result, n_metrics, n_trials)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                rec.started_at,
                now_iso(),
                rec.test,
                rec.tester,
                rec.dut,
                rec.build,
                rec.dut_source,
                rec.profile,
                rec.profile_path,
                rec.profile_hash,
                rec.profile_text,
                rec.seed,
                rec.duration_s,
                int(rec.partial),
                None if rec.passed is None else int(rec.passed),
                json.dumps(rec.params, default=str, sort_keys=True),
                json.dumps(rec.result.to_doc(), default=str),
                len(metric_rows),
                len(trials),
            ),
        )
        rid = int(cur.lastrowid)
        conn.executemany(
            "INSERT OR REPLACE INTO metrics VALUES (?, ?, ?, ?, ?)",
            [(rid, s, n, k, v) for s, n, k, v in metric_rows],
        )
        conn.executemany(
            "INSERT INTO trials VALUES (?, ?, ?)",
            [(rid, i, json.dumps(t, default=str)) for i, t in enumerate(trials)],
        )
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return rid


# ---------------------------------------------------------------- queries

RUN_COLUMNS = (
    "id, started_at, test, tester, dut, build, dut_source, profile, profile_path,"
    " profile_hash, seed, duration_s, partial, passed, n_metrics, n_trials"
)


def _rows(cur: sqlite3.Cursor) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def list_runs(
    conn: sqlite3.Connection,
    *,
    dut: str | None = None,
    build: str | None = None,
    profile: str | None = None,
    test: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
    newest_first: bool = True,
) -> list[dict]:
    """Runs matching the filters (``profile`` matches the name, the path or a hash prefix)."""
    where, args = [], []
    for col, val in (("dut", dut), ("build", build), ("test", test)):
        if val is not None:
            where.append(f"{col} = ?")
            args.append(val)
    if profile is not None:
        where.append("(profile = ? OR profile_path = ? OR profile_hash LIKE ?)")
        args += [profile, profile, profile + "%"]
    if since:
        where.append("started_at >= ?")
        args.append(since)
    if until:
        where.append("started_at < ?")
        args.append(until)
    sql = f"SELECT {RUN_COLUMNS} FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY started_at DESC, id DESC" if newest_first else " ORDER BY started_at, id"
    if limit:
        sql += f" LIMIT {int(limit)}"
    return _rows(conn.execute(sql, args))


def get_run(conn: sqlite3.Connection, run_id: int) -> dict | None:
    """One run with its params, result, metrics and trials, or None."""
    cur = conn.execute(
        f"SELECT {RUN_COLUMNS}, params, result, profile_text FROM runs WHERE id = ?", (run_id,)
    )
    rows = _rows(cur)
    if not rows:
        return None
    run = rows[0]
    run["params"] = json.loads(run["params"] or "{}")
    run["result"] = _result(run["test"], run["result"]).to_doc()
    run["metrics"] = [
        {"scope": s, "name": n, "metric": m, "value": v}
        for s, n, m, v in conn.execute(
            "SELECT scope, name, metric, value FROM metrics WHERE run_id = ?"
            " ORDER BY scope, name, metric",
            (run_id,),
        )
    ]
    run["trials"] = [t.to_doc() for t in read_trials(conn, run_id)]
    return run


def _result(test: str, text: str | None) -> models.Doc:
    return _typed(lambda d: models.parse_result(test, d), text)


def _typed(parse: Callable[[dict], models.Doc], text: str | None) -> models.Doc:
    """A stored document through its model; one the model rejects (written by hand, or
    by a tgen with a bug) still reads, untyped, rather than hiding the whole run."""
    data = json.loads(text or "{}")
    try:
        return parse(data)
    except ValidationError:
        return models.LooseRecord.model_validate(data if isinstance(data, dict) else {})


def read_result(conn: sqlite3.Connection, run_id: int) -> models.Doc | None:
    """One run's result document through its model (RunResult, ThroughputReport, ...)."""
    row = conn.execute("SELECT test, result FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else _result(row[0], row[1])


def read_trials(conn: sqlite3.Connection, run_id: int) -> list[models.Doc]:
    """One run's stored trials through their models, in order."""
    return [
        _typed(models.parse_trial, d)
        for (d,) in conn.execute("SELECT data FROM trials WHERE run_id = ? ORDER BY idx", (run_id,))
    ]


def run_metrics(conn: sqlite3.Connection, run_id: int, scope: str = "run") -> dict[str, float]:
    """``{metric: value}`` of one run at ``scope`` (name '' for the run scope)."""
    return {
        m: v
        for m, v in conn.execute(
            "SELECT metric, value FROM metrics WHERE run_id = ? AND scope = ? AND name = ''",
            (run_id, scope),
        )
    }


def run_trials(conn: sqlite3.Connection, run_id: int) -> list[dict]:
    """One run's stored trials as documents (see :func:`read_trials`)."""
    return [t.to_doc() for t in read_trials(conn, run_id)]


def verify(conn: sqlite3.Connection) -> list[str]:
    """Problems found: ``PRAGMA integrity_check`` and every run's metric and trial counts."""
    problems = []
    ic = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    if ic != ["ok"]:
        problems += [f"integrity_check: {x}" for x in ic]
    for rid, nm, nt, am, at in conn.execute(
        "SELECT r.id, r.n_metrics, r.n_trials,"
        " (SELECT count(*) FROM metrics m WHERE m.run_id = r.id),"
        " (SELECT count(*) FROM trials t WHERE t.run_id = r.id) FROM runs r"
    ):
        if nm != am or nt != at:
            problems.append(f"run {rid}: {am}/{nm} metrics, {at}/{nt} trials")
    for (rid,) in conn.execute(
        "SELECT DISTINCT run_id FROM metrics WHERE run_id NOT IN (SELECT id FROM runs)"
    ):
        problems.append(f"metrics of missing run {rid}")
    return problems
