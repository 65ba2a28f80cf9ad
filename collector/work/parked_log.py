"""`ParkedLog`: a worker's log of parked jobs, one line per park reason per interval.

A parked job is taken again every ``park_recheck_s`` and parks again while its budget is
spent or its judge's breaker open: a line per park made a log of 41 parked jobs 205 lines in
40 s. Here the first park of a reason is logged at once (WARNING, with its cause: the user
learns that jobs wait, and why); the parks that follow are counted, and one INFO line per
reason and interval sums them up (the jobs, per scorer, and the latest cause), written when
the interval ends (a timer on the loop, armed only while parks are pending). A reason with no
park for a whole interval starts over: its next park is logged at once again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass
class _Pending:
    """The parks of one reason since its last line."""

    jobs: set[str] = field(default_factory=set)
    scorers: Counter[str] = field(default_factory=Counter)
    cause: str = ""
    last_line: float = 0.0


class ParkedLog:
    """Parked jobs, logged once per reason and interval (see the module docstring).

    Args:
        interval_s: at most one line per reason this often (the parks' recheck interval).
        clock: monotonic seconds (a test seam).

    Example:
        >>> lines = []
        >>> now = [0.0]
        >>> log = ParkedLog(60.0, clock=lambda: now[0], emit=lambda level, text: lines.append(text))
        >>> for second in range(0, 125, 5):  # 3 jobs parked again every 5 s for two minutes
        ...     now[0] = float(second)
        ...     for job in ("a", "b", "c"):
        ...         log.note("budget_exhausted", "relevance", job, "the global judge budget would be crossed")
        >>> len(lines), lines[0]
        (3, 'jobs of scorer relevance are parked (budget_exhausted): the global judge budget would be crossed; further parks are summed up once every 60 s')
        >>> lines[1]  # 75 parks in two minutes: the first logged at once, then a line a minute
        '3 jobs parked (budget_exhausted) 35 times in the last 60 s (scorers: relevance 35): the global judge budget would be crossed'
    """

    def __init__(self, interval_s: float, *, clock: Callable[[], float] = time.monotonic,
                 emit: Callable[[int, str], None] | None = None) -> None:
        self._interval = interval_s
        self._clock = clock
        self._emit = emit or (lambda level, text: logger.log(level, "%s", text))
        self._pending: dict[str, _Pending] = {}
        self._timer: asyncio.TimerHandle | None = None

    def note(self, reason: str, scorer: str, job_key: str, cause: str) -> None:
        """A job was parked for ``reason`` (``cause``: the governor's message)."""
        now = self._clock()
        pending = self._pending.get(reason)
        if pending is None or now - pending.last_line >= 2 * self._interval and not pending.jobs:
            self._pending[reason] = _Pending(last_line=now)
            self._emit(logging.WARNING, f"jobs of scorer {scorer} are parked ({reason}): {cause}; further parks "
                                        f"are summed up once every {self._interval:g} s")
            return
        if now - pending.last_line >= self._interval and pending.jobs:
            self._line(reason, pending, now)
        pending.jobs.add(job_key)
        pending.scorers[scorer] += 1
        pending.cause = cause
        self._arm()

    def _line(self, reason: str, pending: _Pending, now: float) -> None:
        """Sum up the parks of ``reason`` since its last line, and start counting anew."""
        scorers = ", ".join(f"{name} {count}" for name, count in pending.scorers.most_common())
        self._emit(logging.INFO, f"{len(pending.jobs)} jobs parked ({reason}) {sum(pending.scorers.values())} times "
                                 f"in the last {self._interval:g} s (scorers: {scorers}): {pending.cause}")
        pending.jobs.clear()
        pending.scorers.clear()
        pending.last_line = now

    def _arm(self) -> None:
        """Write the lines due at the end of the interval, even when no park follows."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a doctest): the next park writes the line
            return
        self._timer = loop.call_later(self._interval, self.flush)

    def flush(self) -> None:
        """Write every reason's line that is due; keep the timer armed while parks are pending."""
        self._timer = None
        now = self._clock()
        for reason, pending in self._pending.items():
            if pending.jobs and now - pending.last_line >= self._interval:
                self._line(reason, pending, now)
        if any(p.jobs for p in self._pending.values()):
            self._arm()

    def close(self) -> None:
        """Stop the timer (the worker stops)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
