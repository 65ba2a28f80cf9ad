"""The SQLite store's file layout: its tables, the per-trace summary kept beside each
received request, and the upgrade of an earlier layout."""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterable

from collector.common.types import CANDIDATE, ROOT, SummaryEntry

_ENTRY = struct.Struct("<16sIB")  # summary entry: trace id, span count, flags

SCHEMA = """
-- The trace buffer (see collector.store.sqlite.buffer): requests as received, one row each.
CREATE TABLE IF NOT EXISTS received (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    signal TEXT NOT NULL,
    whole INTEGER NOT NULL,  -- 1: a whole request, cut by trace when loaded; 0: one trace's chunk
    summary BLOB NOT NULL,  -- 21 bytes per trace: trace id, span count, flags
    data BLOB NOT NULL,  -- empty when the bytes are in the body log:
    segment INTEGER,  -- its segment,
    offset INTEGER,  -- where they start
    length INTEGER  -- and how many
);
CREATE TABLE IF NOT EXISTS decided (
    trace_id BLOB PRIMARY KEY,
    through_row INTEGER NOT NULL  -- the last received row the decision covered
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    payload TEXT NOT NULL,
    scorer_id TEXT NOT NULL,
    scorer_version TEXT,
    available_at REAL NOT NULL,
    lease TEXT,
    lease_until REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    supersedes TEXT,  -- a replayed job: the evaluation span id of the failure it replaces
    parked_since REAL,  -- handed back by a Park: when it was first parked (until settled otherwise)
    park_reason TEXT  -- and why it was last parked (collector.common.judge_types.PARK_REASONS)
);
CREATE INDEX IF NOT EXISTS jobs_available ON jobs(available_at);
CREATE TABLE IF NOT EXISTS done (
    key TEXT PRIMARY KEY,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    error TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    failed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS judge_replies (  -- a job's judge replies until it settles done or dead
    job_key TEXT NOT NULL,
    request_key TEXT NOT NULL,
    reply TEXT NOT NULL,
    PRIMARY KEY (job_key, request_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    available_at REAL NOT NULL
);
-- Native score sinks (collector.export.sinks): one row per (sink, score) until that backend took it.
CREATE TABLE IF NOT EXISTS sink_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sink TEXT NOT NULL,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    available_at REAL NOT NULL,
    waiting_since REAL,  -- when the backend first did not know the span
    UNIQUE(sink, key)
);
CREATE INDEX IF NOT EXISTS sink_outbox_due ON sink_outbox(sink, available_at);
-- The forward log (collector.store.sqlite.forward): requests to pass on, in order received.
CREATE TABLE IF NOT EXISTS forward (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    signal TEXT NOT NULL,  -- traces or logs
    data BLOB NOT NULL,  -- empty when the bytes are in the body log:
    segment INTEGER,  -- its segment,
    offset INTEGER,  -- where they start
    length INTEGER NOT NULL  -- and how many
);
-- Conversations (collector.store.sqlite.sessions): one row per session, open or scored.
CREATE TABLE IF NOT EXISTS sessions (
    scope TEXT PRIMARY KEY,  -- collector.common.session_types.session_scope
    session_id TEXT NOT NULL,
    service TEXT NOT NULL,
    open INTEGER NOT NULL,  -- 1: waiting to be scored (or claimed); 0: scored, retained
    opened_at REAL NOT NULL,  -- its first turn noted, or its reopening
    last_noted REAL NOT NULL,
    due_at REAL,  -- open: when it is due, for
    reason TEXT NOT NULL DEFAULT 'idle',  -- this reason
    forced INTEGER NOT NULL DEFAULT 0,  -- 1: forced out by max_open (no longer counts against it)
    claim_until REAL,  -- taken: its claim runs out then
    wake_at REAL,  -- open: max(due_at, claim_until), the scheduler's timer; NULL when scored
    scored_rev INTEGER NOT NULL DEFAULT 0,  -- the last revision scored (0: none yet)
    forget_at REAL  -- scored: when it is forgotten
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_wake ON sessions(wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS sessions_unforced ON sessions(opened_at) WHERE open = 1 AND forced = 0;
CREATE INDEX IF NOT EXISTS sessions_forget ON sessions(forget_at) WHERE forget_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS session_turns (  -- a rowid table: a turn's JSON (1-2 KB) stays on its page
    scope TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    run TEXT NOT NULL,  -- RunRecord.to_json()
    UNIQUE (scope, trace_id, span_id)
);
CREATE TABLE IF NOT EXISTS session_counts (  -- monotonic totals: scored_total, reopened_total, ...
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
"""

JUDGE_TABLES = (
    # Judge spend (collector.store.sqlite.judge_ledger): settled USD per (budget window, scope),
    # kept until kept_until (wall clock) once the window is no longer written.
    """CREATE TABLE IF NOT EXISTS judge_spend (
    budget_window TEXT NOT NULL,
    scope TEXT NOT NULL,
    spent REAL NOT NULL,
    kept_until REAL NOT NULL,
    PRIMARY KEY (budget_window, scope)
) WITHOUT ROWID""",
    # Calls in flight: their worst-case cost per scope, until settled or expired (caller's clock).
    """CREATE TABLE IF NOT EXISTS judge_reservations (
    reservation TEXT NOT NULL,
    budget_window TEXT NOT NULL,
    scope TEXT NOT NULL,
    amount REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (budget_window, reservation, scope)
) WITHOUT ROWID""",
    # Budget limits set by `tracescore judges budget`, over the configured limit they replace.
    """CREATE TABLE IF NOT EXISTS judge_limits (
    scope TEXT PRIMARY KEY,
    usd REAL NOT NULL,
    configured REAL NOT NULL
) WITHOUT ROWID""",
    # The deployment's totals (collector.store.totals): field -> amount, written with what they count.
    """CREATE TABLE IF NOT EXISTS totals (
    field TEXT PRIMARY KEY,
    amount REAL NOT NULL
) WITHOUT ROWID""",
    # Open circuit breakers, one per (model, credentials) key (collector.common.judge_types.Breaker).
    """CREATE TABLE IF NOT EXISTS judge_breakers (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    reason TEXT NOT NULL,
    since REAL NOT NULL,
    next_probe REAL NOT NULL,
    interval_s REAL NOT NULL
) WITHOUT ROWID""",
)
"""The judge ledger's tables and the totals': part of `SCHEMA`, and created by `add_missing_columns`
in a file an earlier version wrote (a command beside the daemon may open one)."""

LABEL_TABLES = (
    # Human labels (collector.store.sqlite.labels): the newest per Label.identity, as Label JSON.
    """CREATE TABLE IF NOT EXISTS labels (
    name TEXT NOT NULL,
    item TEXT NOT NULL,
    source TEXT NOT NULL,
    annotator TEXT NOT NULL,
    at REAL NOT NULL,
    label TEXT NOT NULL,
    PRIMARY KEY (name, item, source, annotator)
) WITHOUT ROWID""",
    # Each label source's pull cursor, and the pull lease (one row: its holder, until when).
    "CREATE TABLE IF NOT EXISTS label_cursors (source TEXT PRIMARY KEY, cursor TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS label_lease (one INTEGER PRIMARY KEY CHECK (one = 1), holder TEXT NOT NULL,"
    " until REAL NOT NULL)",
    # Kept scores (collector.store.kept_rows): per scorer a small id, how many it keeps, its series.
    "CREATE TABLE IF NOT EXISTS kept_scorers (id INTEGER PRIMARY KEY, scorer_id TEXT NOT NULL UNIQUE,"
    " n INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS kept_series (
    scorer INTEGER NOT NULL,
    ref BLOB NOT NULL,  -- kept_rows.series_ref
    series TEXT NOT NULL,  -- kept_rows.series_json
    PRIMARY KEY (scorer, ref)
) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS kept_scores (  -- in order of time per scorer: trimmed and scanned so
    scorer INTEGER NOT NULL,
    at REAL NOT NULL,
    member BLOB NOT NULL,  -- kept_rows.member: series and item
    row BLOB NOT NULL,  -- kept_rows.pack_row
    PRIMARY KEY (scorer, at, member)
) WITHOUT ROWID""",
    "CREATE UNIQUE INDEX IF NOT EXISTS kept_scores_item ON kept_scores(scorer, member)",
    # What the judges of few-shot scorers were shown, per scorer and item (collector.common.few_shot.Shown).
    "CREATE TABLE IF NOT EXISTS shown (scorer_id TEXT NOT NULL, item TEXT NOT NULL, trace TEXT NOT NULL,"
    " at REAL NOT NULL, content TEXT NOT NULL, PRIMARY KEY (scorer_id, item)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS shown_at ON shown(scorer_id, at)",
    "CREATE INDEX IF NOT EXISTS shown_trace ON shown(scorer_id, trace, at)",
)
"""The tables of labels and kept scores (SPEC §11): part of `SCHEMA`, and created by
`add_missing_columns` in a file an earlier version wrote."""

SCHEMA += "".join(f"{table};\n" for table in JUDGE_TABLES + LABEL_TABLES)


def summary_entry(trace_id: bytes, span_count: int, flags: int) -> bytes:
    """One trace's summary entry as stored (21 bytes).

    Example:
        >>> len(summary_entry(b"t" * 16, 3, CANDIDATE))
        21
    """
    return _ENTRY.pack(trace_id, span_count, flags)


def pack_summary(entries: Iterable[SummaryEntry]) -> bytes:
    """A request's per-trace summary as stored beside it.

    Example:
        >>> unpack_summary(pack_summary([(b"t" * 16, 3, CANDIDATE)]))
        [(b'tttttttttttttttt', 3, 1)]
    """
    pack = _ENTRY.pack
    return b"".join([pack(t, n, f) for t, n, f in entries])


def unpack_summary(summary: bytes) -> list[SummaryEntry]:
    """The entries of a stored summary.

    Example:
        >>> unpack_summary(b"")
        []
    """
    return list(_ENTRY.iter_unpack(summary))


def add_missing_columns(db: sqlite3.Connection) -> None:
    """Add the columns and tables a file of an earlier version lacks (``jobs.supersedes``,
    ``jobs.parked_since``, ``jobs.park_reason``, `JUDGE_TABLES`, `LABEL_TABLES`); a no-op on a
    current file. Safe inside or outside a transaction.

    Example:
        >>> db = sqlite3.connect(":memory:")
        >>> _ = db.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, key TEXT)")
        >>> add_missing_columns(db); add_missing_columns(db)
        >>> [row[1] for row in db.execute("PRAGMA table_info(jobs)")]
        ['id', 'key', 'supersedes', 'parked_since', 'park_reason']
        >>> db.execute("SELECT count(*) FROM judge_breakers").fetchone(), db.execute("SELECT count(*) FROM labels").fetchone()
        ((0,), (0,))
    """
    columns = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    for column, kind in (("supersedes", "TEXT"), ("parked_since", "REAL"), ("park_reason", "TEXT")):
        if column not in columns:
            db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
    for table in JUDGE_TABLES + LABEL_TABLES:
        db.execute(table)


def upgrade_layout(db: sqlite3.Connection) -> None:
    """Move the traces of an earlier file layout (``traces`` and ``chunks`` tables, one row
    per trace) into ``received`` and ``decided``; a no-op on a current file.

    Example:
        >>> db = sqlite3.connect(":memory:")
        >>> upgrade_layout(db)
    """
    def exists(table: str) -> bool:
        return bool(db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone())

    if not exists("traces"):
        return
    columns = {row[1] for row in db.execute("PRAGMA table_info(traces)")}
    data = "data" if "data" in columns else "NULL"
    order = "id" if "id" in columns else "first_seen"
    db.execute("BEGIN IMMEDIATE")
    traces = db.execute(
        f"SELECT trace_id, first_seen, span_count, has_candidate, root_seen, decided, {data}"
        f" FROM traces ORDER BY {order}").fetchall()
    for trace_id, first_seen, span_count, candidate, root, decided, head in traces:
        stored: list[tuple[str, bytes]] = [("spans", head)] if head is not None else []
        if exists("chunks"):
            stored += db.execute(
                "SELECT signal, data FROM chunks WHERE trace_id = ? ORDER BY id", (trace_id,)).fetchall()
        if not stored:
            continue  # nothing of it was kept
        flags = (CANDIDATE if candidate else 0) | (ROOT if root else 0)
        last = 0
        for i, (signal, chunk) in enumerate(stored):
            entry = (trace_id, span_count, flags) if i == 0 else (trace_id, 0, 0)
            last = int(db.execute(
                "INSERT INTO received(at, signal, whole, summary, data) VALUES (?, ?, 0, ?, ?)",
                (first_seen, signal, summary_entry(*entry), chunk)).lastrowid or 0)
        if decided:
            db.execute("INSERT OR REPLACE INTO decided(trace_id, through_row) VALUES (?, ?)", (trace_id, last))
    db.execute("DROP TABLE traces")
    if exists("chunks"):
        db.execute("DROP TABLE chunks")
    db.execute("COMMIT")
