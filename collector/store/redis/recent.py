"""`RecentRecords`: the score records this process wrote to the outbox, by the text written.

A worker settles a job by writing its score record's JSON into the outbox, and its exporter
soon claims that text back. Parsing it again into a `ScoreRecord` is a tenth of what a
function scorer's job costs the worker; the record it was made from is still in memory. The
settle remembers each record under the exact bytes sent to Redis, and a claim that returns
those very bytes takes the record as it is: equal text, equal record (`ScoreRecord.from_json`
of `to_json` gives back an equal record, except for a float JSON cannot hold, written ``null``:
such a record is not remembered). Anything else (another replica's records, a record written
before a restart, one dropped from the bounded memory) is parsed as before.

Only for connections that send text as strict UTF-8 (what the store's key is made with); a
client with another encoding gets no `RecentRecords` at all.
"""

from __future__ import annotations

import math

from collector.common.types import ScoreRecord

DEFAULT_LIMIT = 1024
"""Records remembered at most (the oldest are forgotten first): four export batches' worth. A
function scorer's record is about 1 KB of text (1 MB in all); a judge's reason and step results
make one up to a few times ``workers.max_attribute_chars``. Records another replica exports are
forgotten as newer ones come."""


class RecentRecords:
    """Score records by the UTF-8 bytes of their JSON, until claimed (bounded, oldest dropped first).

    Example:
        >>> recent = RecentRecords(limit=2)
        >>> record = ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q", score=0.5)
        >>> text = recent.remember(record)
        >>> recent.take(text.encode()) is record, recent.take(text.encode()) is record
        (True, False)
        >>> recent.take(text.encode()) == record  # claimed again: parsed, equal
        True
    """

    __slots__ = ("_by_text", "_limit")

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._by_text: dict[bytes, ScoreRecord] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._by_text)

    def remember(self, record: ScoreRecord) -> str:
        """``record``'s JSON (what the settle writes), remembered under its UTF-8 bytes; not a
        record with a float JSON cannot hold (written ``null``: its text reads back otherwise)."""
        text = record.to_json()
        if not _reads_back_as_made(record):
            return text
        by_text = self._by_text
        by_text[text.encode()] = record
        if len(by_text) > self._limit:
            del by_text[next(iter(by_text))]
        return text

    def take(self, data: bytes) -> ScoreRecord:
        """The record whose JSON is ``data`` (as claimed from the outbox): the remembered one,
        forgotten now, else parsed."""
        record = self._by_text.pop(data, None)
        return record if record is not None else ScoreRecord.from_json(data)


def _reads_back_as_made(record: ScoreRecord) -> bool:
    """Whether ``record``'s JSON reads back equal to it: its floats are finite (JSON has no NaN).

    Example:
        >>> rec = ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q", score=0.5)
        >>> _reads_back_as_made(rec), _reads_back_as_made(ScoreRecord("k", "t", "s", "x", "q", "Q", cost_usd=math.nan))
        (True, False)
    """
    return all(value is None or math.isfinite(value) for value in (record.score, record.cost_usd))


def record_text(recent: RecentRecords | None, record: ScoreRecord | None) -> str:
    """The outbox text of a settled job's record ("" for none), remembered in ``recent`` if given.

    Example:
        >>> recent = RecentRecords()
        >>> record = ScoreRecord("k", "ab" * 16, "cd" * 8, "ef" * 8, "q", "Q")
        >>> record_text(recent, record) == record.to_json(), len(recent), record_text(None, None)
        (True, 1, '')
    """
    if record is None:
        return ""
    return recent.remember(record) if recent is not None else record.to_json()
