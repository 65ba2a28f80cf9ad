"""Judge rates of the SQLite store (SPEC §8): one process serves the whole deployment, so its
requests- and tokens-per-minute limits and cool-downs live in memory.

`LocalRates` keeps one GCRA (generic cell rate algorithm) per model and limit: a theoretical
arrival time (``tat``) that every request (or token) pushes ``60 / limit`` seconds further.
Requests are evenly spaced (one every ``60 / rpm`` s: a limit of 120 a minute is never more
than 2 requests in a second, nor 60 in 30 s); tokens may burst one second's worth of their
limit (at least the request's own). Time is `time.monotonic` (never the budget clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable

_SLACK_S = 1e-9
"""Clock slack allowed when comparing arrival times (float sums of increments)."""


def gcra(tat: float, now: float, per_minute: int, cost: float, *, burst: bool = True) -> tuple[float, float]:
    """One GCRA step for a limit of ``per_minute`` units: the arrival time after taking
    ``cost`` units at ``now``, and the seconds to wait before they may be taken (0.0: now).
    With ``burst`` (tokens) one second's worth of the limit may go at once, or ``cost`` when
    that is more; without (requests) units are evenly spaced, ``60 / per_minute`` s apart.

    Example:
        >>> tat = 0.0
        >>> for _ in range(3):  # 120 tokens a minute, 1 at a time: a burst of 2, then one every 0.5 s
        ...     new, wait = gcra(tat, 0.0, 120, 1)
        ...     tat = new if wait == 0.0 else tat
        ...     print(new, wait)
        0.5 0.0
        1.0 0.0
        1.5 0.5
        >>> gcra(0.0, 0.0, 120, 1, burst=False), gcra(0.5, 0.0, 120, 1, burst=False)  # 120 requests: 0.5 s apart
        ((0.5, 0.0), (1.0, 0.5))
        >>> gcra(0.0, 0.0, 60, 500)  # more than a second's worth: allowed when nothing is owed
        (500.0, 0.0)
    """
    rate = per_minute / 60.0
    burst_s = max(rate, cost) / rate if burst else cost / rate
    new = max(tat, now) + cost / rate
    over = new - now - burst_s
    return new, (over if over > _SLACK_S else 0.0)


class LocalRates:
    """Per-model request and token limits and cool-downs of one process (module docstring).

    Args:
        clock: monotonic seconds (tests may step it).

    Example:
        >>> now = [100.0]
        >>> rates = LocalRates(clock=lambda: now[0])
        >>> [rates.take("m", 120, 0, 0) for _ in range(2)]  # one request every 0.5 s
        [0.0, 0.5]
        >>> rates.cool_down("m", 10.0); now[0] += 1.0
        >>> rates.take("m", 120, 0, 0)
        9.0
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tat: dict[tuple[str, str], float] = {}  # (model, "rpm" | "tpm") -> theoretical arrival
        self._cool: dict[str, float] = {}  # model -> no request before this

    def take(self, model: str, rpm: int, tpm: int, tokens: int) -> float:
        """Take one request and ``tokens`` tokens (limits of 0: none) and return 0.0, or take
        nothing and return the seconds to wait (a limit or a cool-down)."""
        now = self._clock()
        wait = self._cool.get(model, now) - now
        steps: list[tuple[tuple[str, str], float]] = []
        for name, limit, cost in (("rpm", rpm, 1), ("tpm", tpm, tokens)):
            if limit > 0:
                new, late = gcra(self._tat.get((model, name), now), now, limit, cost, burst=name == "tpm")
                wait = max(wait, late)
                steps.append(((model, name), new))
        if wait > 0:
            return wait
        self._tat.update(steps)
        self._cool.pop(model, None)
        return 0.0

    def add_tokens(self, model: str, tpm: int, tokens: int) -> None:
        """Charge ``tokens`` more to the model's token limit (output counted after a call)."""
        if tpm > 0 and tokens > 0:
            now = self._clock()
            self._tat[(model, "tpm")] = max(self._tat.get((model, "tpm"), now), now) + tokens * 60.0 / tpm

    def cool_down(self, model: str, seconds: float) -> None:
        """No request to ``model`` for ``seconds`` (a longer cool-down already set is kept)."""
        until = self._clock() + seconds
        self._cool[model] = max(self._cool.get(model, until), until)
