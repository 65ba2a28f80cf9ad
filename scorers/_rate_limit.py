"""Requests-per-minute limits for judge calls, per model (SPEC §3 Workers: "optional
requests-per-minute limits").

A token bucket per model and event loop: ``rpm / 60`` tokens a second, holding at most one
second's worth (``ceil(rpm / 60)``, at least 1), so requests are spread over the minute
instead of spent in one burst that a provider enforcing its limit over shorter windows
would refuse. Every HTTP attempt takes a token (a retry is a request to the provider),
before it takes a concurrency slot, so waiting for the rate never holds a slot. Waiters are
served in arrival order. The limit is per process: with N worker processes, give each
1/N of the provider's limit.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping

from scorers._per_loop import PerLoop


class RateLimiter:
    """A token bucket for one model: ``acquire()`` waits until a request may be sent.

    Example:
        >>> async def two() -> float:
        ...     limiter = RateLimiter(6000)  # 100 a second, bursts of 100
        ...     await limiter.acquire(); await limiter.acquire()
        ...     return limiter.tokens
        >>> round(asyncio.run(two()))
        98
    """

    def __init__(self, requests_per_minute: int) -> None:
        if requests_per_minute < 1:
            raise ValueError(f"requests per minute must be positive, not {requests_per_minute!r}")
        self.requests_per_minute = requests_per_minute
        self.rate = requests_per_minute / 60.0
        self.capacity = float(max(1, math.ceil(self.rate)))
        self.tokens = self.capacity
        self._updated: float | None = None
        self._lock = asyncio.Lock()  # FIFO: waiters are served in arrival order

    def _refill(self, now: float) -> None:
        if self._updated is not None:
            self.tokens = min(self.capacity, self.tokens + (now - self._updated) * self.rate)
        self._updated = now

    async def acquire(self) -> float:
        """Take one token, waiting for it if the bucket is empty; returns the seconds waited.

        Example:
            >>> asyncio.run(RateLimiter(60).acquire())
            0.0
        """
        loop = asyncio.get_running_loop()
        async with self._lock:
            start = loop.time()
            self._refill(start)
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return 0.0
            while self.tokens < 1.0:
                await asyncio.sleep((1.0 - self.tokens) / self.rate)
                self._refill(loop.time())
            self.tokens -= 1.0
            return loop.time() - start


_default_rpm: int | None = None
_per_model_rpm: dict[str, int | None] = {}
_limiters: PerLoop[RateLimiter] = PerLoop()


def set_judge_rate_limit(requests_per_minute: int | None, model: str | None = None) -> None:
    """Limit judge requests per minute, for every model (``model=None``) or for one model.

    ``None`` or ``0`` removes the limit (a model-specific ``0`` exempts that model from the
    default). The limit is per process and per model; it applies to requests made after
    the call.

    Example:
        >>> set_judge_rate_limit(500)  # every judge model: at most 500 requests a minute
        >>> set_judge_rate_limit(60, model="openai/gpt-4o")
        >>> get_judge_rate_limit("openai/gpt-4o"), get_judge_rate_limit("openai/gpt-4o-mini")
        (60, 500)
        >>> set_judge_rate_limit(None); set_judge_rate_limit(None, model="openai/gpt-4o")
        >>> get_judge_rate_limit("openai/gpt-4o") is None
        True
    """
    global _default_rpm
    if requests_per_minute is not None and (
        not isinstance(requests_per_minute, int) or isinstance(requests_per_minute, bool)
        or requests_per_minute < 0
    ):
        raise ValueError(f"judge requests per minute must be a non-negative integer or None, "
                         f"not {requests_per_minute!r}")
    limit = requests_per_minute or None
    if model is None:
        _default_rpm = limit
    elif requests_per_minute is None:
        _per_model_rpm.pop(model, None)
    else:
        _per_model_rpm[model] = limit
    _limiters.clear()


def configure_judge_rate_limits(default: int | None, by_model: Mapping[str, int]) -> None:
    """Replace every limit at once: ``default`` for all models, ``by_model`` overrides.

    Example:
        >>> configure_judge_rate_limits(100, {"openai/gpt-4o": 10})
        >>> get_judge_rate_limit("openai/gpt-4o"), get_judge_rate_limit("x/y")
        (10, 100)
        >>> configure_judge_rate_limits(None, {})
    """
    _per_model_rpm.clear()
    set_judge_rate_limit(default)
    for model, rpm in by_model.items():
        set_judge_rate_limit(rpm, model=model)


def get_judge_rate_limit(model: str) -> int | None:
    """The requests-per-minute limit in force for ``model`` (None: unlimited).

    Example:
        >>> get_judge_rate_limit("openai/gpt-4o-mini") is None
        True
    """
    if model in _per_model_rpm:
        return _per_model_rpm[model]
    return _default_rpm


def judge_rate_limiter(model: str) -> RateLimiter | None:
    """The running loop's limiter for ``model``, or None when the model has no limit.

    Example:
        >>> judge_rate_limiter("openai/gpt-4o-mini") is None
        True
    """
    rpm = get_judge_rate_limit(model)
    if rpm is None:
        return None
    return _limiters.get(model, lambda: RateLimiter(rpm))
