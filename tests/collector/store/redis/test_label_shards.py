"""Redis keeps a scorer's kept scores in time shards (`collector.store.redis.label_keys`): with
shards of a few members, random keeps (scores again, out of order, at equal times, trimmed by
count and by age) leave the same kept scores as the SQLite store's one ordered table, read
back the same way, in every step."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest
from shared_redis import REDIS_URL

from collector.common.labels import KeptScore
from collector.store.redis import labels
from collector.store.redis.store import RedisStore
from collector.store.sqlite.store import SqliteStore


async def everything(store: SqliteStore | RedisStore, since: float, batch: int) -> list[KeptScore]:
    return [score async for got in store.scan_kept_scores(since, batch) for score in got]


@pytest.mark.parametrize("seed", range(3))
async def test_tiny_shards_keep_what_one_ordered_table_keeps(seed: int, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(labels, "SHARD_SIZE", 3 + seed)
    table = SqliteStore(str(tmp_path / "q.db"))
    shards = RedisStore(REDIS_URL, key_prefix=f"test-{uuid.uuid4().hex[:12]}:", block_ms=0)
    await table.start()
    await shards.start()
    try:
        t = 1_000.0
        for _ in range(12):
            batch = [KeptScore(scorer, scorer, "1", rng.choice(["r1", "r2"]), f"{n:032x}", f"{n:016x}", None,
                               rng.random(), None, round(t + rng.choice([0, 0, 0.001, -0.5, rng.uniform(-5, 5)]), 3))
                     for scorer, n in ((rng.choice("ab"), rng.randint(0, 40)) for _ in range(rng.randint(0, 30)))]
            limits = {"max_per_scorer": rng.choice([6, 20, 1_000]), "retain_s": rng.choice([3.0, 1e9])}
            await table.keep_scores(batch, **limits)
            await shards.keep_scores(batch, **limits)
            t += rng.choice([0, 0.001, 0.5, 2])
            since = round(t - rng.uniform(0, 6), 3)
            kept = await everything(table, 0.0, 7)
            assert await everything(shards, 0.0, 7) == kept
            assert await shards.kept_score_count() == await table.kept_score_count() == len(kept)
            assert await everything(shards, since, 5) == await everything(table, since, 5)
    finally:
        await shards.delete_all()
        await shards.shutdown()
        await table.shutdown()
