"""The deployment's totals in Redis (`collector.store.totals`): one hash per key set,
``P totals`` (field -> amount, ``HINCRBYFLOAT``).

The settle scripts (`collector.store.redis.scripts`) add each accepted settlement's tally in
the settlement's own script, with the Lua helpers of `TOTALS`; the judge ledger adds each
settled judge call (`add_judge_call`, on the deployment's own keys). `read_totals` reads one
hash; a partitioned store sums the hash of every partition and of its own keys.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from collector.store.totals import judge_tally

TOTALS = """
local function tally_into(acc, text)
  if text == nil or text == '' then return end
  for name, amount in pairs(cjson.decode(text)) do acc[name] = (acc[name] or 0) + amount end
end
local function add_totals(key, acc)
  for name, amount in pairs(acc) do redis.call('HINCRBYFLOAT', key, name, string.format('%.17g', amount)) end
end
"""
"""Lua helpers the settle scripts prepend: ``tally_into(acc, tally JSON)`` sums a tally into a
table, ``add_totals(key, acc)`` adds the table to the totals hash (one command per field)."""


class TotalsKeys:
    """The totals' key (mixed into `collector.store.redis.keys.RedisKeys`)."""

    prefix: str

    @property
    def totals(self) -> str:
        """The key set's totals: field -> amount (hash).

        Example:
            >>> from collector.store.redis.keys import RedisKeys
            >>> RedisKeys("p:").totals
            '{p}:totals'
        """
        return self.prefix + "totals"


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def read_totals(client: aioredis.Redis, key: str) -> dict[str, float]:
    """The totals kept under ``key`` (field -> amount)."""
    found: Any = await client.hgetall(key)
    return {_s(name): float(amount) for name, amount in found.items()}


async def add_judge_call(client: aioredis.Redis, key: str, model: str, *, failed: bool, input_tokens: int,
                         output_tokens: int, cost_usd: float) -> None:
    """Add one settled judge call of ``model`` to the totals under ``key`` (one transaction)."""
    tally = judge_tally(model, failed=failed, input_tokens=input_tokens, output_tokens=output_tokens,
                        cost_usd=cost_usd)
    async with client.pipeline(transaction=True) as pipe:
        for name, amount in tally.items():
            if amount:
                pipe.hincrbyfloat(key, name, amount)
        await pipe.execute()
