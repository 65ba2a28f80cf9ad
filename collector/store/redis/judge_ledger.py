"""The judge ledger of the Redis store (SPEC §8): one view of spend, rates and breakers shared
by every replica of a deployment.

* Budgets: per window, a hash of settled spend per scope and the live reservations (a zset by
  expiry and their amounts); one script reserves (dropping expired reservations, checking
  every scope, adding) and one settles, so concurrent replicas never over-commit. A window's
  keys expire `WINDOW_RETENTION_S` after they were last written.
* Rates: per model one hash of GCRA arrival times (requests and tokens) and a cool-down, on
  the server's clock, expiring once it says nothing.
* Breakers: two hashes (state as JSON, next probe time); claiming a probe is one script.
* Limits set by hand (``tracescore judges budget``): one hash, read by the reserve script.
* Parked jobs: the queue's ``parked`` hash (`collector.store.redis.queue`).
* Judge calls settled: added to the deployment's totals (`collector.store.redis.totals`).

Every key is built by `collector.store.redis.keys.RedisKeys` from the deployment's prefix
(scripts are listed in `collector.store.redis.judge_scripts`). `RedisJudgeLedger` is the
`collector.store.judge_interface.JudgeLedger` half of `RedisStore` (a mixin on its
``client`` and ``keys``); `RedisJudgeAdmin` is the same ledger for a command.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from collector.common.judge_types import Breaker, BudgetUse
from collector.store.judge_interface import AMOUNT_TOLERANCE, WINDOW_RETENTION_S
from collector.store.redis import judge_scripts
from collector.store.redis.keys import RedisKeys
from collector.store.redis.totals import add_judge_call

_RETENTION_MS = int(WINDOW_RETENTION_S * 1000)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _uses(spent: dict[Any, Any], live: Sequence[Any], data: dict[Any, Any]) -> list[BudgetUse]:
    """A window's uses from its spend hash, its live reservation ids and their data, ``global``
    first, then by scope.

    Example:
        >>> _uses({b"global": b"0.5"}, [b"r1"], {b"r1": b'[0.25, "global", "model:m"]', b"r0": b'[9, "global"]'})
        [BudgetUse(scope='global', spent=0.5, reserved=0.25), BudgetUse(scope='model:m', spent=0.0, reserved=0.25)]
    """
    uses: dict[str, list[float]] = {_s(scope): [float(value), 0.0] for scope, value in spent.items()}
    for reservation in live:
        amount, *scopes = json.loads(data.get(reservation, b"[0]"))
        for scope in scopes:
            uses.setdefault(scope, [0.0, 0.0])[1] += float(amount)
    return [BudgetUse(scope, s, r) for scope, (s, r) in sorted(uses.items(), key=lambda i: (i[0] != "global", i[0]))]


class RedisJudgeLedger:
    """`JudgeLedger` on a deployment's Redis keys (module docstring); mixed into `RedisStore`."""

    client: aioredis.Redis
    keys: RedisKeys

    @functools.cached_property
    def _judge_scripts(self) -> dict[str, AsyncScript]:
        names = ("RESERVE", "SETTLE_SPEND", "RATE_TAKE", "RATE_ADD", "COOL_DOWN", "CLAIM_PROBE", "CLOSE_BREAKERS",
                 "WAKE_PARKED")
        return {name: self.client.register_script(getattr(judge_scripts, name)) for name in names}

    async def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return await self._judge_scripts[name](keys=keys, args=args)

    def _window_keys(self, window: str) -> list[str]:
        k = self.keys
        return [k.judge_spend(window), k.judge_reservations(window), k.judge_reservation_data(window)]

    async def reserve_judge_spend(self, reservation: str, window: str, limits: Sequence[tuple[str, float]],
                                  amount: float, now: float, ttl_s: float) -> str | None:
        """Reserve ``amount`` against every limit in one script, or return the first scope it would cross."""
        data = json.dumps([float(amount), *[scope for scope, _ in limits]])
        args: list[Any] = [reservation, repr(float(amount)), repr(float(now)), repr(float(now + ttl_s)),
                           _RETENTION_MS, repr(AMOUNT_TOLERANCE), data]
        for scope, limit in limits:
            args += [scope, repr(float(limit))]
        crossed = await self._script("RESERVE", [*self._window_keys(window), self.keys.judge_limits], args)
        return None if crossed is None else _s(crossed)

    async def settle_judge_spend(self, reservation: str, window: str, scopes: Sequence[str], actual: float) -> None:
        """Drop the reservation and add ``actual`` to each scope's spend (completes even if cancelled)."""
        args = [reservation, repr(float(actual)), _RETENTION_MS, *scopes]
        await asyncio.shield(self._script("SETTLE_SPEND", self._window_keys(window), args))

    async def judge_spend(self, window: str, now: float) -> list[BudgetUse]:
        """Every scope's spent and live reserved USD in ``window`` (one transaction's snapshot)."""
        spend, reservations, data = self._window_keys(window)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hgetall(spend)
            pipe.zrangebyscore(reservations, f"({float(now)!r}", "+inf")
            pipe.hgetall(data)
            spent, live, stored = await pipe.execute()
        return _uses(spent, live, stored)

    async def take_judge_rate(self, model: str, rpm: int, tpm: int, tokens: int) -> float:
        """Take one request and ``tokens`` from the model's shared limits, or say how long to wait."""
        wait = await self._script("RATE_TAKE", [self.keys.judge_rate(model)], [int(rpm), int(tpm), int(tokens)])
        return max(0.0, float(wait))

    async def add_judge_tokens(self, model: str, tpm: int, tokens: int) -> None:
        """Charge a call's output tokens to the model's shared token limit."""
        if tpm > 0 and tokens > 0:
            await self._script("RATE_ADD", [self.keys.judge_rate(model)], [int(tpm), int(tokens)])

    async def cool_down_judge(self, model: str, seconds: float) -> None:
        """No request to ``model`` for ``seconds`` on any replica (a longer cool-down is kept)."""
        await self._script("COOL_DOWN", [self.keys.judge_rate(model)], [repr(float(seconds))])

    async def open_judge_breaker(self, breaker: Breaker) -> None:
        """Open (or re-open) a breaker for every replica."""
        state = json.dumps({"model": breaker.model, "reason": breaker.reason, "since": breaker.since,
                            "interval_s": breaker.interval_s})
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.judge_breakers, breaker.key, state)
            pipe.hset(self.keys.judge_probes, breaker.key, repr(float(breaker.next_probe)))
            await pipe.execute()

    async def claim_judge_probe(self, key: str, now: float, hold_s: float) -> bool:
        """Claim the breaker's due probe in one script (pushing the next one to ``now + hold_s``)."""
        args = [key, repr(float(now)), repr(float(now + hold_s))]
        return bool(await self._script("CLAIM_PROBE", [self.keys.judge_probes], args))

    async def close_judge_breakers(self, model: str | None = None, key: str | None = None) -> int:
        """Close the breaker ``key``, or every breaker of ``model`` (neither: all); returns how many."""
        args = [model or "", key or "", "1" if model is not None else "0", "1" if key is not None else "0"]
        return int(await self._script("CLOSE_BREAKERS", [self.keys.judge_breakers, self.keys.judge_probes], args))

    async def judge_breakers(self) -> list[Breaker]:
        """Every open breaker, by key."""
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.keys.judge_breakers)
            pipe.hgetall(self.keys.judge_probes)
            states, probes = await pipe.execute()
        breakers = []
        for key, state in sorted(states.items()):
            s = json.loads(state)
            next_probe = float(probes.get(key, s["since"]))
            breakers.append(Breaker(_s(key), s["model"], s["reason"], float(s["since"]), next_probe,
                                    float(s["interval_s"])))
        return breakers

    async def count_judge_call(self, model: str, *, failed: bool, input_tokens: int, output_tokens: int,
                               cost_usd: float) -> None:
        """Add one settled judge call to the deployment's totals (`collector.store.redis.totals`)."""
        await add_judge_call(self.client, self.keys.totals, model, failed=failed, input_tokens=input_tokens,
                             output_tokens=output_tokens, cost_usd=cost_usd)

    async def set_judge_limit(self, scope: str, usd: float, configured: float) -> None:
        """Set (or, at ``configured``, remove) the limit of ``scope`` for every replica."""
        if float(usd) == float(configured):
            await self.client.hdel(self.keys.judge_limits, scope)
        else:
            await self.client.hset(self.keys.judge_limits, scope, f"{float(usd)!r},{float(configured)!r}")

    async def judge_limits(self) -> dict[str, tuple[float, float]]:
        """The limits set by hand: scope -> (usd, configured)."""
        found: Any = await self.client.hgetall(self.keys.judge_limits)
        return {_s(scope): (float(_s(v).split(",")[0]), float(_s(v).split(",")[1])) for scope, v in found.items()}

    async def wake_parked_jobs(self, reason: str) -> int:
        """Make this key set's jobs parked for ``reason`` due now (one script)."""
        return int(await self._script("WAKE_PARKED", [self.keys.parked, self.keys.delayed], [reason, repr(time.time())]))

    async def parked_jobs(self) -> dict[str, int]:
        """Jobs parked now (from their park until settled otherwise), per reason."""
        return dict(Counter(_s(reason) for reason in await self.client.hvals(self.keys.parked)))


class RedisJudgeAdmin(RedisJudgeLedger):
    """The ledger of a deployment's Redis opened by a command (``tracescore judges``).

    Args:
        client: an asyncio Redis client (closed by `close`).
        keys: the deployment's keys (``queue.key_prefix``).

    Example:
        >>> from collector.store.redis.conn import connect
        >>> admin = RedisJudgeAdmin(connect("redis://127.0.0.1:6379/0"), RedisKeys("doctest-judges:"))
        >>> asyncio.run(admin.close())
    """

    def __init__(self, client: aioredis.Redis, keys: RedisKeys) -> None:
        self.client = client
        self.keys = keys

    async def close(self) -> None:
        """Close the client."""
        await self.client.aclose()
