"""Labels and kept scores in the SQLite file (SPEC §11).

Tables (`collector.store.sqlite.schema.LABEL_TABLES`): ``labels`` (the newest label per
`Label.identity`, as its JSON), ``label_cursors`` (each source's pull cursor), ``label_lease``
(the pull lease: one row, its holder and until when, by the wall clock), and the kept scores
in the compact form of `collector.store.kept_rows`: ``kept_scorers`` (a small id and a count
per scorer id), ``kept_series`` (the series a row names) and ``kept_scores``, clustered by
(scorer, at, member) so that trimming the oldest and scanning are range reads, with a unique
index on (scorer, member) through which a later score of the same item replaces the kept one;
``shown`` (what the judges of few-shot scorers were shown, per scorer and item, with the trace a
label on a whole trace finds it by).

`SqliteLabels` is the `collector.store.labels_interface.LabelStore` half of `SqliteStore` (a
mixin on its connection thread, ``_runner``); `SqliteLabelAdmin` is the same store opened
beside the daemon (``tracescore labels``, ``agreement``), one connection per call.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

from collector.common.few_shot import Shown
from collector.common.labels import KeptScore, Label
from collector.store.kept_rows import Page, group_scores, merge_oldest_first, series_of, unpack_row
from collector.store.sqlite.runner import SqliteRunner, run_beside

T = TypeVar("T")


def put_labels(db: sqlite3.Connection, labels: Sequence[Label]) -> int:
    """`LabelStore.put_labels`: keep each label unless an older one (or the same one) is given.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> a = Label("q", "ab" * 16, None, None, True, "file", annotator="ana", at=5.0)
        >>> b = Label("q", "ab" * 16, None, None, False, "file", annotator="ana", at=4.0)  # older: ignored
        >>> put_labels(db, [a]), put_labels(db, [a, b]), list_labels(db, None) == [a]
        (1, 0, True)
    """
    changed = 0
    for label in labels:
        text = json.dumps(label.to_dict(), separators=(",", ":"), ensure_ascii=False)
        kept = db.execute("SELECT at, label FROM labels WHERE name = ? AND item = ? AND source = ? AND annotator = ?",
                          label.identity).fetchone()
        if kept is not None and (label.at < kept[0] or text == kept[1]):
            continue
        db.execute("INSERT OR REPLACE INTO labels(name, item, source, annotator, at, label) VALUES (?, ?, ?, ?, ?, ?)",
                   (*label.identity, label.at, text))
        changed += 1
    return changed


def list_labels(db: sqlite3.Connection, name: str | None) -> list[Label]:
    """`LabelStore.labels`: newest first (ties by identity)."""
    rows = db.execute("SELECT label FROM labels WHERE ? IS NULL OR name = ?"
                      " ORDER BY at DESC, name, item, source, annotator", (name, name))
    return [Label.from_dict(json.loads(text)) for text, in rows]


def take_lease(db: sqlite3.Connection, holder: str, ttl_s: float, now: float) -> bool:
    """`LabelStore.take_label_lease` in one transaction.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> [take_lease(db, who, 10.0, now) for who, now in (("a", 0.0), ("b", 5.0), ("a", 9.0), ("b", 18.0), ("b", 19.0))]
        [True, False, True, False, True]
    """
    kept = db.execute("SELECT holder, until FROM label_lease").fetchone()
    if kept is not None and kept[0] != holder and kept[1] > now:
        return False
    db.execute("INSERT OR REPLACE INTO label_lease(one, holder, until) VALUES (1, ?, ?)", (holder, now + ttl_s))
    return True


def keep_scores(db: sqlite3.Connection, scores: Sequence[KeptScore], max_per_scorer: int, retain_s: float) -> None:
    """`LabelStore.keep_scores` in one transaction: replace, add, trim each scorer written to
    ``max_per_scorer`` (oldest first), then forget every scorer's scores older than
    ``retain_s`` before the newest written.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> def k(n, at): return KeptScore("q", "Q", "1", "", "ab" * 16, f"{n:016x}", None, 0.5, None, at)
        >>> keep_scores(db, [k(n, float(n)) for n in range(5)], max_per_scorer=3, retain_s=60.0)
        >>> keep_scores(db, [k(4, 9.0)], max_per_scorer=3, retain_s=60.0)  # replaces span 4's
        >>> [at for at, _, _ in kept_page(db, "q", 0.0, b"", 10)], kept_count(db)
        ([2.0, 3.0, 9.0], 3)
        >>> keep_scores(db, [k(7, 64.0)], max_per_scorer=3, retain_s=60.0)  # 2.0 and 3.0 are too old
        >>> [at for at, _, _ in kept_page(db, "q", 0.0, b"", 10)]
        [9.0, 64.0]
    """
    for scorer_id, (series, rows) in group_scores(scores).items():
        db.execute("INSERT OR IGNORE INTO kept_scorers(scorer_id, n) VALUES (?, 0)", (scorer_id,))
        sid, n = db.execute("SELECT id, n FROM kept_scorers WHERE scorer_id = ?", (scorer_id,)).fetchone()
        db.executemany("INSERT OR IGNORE INTO kept_series(scorer, ref, series) VALUES (?, ?, ?)",
                       [(sid, ref, text) for ref, text in series.items()])
        replaced = db.executemany("DELETE FROM kept_scores WHERE scorer = ? AND member = ?",
                                  [(sid, m) for m in rows]).rowcount
        db.executemany("INSERT INTO kept_scores(scorer, at, member, row) VALUES (?, ?, ?, ?)",
                       [(sid, at, m, row) for m, (at, row) in rows.items()])
        n += len(rows) - replaced
        if n > max_per_scorer:
            last = db.execute("SELECT at, member FROM kept_scores WHERE scorer = ? ORDER BY at, member LIMIT 1 OFFSET ?",
                              (sid, n - max_per_scorer - 1)).fetchone()
            if last is not None:
                n -= db.execute("DELETE FROM kept_scores WHERE scorer = ? AND (at, member) <= (?, ?)",
                                (sid, *last)).rowcount
        db.execute("UPDATE kept_scorers SET n = ? WHERE id = ?", (n, sid))
    if scores:
        cutoff = max(round(score.at, 3) for score in scores) - retain_s
        for sid, n in db.execute("SELECT id, n FROM kept_scorers").fetchall():
            n -= db.execute("DELETE FROM kept_scores WHERE scorer = ? AND at < ?", (sid, cutoff)).rowcount
            db.execute("UPDATE kept_scorers SET n = ? WHERE id = ?", (n, sid))
    db.execute("DELETE FROM kept_series WHERE scorer IN (SELECT id FROM kept_scorers WHERE n <= 0)")
    db.execute("DELETE FROM kept_scorers WHERE n <= 0")


def kept_page(db: sqlite3.Connection, scorer_id: str, at: float, after: bytes, n: int) -> Page:
    """Up to ``n`` of the scorer's kept scores after (``at``, ``after``), in that order (see
    `collector.store.kept_rows.merge_oldest_first`)."""
    found = db.execute("SELECT id FROM kept_scorers WHERE scorer_id = ?", (scorer_id,)).fetchone()
    if found is None:
        return []
    series = {ref: series_of(text) for ref, text in db.execute("SELECT ref, series FROM kept_series WHERE scorer = ?",
                                                                 found)}
    rows = db.execute("SELECT at, member, row FROM kept_scores WHERE scorer = ? AND (at, member) > (?, ?)"
                      " ORDER BY at, member LIMIT ?", (found[0], at, after, n))
    return [(t, m, unpack_row(scorer_id, t, row, series)) for t, m, row in rows]


def kept_count(db: sqlite3.Connection) -> int:
    """`LabelStore.kept_score_count`."""
    return int(db.execute("SELECT coalesce(sum(n), 0) FROM kept_scorers").fetchone()[0])


def keep_shown(db: sqlite3.Connection, shown: Sequence[Shown], max_per_scorer: int, retain_s: float) -> None:
    """`LabelStore.keep_shown` in one transaction: replace (when not older), trim each scorer written
    to ``max_per_scorer`` (oldest first), forget what is older than ``retain_s`` before the newest.

    Example:
        >>> from collector.store.sqlite.schema import SCHEMA
        >>> db = sqlite3.connect(":memory:"); _ = db.executescript(SCHEMA)
        >>> def s(n, at, text="x"): return Shown("q", "ab" * 16, f"{n:016x}", None, text, at)
        >>> keep_shown(db, [s(n, float(n)) for n in range(4)] + [s(3, 1.0, "older")], 3, 60.0)
        >>> shown_of(db, "q", ["span:0000000000000000", "span:0000000000000003", "trace:" + "ab" * 16])
        {'span:0000000000000003': 'x', 'trace:abababababababababababababababab': 'x'}
    """
    written = set()
    for one in shown:
        db.execute("INSERT INTO shown(scorer_id, item, trace, at, content) VALUES (?, ?, ?, ?, ?)"
                   " ON CONFLICT(scorer_id, item) DO UPDATE SET trace = excluded.trace, at = excluded.at,"
                   " content = excluded.content WHERE excluded.at >= shown.at",
                   (one.scorer_id, one.item, one.trace, round(one.at, 3), one.content))
        written.add(one.scorer_id)
    for scorer_id in sorted(written):
        excess = db.execute("SELECT count(*) FROM shown WHERE scorer_id = ?", (scorer_id,)).fetchone()[0] - max_per_scorer
        if excess > 0:
            db.execute("DELETE FROM shown WHERE scorer_id = ? AND item IN (SELECT item FROM shown WHERE scorer_id = ?"
                       " ORDER BY at, item LIMIT ?)", (scorer_id, scorer_id, excess))
    if shown:
        db.execute("DELETE FROM shown WHERE at < ?", (max(round(one.at, 3) for one in shown) - retain_s,))


def shown_of(db: sqlite3.Connection, scorer_id: str, items: Sequence[str]) -> dict[str, str]:
    """`LabelStore.shown`."""
    found = {}
    for item in items:
        kind, _, ident = item.partition(":")
        row = db.execute("SELECT content FROM shown WHERE scorer_id = ? AND trace = ? ORDER BY at DESC, item DESC"
                         " LIMIT 1", (scorer_id, ident)).fetchone() if kind == "trace" else db.execute(
            "SELECT content FROM shown WHERE scorer_id = ? AND item = ?", (scorer_id, item)).fetchone()
        if row is not None:
            found[item] = str(row[0])
    return found


class SqliteLabels:
    """`LabelStore` on the SQLite file (module docstring); mixed into `SqliteStore`."""

    _runner: SqliteRunner

    def _labels_call(self, fn: Callable[[sqlite3.Connection], T]) -> Awaitable[T]:
        """Run ``fn`` on the store's connection thread (`SqliteLabelAdmin`: a connection of its own)."""
        return self._runner.call(fn)

    async def put_labels(self, labels: Sequence[Label]) -> int:
        """Keep labels (newest per identity); returns how many were new or changed."""
        return await self._labels_call(lambda db: put_labels(db, labels)) if labels else 0

    async def labels(self, name: str | None = None) -> list[Label]:
        """Every kept label (of the scorer named ``name``), newest first."""
        return await self._labels_call(lambda db: list_labels(db, name))

    async def label_counts(self) -> dict[tuple[str, str], int]:
        """How many labels are kept per (scorer name, source)."""
        rows = await self._labels_call(lambda db: db.execute(
            "SELECT name, source, count(*) FROM labels GROUP BY name, source").fetchall())
        return {(name, source): int(n) for name, source, n in rows}

    async def label_cursor(self, source: str) -> str | None:
        """The cursor the last pull of ``source`` stored (None: never pulled)."""
        found = await self._labels_call(lambda db: db.execute(
            "SELECT cursor FROM label_cursors WHERE source = ?", (source,)).fetchone())
        return None if found is None else str(found[0])

    async def set_label_cursor(self, source: str, cursor: str) -> None:
        """Store ``source``'s cursor."""
        await self._labels_call(lambda db: db.execute(
            "INSERT OR REPLACE INTO label_cursors(source, cursor) VALUES (?, ?)", (source, cursor)))

    async def take_label_lease(self, holder: str, ttl_s: float) -> bool:
        """Take or renew the pull lease for ``ttl_s`` seconds (False: another holder has it)."""
        now = time.time()
        return await self._labels_call(lambda db: take_lease(db, holder, ttl_s, now))

    async def release_label_lease(self, holder: str) -> None:
        """Give the lease up if ``holder`` has it."""
        await self._labels_call(lambda db: db.execute("DELETE FROM label_lease WHERE holder = ?", (holder,)))

    async def keep_scores(self, scores: Sequence[KeptScore], *, max_per_scorer: int, retain_s: float) -> None:
        """Keep scores (replacing the same series and item), bounded per scorer and by age: one transaction."""
        if scores:
            await self._labels_call(lambda db: keep_scores(db, scores, max_per_scorer, retain_s))

    async def scan_kept_scores(self, since: float = 0.0, batch: int = 10_000) -> AsyncIterator[list[KeptScore]]:
        """Every kept score at or after ``since``, oldest first, in batches of at most ``batch``."""
        scorers = await self._labels_call(lambda db: [s for s, in db.execute(
            "SELECT scorer_id FROM kept_scorers ORDER BY scorer_id")])

        def page(scorer_id: str, at: float, after: bytes, n: int) -> Awaitable[Page]:
            return self._labels_call(lambda db: kept_page(db, scorer_id, at, after, n))

        async for found in merge_oldest_first(scorers, page, since, batch):
            yield found

    async def kept_score_count(self) -> int:
        """How many scores are kept."""
        return await self._labels_call(kept_count)

    async def keep_shown(self, shown: Sequence[Shown], *, max_per_scorer: int, retain_s: float) -> None:
        """Keep what judges were shown (one per scorer and item), bounded per scorer and by age: one transaction."""
        if shown:
            await self._labels_call(lambda db: keep_shown(db, shown, max_per_scorer, retain_s))

    async def shown(self, scorer_id: str, items: Sequence[str]) -> dict[str, str]:
        """The content kept for each of ``items`` that has one."""
        return await self._labels_call(lambda db: shown_of(db, scorer_id, items)) if items else {}


class SqliteLabelAdmin(SqliteLabels):
    """The labels and kept scores of a SQLite queue file opened beside the running daemon.

    Args:
        path: the queue file (``queue.url``'s path); it must exist.

    Example:
        >>> import asyncio, os, tempfile
        >>> from collector.store.sqlite.store import SqliteStore
        >>> async def pulled(path):  # `tracescore labels pull` while the daemon runs
        ...     store = SqliteStore(path)
        ...     await store.start()
        ...     admin = SqliteLabelAdmin(path)
        ...     added = await admin.put_labels([Label("q", "ab" * 16, None, None, True, "file", at=1.0)])
        ...     await admin.set_label_cursor("phoenix", "c1")
        ...     seen = len(await store.labels("q")), await store.label_cursor("phoenix")
        ...     await store.shutdown()
        ...     return added, seen
        >>> asyncio.run(pulled(os.path.join(tempfile.mkdtemp(), "q.db")))
        (1, (1, 'c1'))
    """

    def __init__(self, path: str) -> None:
        self._path = path

    def _labels_call(self, fn: Callable[[sqlite3.Connection], T]) -> Awaitable[T]:
        """Run ``fn`` in a transaction of a connection of its own (`run_beside`)."""
        return run_beside(self._path, fn)

    async def close(self) -> None:
        """Nothing to release (each call opens and closes its connection)."""
