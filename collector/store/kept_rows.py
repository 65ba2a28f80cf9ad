"""How both stores keep `KeptScore`s compactly (SPEC §11: millions of them), and the scan that
reads them back oldest first over every scorer.

A kept score is stored per scorer id as three things:

* its **member**: 8 bytes naming its series and item (`member`), unique per scorer, so a later
  score of the same series on the same item replaces it;
* its time ``at`` (rounded to the millisecond, as `KeptScore.to_row` does), by which a
  scorer's scores are ordered, trimmed and scanned (ties by member);
* its **row** (`pack_row`): the rest, in about 46 bytes: an 8-byte reference to its series
  (`series_ref`: name, version and judge revision, kept once per scorer), the score, and the
  trace, span and session ids (binary when they are canonical lowercase hex) and label.

A row (with the 8 bytes of its time Redis adds) stays under Redis's 64-byte limit of a compact
hash value: with the time shards of `collector.store.redis.label_keys` a Redis deployment keeps
a score in under 100 bytes, where one hash of JSON rows and one sorted set take 380-400; the
SQLite file grows by about 105 (``bench/kept_scores.py``). Members are 64-bit digests: two items of
one scorer meet by chance once in about 10^19 pairs, and then one score replaces the other.

`merge_oldest_first` turns per-scorer pages (each store's own query) into the scan of
`collector.store.labels_interface.LabelStore.scan_kept_scores`.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from collector.common.labels import KeptScore

__all__ = ["Page", "Series", "bucket_count", "group_scores", "member", "merge_oldest_first", "pack_row",
           "series_json", "series_of", "series_ref", "unpack_row"]

Series = tuple[str, str, str]
"""(name, version, judge revision): what a row's `series_ref` stands for."""

Page = list[tuple[float, bytes, KeptScore | None]]
"""Kept scores of one scorer as a store reads them: (at, member, score), ordered by (at, member);
None where a score could not be read (it went while being read): skipped, the scan moves past it."""

_HEAD = struct.Struct("<8sdB")  # series ref, score, flags
_TRACE_HEX, _TRACE_TEXT, _SPAN_HEX, _SPAN_TEXT, _SESSION, _LABEL = (1 << n for n in range(6))
ROWS_PER_BUCKET = 64
"""Scores per Redis row hash aimed at (`bucket_count`): below Redis's 128 entries of a compact hash."""


def member(score: KeptScore) -> bytes:
    """The 8 bytes naming ``score``'s series and item among its scorer's kept scores.

    Example:
        >>> a = KeptScore("q", "Quality", "1", "r1", "ab" * 16, "cd" * 8, None, 0.5, None, 1.0)
        >>> b = KeptScore("q", "Quality", "1", "r1", "ab" * 16, "cd" * 8, None, 0.9, "pass", 2.0)
        >>> from dataclasses import replace
        >>> len(member(a)), member(a) == member(b), member(a) == member(replace(a, revision="r2"))
        (8, True, False)
    """
    keys = score.keys
    text = "\x1f".join((score.version, score.revision, keys[0] if keys else ""))
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


def series_json(score: KeptScore) -> str:
    """The series ``score`` is kept under, as its scorer's series table holds it."""
    return json.dumps([score.name, score.version, score.revision], separators=(",", ":"), ensure_ascii=False)


def series_of(text: str) -> Series:
    """The series `series_json` wrote.

    Example:
        >>> series_of('["Quality","1","3f2a9c1e"]')
        ('Quality', '1', '3f2a9c1e')
    """
    name, version, revision = json.loads(text)
    return str(name), str(version), str(revision)


def series_ref(series: str) -> bytes:
    """The 8 bytes a row names its series by (`series_json`'s digest: a scorer may see thousands
    of judge revisions, one per few-shot refresh, and two must never meet)."""
    return hashlib.blake2b(series.encode(), digest_size=8).digest()


def _hex_bytes(text: str, size: int) -> bytes | None:
    """``text`` as ``size`` bytes when it is their canonical lowercase hex, else None."""
    if len(text) != 2 * size:
        return None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return raw if raw.hex() == text else None


def _text(value: str) -> bytes:
    data = value.encode()
    size = len(data)
    prefix = bytearray()
    while True:  # unsigned LEB128 length
        byte, size = size & 0x7F, size >> 7
        prefix.append(byte | (0x80 if size else 0))
        if not size:
            return bytes(prefix) + data


def pack_row(score: KeptScore, ref: bytes | None = None) -> bytes:
    """``score`` as kept, apart from its scorer, member and time (`unpack_row` reads it back);
    ``ref``: its `series_ref`, when known.

    Example:
        >>> k = KeptScore("q", "Quality", "1", "3f2a9c1e", "ab" * 16, "cd" * 8, None, 0.75, "pass", 9.0)
        >>> len(pack_row(k)), len(k.to_row())
        (46, 105)
    """
    flags, parts = 0, []
    trace = _hex_bytes(score.trace_id, 16)
    if trace is not None:
        flags, parts = flags | _TRACE_HEX, [trace]
    elif score.trace_id:
        flags, parts = flags | _TRACE_TEXT, [_text(score.trace_id)]
    if score.span_id is not None:
        span = _hex_bytes(score.span_id, 8)
        flags |= _SPAN_HEX if span is not None else _SPAN_TEXT
        parts.append(span if span is not None else _text(score.span_id))
    if score.session_id is not None:
        flags |= _SESSION
        parts.append(_text(score.session_id))
    if score.label is not None:
        flags |= _LABEL
        parts.append(_text(score.label))
    ref = series_ref(series_json(score)) if ref is None else ref
    return _HEAD.pack(ref, float(score.score), flags) + b"".join(parts)


def unpack_row(scorer_id: str, at: float, row: bytes, series: Mapping[bytes, Series]) -> KeptScore:
    """The kept score ``pack_row`` made ``row`` of.

    Raises:
        KeyError: ``series`` does not hold the row's series (read the scorer's series again).

    Example:
        >>> k = KeptScore("q", "Quality", "1", "3f2a9c1e", "AB" * 16, "cd" * 8, "chat-7", 0.75, None, 9.0)
        >>> table = {series_ref(series_json(k)): ("Quality", "1", "3f2a9c1e")}
        >>> unpack_row("q", 9.0, pack_row(k), table) == k
        True
    """
    ref, value, flags = _HEAD.unpack_from(row)
    at_byte = _HEAD.size

    def take(size: int) -> bytes:
        nonlocal at_byte
        at_byte += size
        return row[at_byte - size:at_byte]

    def text() -> str:
        size = shift = 0
        while True:
            byte = take(1)[0]
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return take(size).decode()

    name, version, revision = series[ref]
    trace = take(16).hex() if flags & _TRACE_HEX else text() if flags & _TRACE_TEXT else ""
    span = take(8).hex() if flags & _SPAN_HEX else text() if flags & _SPAN_TEXT else None
    session = text() if flags & _SESSION else None
    label = text() if flags & _LABEL else None
    return KeptScore(scorer_id, name, version, revision, trace, span, session, value, label, at)


def bucket_count(max_per_scorer: int) -> int:
    """How many row hashes a Redis scorer's rows are spread over: a power of two giving about
    `ROWS_PER_BUCKET` rows each at ``max_per_scorer`` (fixed when the scorer's first score is kept).

    Example:
        >>> bucket_count(100_000), bucket_count(50), bucket_count(10**9)
        (2048, 1, 65536)
    """
    count = 1
    while count * ROWS_PER_BUCKET < max_per_scorer and count < 65536:
        count *= 2
    return count


def group_scores(scores: Sequence[KeptScore]) -> dict[str, tuple[dict[bytes, str], dict[bytes, tuple[float, bytes]]]]:
    """``scores`` per scorer id: the series they name (ref -> `series_json`) and, per member,
    (at, row) of the last one given (a later score of an item replaces an earlier one).

    Example:
        >>> a = KeptScore("q", "Q", "1", "r", "ab" * 16, None, None, 0.5, None, 1.0001)
        >>> b = KeptScore("q", "Q", "1", "r", "ab" * 16, None, None, 0.9, None, 2.0)
        >>> series, rows = group_scores([a, b])["q"]
        >>> len(series), [at for at, _ in rows.values()]
        (1, [2.0])
    """
    grouped: dict[str, tuple[dict[bytes, str], dict[bytes, tuple[float, bytes]]]] = {}
    refs: dict[Series, tuple[bytes, str]] = {}
    for score in scores:
        series, rows = grouped.setdefault(score.scorer_id, ({}, {}))
        found = refs.get((score.name, score.version, score.revision))
        if found is None:
            text = series_json(score)
            found = refs[(score.name, score.version, score.revision)] = (series_ref(text), text)
        series[found[0]] = found[1]
        rows[member(score)] = (round(score.at, 3), pack_row(score, found[0]))
    return grouped


async def merge_oldest_first(scorers: Sequence[str], page: Callable[[str, float, bytes, int], Awaitable[Page]],
                             since: float, batch: int) -> AsyncIterator[list[KeptScore]]:
    """Every score of ``scorers`` at or after ``since`` in batches of at most ``batch``, oldest
    first (ties by member), from ``page(scorer, at, member, n)``: up to ``n`` of the scorer's
    scores after (at, member) in that order (a member of ``b""``: from ``at`` on, inclusive).
    Memory: a page per scorer and a batch.

    Example:
        >>> import asyncio
        >>> def k(s, at): return KeptScore(s, s, "1", "", "ab" * 16, None, None, 1.0, None, at)
        >>> kept = {"a": [k("a", 1.0), k("a", 4.0)], "b": [k("b", 2.0), k("b", 3.0), k("b", 5.0)]}
        >>> async def page(scorer, at, m, n):
        ...     rows = [(x.at, member(x), x) for x in kept[scorer]]
        ...     return [r for r in rows if (r[0], r[1]) > (at, m)][:n]
        >>> async def scan():
        ...     return [[x.at for x in got] async for got in merge_oldest_first(["a", "b"], page, 2.0, 2)]
        >>> asyncio.run(scan())
        [[2.0, 3.0], [4.0, 5.0]]
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    size = max(1, min(batch, max(256, batch // max(1, len(scorers)))))
    buffers: list[Page] = [[] for _ in scorers]
    cursors: list[tuple[float, bytes] | None] = [(since, b"") for _ in scorers]  # None: read to its end
    heap: list[tuple[float, bytes, int]] = []

    async def refill(index: int) -> None:
        cursor = cursors[index]
        if cursor is None:
            return
        found = await page(scorers[index], cursor[0], cursor[1], size)
        cursors[index] = (found[-1][0], found[-1][1]) if len(found) >= size else None
        if found:
            buffers[index] = found[::-1]  # popped from the end
            heapq.heappush(heap, (found[0][0], found[0][1], index))

    for index in range(len(scorers)):
        await refill(index)
    out: list[KeptScore] = []
    while heap:
        _, _, index = heapq.heappop(heap)
        score = buffers[index].pop()[2]
        if score is not None:
            out.append(score)
        if buffers[index]:
            at, m, _ = buffers[index][-1]
            heapq.heappush(heap, (at, m, index))
        else:
            await refill(index)
        if len(out) >= batch:
            yield out
            out = []
    if out:
        yield out
