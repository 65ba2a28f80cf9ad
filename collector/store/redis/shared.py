"""What a Redis deployment keeps once, under its own keys, whatever its partitions: the judge
ledger (SPEC §8, `collector.store.redis.judge_ledger`) and the labels and kept scores (SPEC §11,
`collector.store.redis.labels`). `RedisStore` and `PartitionedRedisStore` mix it in."""

from __future__ import annotations

from collector.store.redis.judge_ledger import RedisJudgeLedger
from collector.store.redis.labels import RedisLabels


class RedisShared(RedisJudgeLedger, RedisLabels):
    """`JudgeLedger` and `LabelStore` on a deployment's ``client`` and ``keys``."""
