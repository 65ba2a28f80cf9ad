"""Labels and kept scores in Redis (SPEC §11): one set for every replica of a deployment.

* Labels: one hash, the newest label per `Label.identity` (field: the identity's JSON); a
  script keeps each label unless the kept one is newer or the same, so concurrent pulls
  agree. Labels are thousands, not millions: `labels` and `label_counts` read the hash whole.
* Cursors: one hash, source -> cursor. The pull lease: one key holding its holder, set with
  an expiry by a script that takes it when free or renews it for its holder.
* Kept scores, per scorer id, in the compact form of `collector.store.kept_rows`, in small
  sorted sets and hashes that Redis keeps compact (`collector.store.redis.label_keys`: time
  shards member -> at under a shard index, rows spread over hashes by member); one script
  keeps a batch (replace, trim to ``max_per_scorer``, forget what is older than ``retain_s``):
  one round trip. Under 100 bytes a score where one hash of JSON rows and one sorted set take
  380-400 (``bench/kept_scores.py``).
* What the judges of few-shot scorers were shown (`Shown`), per scorer: a hash item -> content, a
  sorted set of the items by time (trimmed oldest first), and a hash trace -> its newest item (a
  label on a whole trace finds its content by it); one script keeps a batch, one reads.

Keys: `collector.store.redis.label_keys` (under the deployment's hash tag: one Cluster slot);
scripts: `collector.store.redis.label_scripts`. `RedisLabels` is the
`collector.store.labels_interface.LabelStore` half of `RedisStore` and `PartitionedRedisStore`
(a mixin on their ``client`` and ``keys``: the deployment's own); `RedisLabelAdmin` is the
same store for a command.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import struct
from collections.abc import AsyncIterator, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from collector.common.few_shot import Shown
from collector.common.labels import KeptScore, Label
from collector.store.kept_rows import (
    Page,
    Series,
    bucket_count,
    group_scores,
    merge_oldest_first,
    series_of,
    unpack_row,
)
from collector.store.redis import label_scripts
from collector.store.redis.keys import RedisKeys
from collector.store.redis.label_keys import LabelKeys

logger = logging.getLogger(__name__)
SHARD_SIZE = 120
"""Members of a time shard at most: under the 128 of Redis's default ``zset-max-listpack-entries``."""
_AT = struct.Struct("<d")  # a row's time (ms) before the row: the script finds the old shard by it


def _ms(at: float) -> int:
    """A time as the milliseconds a kept score is stored at (at or after ``at``: `KeptScore.to_row`'s
    precision, ``since`` rounded up).

    Example:
        >>> _ms(1780000000.123), _ms(12.3456), _ms(1780000000.123) / 1000
        (1780000000123, 12346, 1780000000.123)
    """
    return math.ceil(round(at * 1000, 3))


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def label_order(label: Label) -> tuple[float, tuple[str, str, str, str]]:
    """The sort key of `LabelStore.labels`: newest first, ties by identity (as on SQLite)."""
    return -label.at, label.identity


class RedisLabels:
    """`LabelStore` on a deployment's Redis keys (module docstring)."""

    client: aioredis.Redis
    keys: RedisKeys

    @functools.cached_property
    def _label_keys(self) -> LabelKeys:
        return LabelKeys(self.keys.prefix)

    @functools.cached_property
    def _label_scripts(self) -> dict[str, AsyncScript]:
        names = ("PUT_LABELS", "TAKE_LEASE", "RELEASE_LEASE", "KEEP_SCORES", "KEPT_PAGE", "KEPT_COUNT", "KEEP_SHOWN",
                 "SHOWN")
        return {name: self.client.register_script(getattr(label_scripts, name)) for name in names}

    async def _run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._label_scripts[name](keys=keys, args=args)

    async def put_labels(self, labels: Sequence[Label]) -> int:
        """Keep labels (newest per identity) in one script; returns how many were new or changed."""
        if not labels:
            return 0
        args: list[Any] = []
        for label in labels:
            args += [json.dumps(label.identity, ensure_ascii=False),
                     json.dumps(label.to_dict(), separators=(",", ":"), ensure_ascii=False), repr(float(label.at))]
        return int(await self._run("PUT_LABELS", [self._label_keys.labels], args))

    async def labels(self, name: str | None = None) -> list[Label]:
        """Every kept label (of the scorer named ``name``), newest first."""
        kept = [Label.from_dict(json.loads(text)) for text in await self.client.hvals(self._label_keys.labels)]
        return sorted((label for label in kept if name is None or label.name == name), key=label_order)

    async def label_counts(self) -> dict[tuple[str, str], int]:
        """How many labels are kept per (scorer name, source), from the identities alone."""
        counts: dict[tuple[str, str], int] = {}
        for field in await self.client.hkeys(self._label_keys.labels):
            name, _, source, _ = json.loads(field)
            counts[(name, source)] = counts.get((name, source), 0) + 1
        return counts

    async def label_cursor(self, source: str) -> str | None:
        """The cursor the last pull of ``source`` stored (None: never pulled)."""
        found = await self.client.hget(self._label_keys.cursors, source)
        return None if found is None else _s(found)

    async def set_label_cursor(self, source: str, cursor: str) -> None:
        """Store ``source``'s cursor."""
        await self.client.hset(self._label_keys.cursors, source, cursor)

    async def take_label_lease(self, holder: str, ttl_s: float) -> bool:
        """Take or renew the pull lease for ``ttl_s`` seconds (Redis's clock; False: another holder has it)."""
        return bool(await self._run("TAKE_LEASE", [self._label_keys.lease], [holder, max(1, round(ttl_s * 1000))]))

    async def release_label_lease(self, holder: str) -> None:
        """Give the lease up if ``holder`` has it."""
        await self._run("RELEASE_LEASE", [self._label_keys.lease], [holder])

    async def keep_scores(self, scores: Sequence[KeptScore], *, max_per_scorer: int, retain_s: float) -> None:
        """Keep scores (replacing the same series and item), bounded per scorer and by age: one script."""
        if not scores:
            return
        cutoff = max(round(score.at, 3) for score in scores) - retain_s
        k = self._label_keys
        args: list[Any] = [k.kept_base, int(max_per_scorer), _ms(max(cutoff, -1e15)), bucket_count(max_per_scorer),
                           SHARD_SIZE]
        for scorer_id, (series, rows) in group_scores(scores).items():
            args += [scorer_id, len(series)]
            for ref, text in series.items():
                args += [ref, text]
            args.append(len(rows))
            for m, (at, row) in rows.items():
                ms = _ms(at)
                args += [m, ms, _AT.pack(ms) + row]
        await asyncio.shield(self._run("KEEP_SCORES", [k.kept_scorers], args))

    async def scan_kept_scores(self, since: float = 0.0, batch: int = 10_000) -> AsyncIterator[list[KeptScore]]:
        """Every kept score at or after ``since``, oldest first, in batches of at most ``batch``
        (a page per scorer in memory)."""
        k = self._label_keys
        scorers = sorted(_s(s) for s in await self.client.smembers(k.kept_scorers))
        tables: dict[str, dict[bytes, Series]] = {}

        async def page(scorer_id: str, at: float, after: bytes, n: int) -> Page:
            flat = await self._run("KEPT_PAGE", [k.kept_index(scorer_id)], [k.kept_base, scorer_id, _ms(at), after, n])
            found: Page = []
            for i in range(0, len(flat), 3):
                m, kept_at, row = bytes(flat[i]), float(flat[i + 1]) / 1000, bytes(flat[i + 2])[_AT.size:]
                found.append((kept_at, m, await self._unpack(scorer_id, kept_at, row, tables)))
            return found

        async for got in merge_oldest_first(scorers, page, since, batch):
            yield got

    async def _unpack(self, scorer_id: str, at: float, row: bytes,
                      tables: dict[str, dict[bytes, Series]]) -> KeptScore | None:
        """A row as a kept score, reading the scorer's series again when it names one not read
        yet (None: the row or its series went meanwhile)."""
        for attempt in range(2 if row else 0):
            try:
                return unpack_row(scorer_id, at, row, tables.get(scorer_id, {}))
            except KeyError:
                if attempt:
                    break
                meta = await self.client.hgetall(self._label_keys.kept_meta(scorer_id))
                tables[scorer_id] = {ref: series_of(_s(text)) for ref, text in meta.items()
                                     if isinstance(ref, bytes) and ref not in (b"b", b"n", b"q")}
        if row:
            logger.warning("a kept score of %s names a series not kept: skipped", scorer_id)
        return None

    async def kept_score_count(self) -> int:
        """How many scores are kept (one script)."""
        k = self._label_keys
        return int(await self._run("KEPT_COUNT", [k.kept_scorers], [k.kept_base]))

    async def keep_shown(self, shown: Sequence[Shown], *, max_per_scorer: int, retain_s: float) -> None:
        """Keep what judges were shown (one per scorer and item), bounded per scorer and by age: one script."""
        if not shown:
            return
        cutoff = max(round(one.at, 3) for one in shown) - retain_s
        k = self._label_keys
        args: list[Any] = [k.shown_base, int(max_per_scorer), _ms(max(cutoff, -1e15))]
        for one in shown:
            row = json.dumps([one.trace, round(one.at, 3), one.content], separators=(",", ":"), ensure_ascii=False)
            args += [one.scorer_id, one.item, one.trace, _ms(one.at), row]
        await asyncio.shield(self._run("KEEP_SHOWN", [k.shown_scorers], args))

    async def shown(self, scorer_id: str, items: Sequence[str]) -> dict[str, str]:
        """The content kept for each of ``items`` that has one (one script)."""
        if not items:
            return {}
        k = self._label_keys
        rows = await self._run("SHOWN", [k.shown_content(scorer_id), k.shown_traces(scorer_id)], list(items))
        return {item: str(json.loads(row)[2]) for item, row in zip(items, rows, strict=True) if row}


class RedisLabelAdmin(RedisLabels):
    """The labels and kept scores of a deployment's Redis opened by a command (``tracescore labels``,
    ``agreement``); a partitioned deployment's too (they are under its own prefix).

    Args:
        client: an asyncio Redis client (closed by `close`).
        keys: the deployment's keys (``queue.key_prefix``).

    Example:
        >>> from collector.store.redis.conn import connect
        >>> admin = RedisLabelAdmin(connect("redis://127.0.0.1:6379/0"), RedisKeys("doctest-labels:"))
        >>> asyncio.run(admin.close())
    """

    def __init__(self, client: aioredis.Redis, keys: RedisKeys) -> None:
        self.client = client
        self.keys = keys

    async def close(self) -> None:
        """Close the client."""
        await self.client.aclose()
