"""``[judge]`` and ``[judge.budgets]``: what the deployment lets its judges spend (SPEC §8).

Budgets are hard limits in USD per window (``1d``, ``7d``, ``30d`` or ``week``; windows start
at 00:00 UTC: ``1d`` every day, ``week`` every Monday, ``7d`` and ``30d`` every 7 and 30 days
counted from 1970-01-01), globally (``usd``), per scorer (``by_scorer``) and per judge model
(``by_model``). 0 (or absent) is no limit. `BudgetsConfig.window_of` names the window a time
falls in and when it ends.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_MODEL = ConfigDict(extra="forbid", frozen=True)
_DAY = 86400.0
_WINDOW_DAYS = {"1d": 1, "7d": 7, "30d": 30}

Usd = Annotated[float, Field(ge=0)]


class BudgetsConfig(BaseModel):
    """Hard judge budgets (USD per window; 0: none).

    Example:
        >>> b = BudgetsConfig(usd=5.0, by_scorer={"relevance": 1.0})
        >>> b.limits("relevance", "openai/gpt-4o-mini")
        [('global', 5.0), ('scorer:relevance', 1.0)]
        >>> b.enabled, BudgetsConfig().enabled
        (True, False)
    """

    model_config = _MODEL
    usd: Usd = 0.0
    window: Literal["1d", "7d", "30d", "week"] = "1d"
    by_scorer: dict[str, Usd] = Field(default_factory=dict)
    by_model: dict[str, Usd] = Field(default_factory=dict)
    default_output_tokens: int = Field(default=1024, gt=0)  # a call's output cap when it sets none

    @property
    def enabled(self) -> bool:
        """Whether any budget is set."""
        return bool(self.usd or any(self.by_scorer.values()) or any(self.by_model.values()))

    def limits(self, scorer_id: str | None, model: str) -> list[tuple[str, float]]:
        """The ``(scope, limit)`` pairs a call of ``scorer_id`` to ``model`` falls under."""
        found: list[tuple[str, float]] = []
        if self.usd:
            found.append(("global", self.usd))
        if scorer_id is not None and self.by_scorer.get(scorer_id):
            found.append((f"scorer:{scorer_id}", self.by_scorer[scorer_id]))
        if self.by_model.get(model):
            found.append((f"model:{model}", self.by_model[model]))
        return found

    def all_limits(self) -> list[tuple[str, float]]:
        """Every configured ``(scope, limit)``, for status and ``tracescore judges``.

        Example:
            >>> BudgetsConfig(usd=1.0, by_model={"m": 0.5}).all_limits()
            [('global', 1.0), ('model:m', 0.5)]
        """
        found = [("global", self.usd)] if self.usd else []
        found += [(f"scorer:{s}", v) for s, v in sorted(self.by_scorer.items()) if v]
        found += [(f"model:{m}", v) for m, v in sorted(self.by_model.items()) if v]
        return found

    def window_of(self, now: float) -> tuple[str, float]:
        """The name of the window ``now`` (epoch s) falls in, and when it ends (epoch s).

        Example:
            >>> noon = datetime(2026, 12, 5, 12, tzinfo=UTC).timestamp()
            >>> name, ends = BudgetsConfig().window_of(noon)
            >>> name, datetime.fromtimestamp(ends, UTC).isoformat()
            ('1d:2026-12-05', '2026-12-06T00:00:00+00:00')
            >>> BudgetsConfig(window="week").window_of(noon)[0]  # a Saturday: the week began Monday
            'week:2026-11-30'
        """
        day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        if self.window == "week":
            start = day - timedelta(days=day.weekday())
            return f"week:{start.date().isoformat()}", (start + timedelta(days=7)).timestamp()
        days = _WINDOW_DAYS[self.window]
        index = int(day.timestamp() // _DAY) // days
        start_s = index * days * _DAY
        start_day = datetime.fromtimestamp(start_s, UTC).date().isoformat()
        return f"{self.window}:{start_day}", start_s + days * _DAY


class JudgeConfig(BaseModel):
    """How the deployment governs its judges: breakers, parking, unpriced models, budgets.

    Example:
        >>> JudgeConfig().probe_interval_s, JudgeConfig().max_park_s, JudgeConfig().unpriced
        (60.0, 86400.0, 'refuse')
    """

    model_config = _MODEL
    probe_interval_s: float = Field(default=60.0, gt=0)  # an open breaker's first probe; doubles to 3,600 s
    max_park_s: float = Field(default=86400.0, gt=0)  # a job parked longer is dead-lettered
    park_recheck_s: float = Field(default=60.0, gt=0)  # a parked job is tried again at least this often
    unpriced: Literal["refuse", "allow"] = "refuse"  # a model litellm has no price for, under a budget
    budgets: BudgetsConfig = Field(default_factory=BudgetsConfig)


MAX_PROBE_INTERVAL_S = 3600.0
"""An open breaker's probe interval doubles after each failed probe, up to this."""


def now_s() -> float:
    """The time budgets are kept in (epoch s): the wall clock, plus the seconds in the file named
    by ``TRACESCORE_CLOCK_OFFSET_FILE`` when that is set: a test seam that moves a running
    deployment's budget windows forward without waiting a day (the file is read at most once a
    second).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "offset")
        >>> _ = open(path, "w").write("86400")
        >>> os.environ["TRACESCORE_CLOCK_OFFSET_FILE"] = path
        >>> round((now_s() - time.time()) / 3600)
        24
        >>> del os.environ["TRACESCORE_CLOCK_OFFSET_FILE"]
        >>> round(now_s() - time.time())
        0
    """
    import os

    path = os.environ.get("TRACESCORE_CLOCK_OFFSET_FILE")
    now = time.time()
    if not path:
        return now
    kept_path, read_at, offset = _offset
    if path != kept_path or now - read_at >= 1.0:
        try:
            with open(path, encoding="utf-8") as f:
                offset = float(f.read().strip() or 0.0)
        except (OSError, ValueError):
            offset = 0.0
        _offset[:] = [path, now, offset]
    return now + offset


_offset: list[Any] = ["", 0.0, 0.0]  # the offset file last read: its path, when, and its seconds
