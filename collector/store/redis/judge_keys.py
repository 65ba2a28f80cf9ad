"""The Redis keys of judge governance (SPEC §8) and parked jobs, built from the deployment's
hash-tagged prefix like every other key (`collector.store.redis.keys.RedisKeys`, which mixes
them in): every script keeps to the deployment's one Cluster slot."""

from __future__ import annotations


class JudgeKeys:
    """The judge ledger's keys and the parked-jobs hash (see the layout in `collector.store.redis.keys`)."""

    prefix: str

    @property
    def parked(self) -> str:
        """Parked jobs: job key -> the reason of its last park (hash).

        Example:
            >>> from collector.store.redis.keys import RedisKeys
            >>> RedisKeys("p:").parked
            '{p}:parked'
        """
        return self.prefix + "parked"

    def judge_spend(self, window: str) -> str:
        """A budget window's settled spend per scope (hash); its reservations are beside it.

        Example:
            >>> from collector.store.redis.keys import RedisKeys
            >>> keys = RedisKeys("p:")
            >>> keys.judge_spend("1d:2026-12-05"), keys.judge_reservations("w"), keys.judge_reservation_data("w")
            ('{p}:judge:spend:1d:2026-12-05', '{p}:judge:res:w', '{p}:judge:resdata:w')
        """
        return self.prefix + "judge:spend:" + window

    def judge_reservations(self, window: str) -> str:
        """A budget window's live reservations by expiry (zset)."""
        return self.prefix + "judge:res:" + window

    def judge_reservation_data(self, window: str) -> str:
        """A budget window's reservations: id -> JSON ``[amount, scope...]`` (hash)."""
        return self.prefix + "judge:resdata:" + window

    def judge_rate(self, model: str) -> str:
        """A model's shared rate limits and cool-down (hash).

        Example:
            >>> from collector.store.redis.keys import RedisKeys
            >>> keys = RedisKeys("p:")
            >>> keys.judge_rate("openai/gpt-4o"), keys.judge_breakers, keys.judge_probes
            ('{p}:judge:rate:openai/gpt-4o', '{p}:judge:breakers', '{p}:judge:probes')
        """
        return self.prefix + "judge:rate:" + model

    @property
    def judge_limits(self) -> str:
        """Budget limits set by ``tracescore judges budget``: scope -> "usd,configured" (hash)."""
        return self.prefix + "judge:limits"

    @property
    def judge_breakers(self) -> str:
        """Open breakers: key -> JSON (hash)."""
        return self.prefix + "judge:breakers"

    @property
    def judge_probes(self) -> str:
        """Open breakers' next probe times: key -> epoch s (hash)."""
        return self.prefix + "judge:probes"
