"""`SendLoop`: the one loop of every durable sender, parameterised by what it sends.

Forwarding (the forward log), the OTLP score export (the outbox) and each native score sink
(its sink outbox) differ only in where their items wait (a `Backlog` in the store) and how
a batch of them is sent (a `Course`). Everything else is this loop's, the same for all:

* a round takes what is due from the backlog (a lease: what is not settled stays in the
  store), lets the course cut it into requests, sends them (``concurrency`` at a time, in
  order), and settles each item by the backend's answer, read by
  `collector.export.send.answers`: ``SENT`` -> released; ``REFUSE`` -> a request of several
  items is sent again item by item, and each item refused alone is released, counted and
  logged (an ERROR with the backend's message: it is dropped); ``WAIT`` -> kept, until the
  item has waited ``wait_s`` since the first such answer (then released, counted);
  ``RETRY`` and ``HOLD`` -> kept in the store, and the round stops there (the rest is kept
  untried: an outage costs one failed request per round, not one per item, and an ordered
  backlog keeps its order);
* after a round that kept something, the loop waits a backoff (``first_s`` doubling up to
  ``max_s``, with jitter, at least what a ``Retry-After`` asked for); idle, it waits for
  `SendLoop.notify` or ``poll_s``;
* `SendWatch` logs the trouble once as it begins (and when its kind changes), once as it
  ends, and tells ``status`` (`SendLoop.state`);
* ``shutdown`` ends the loop between rounds (a round is never cut in half), sends what is
  due for the time left, and leaves the rest in the store for the next start.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from collector.common.aio import cancel_and_wait, wait_event
from collector.common.metrics import Metrics
from collector.export.send.answers import Answer, Verdict, classify_error
from collector.export.send.watch import SendWatch

I = TypeVar("I")  # noqa: E741 (an item)

OUTCOMES = ("sent", "retried", "rejected", "span_missing", "dropped_span_missing")
"""What `Course.settled` is told happened to items: taken; kept after an outage or a hold;
refused for good; kept, the backend not knowing what they refer to yet; given up after ``wait_s``."""


@dataclass
class Batch(Generic[I]):
    """Items sent in one request, with what the course built for them (None: build it when sent)."""

    items: list[I]
    payload: Any = None


class Backlog(Protocol[I]):
    """Where a sender's items wait, in the store."""

    async def take(self, limit: int, flush: bool) -> Sequence[I]:
        """Lease up to ``limit`` items due now (``flush``: stopping, also those held back a little)."""
        ...

    async def release(self, items: Sequence[I]) -> None:
        """Forget items: sent, or given up."""
        ...

    async def keep(self, items: Sequence[I], delay_s: float, *, waiting: bool = False) -> None:
        """Keep items for another attempt in ``delay_s`` (``waiting``: the backend does not know
        what they refer to yet)."""
        ...

    def attempts(self, item: I) -> int:
        """How often the item was tried before."""
        ...

    def waiting_since(self, item: I) -> float | None:
        """When the backend first did not know what the item refers to (epoch seconds), if ever."""
        ...


class Course(Protocol[I]):
    """What a sender sends, and how."""

    async def open(self) -> None:
        """Open the client."""
        ...

    async def close(self) -> None:
        """Close the client (safe twice)."""
        ...

    async def prepare(self, items: list[I], flush: bool) -> tuple[list[Batch[I]], int]:
        """Cut taken items into requests, in order; the course may settle some itself (held
        back, skipped, unsendable): the second value counts those it released."""
        ...

    async def send(self, batch: Batch[I]) -> Answer:
        """Send one request once; never raises for an HTTP, gRPC or network failure."""
        ...

    async def settled(self, items: list[I], outcome: str, answer: Answer) -> None:
        """Count (and log, or pass on) items settled with one of `OUTCOMES`."""
        ...

    def describe(self, items: list[I]) -> str:
        """The items, for a log line (``2 forwarded traces request(s) (positions 4..5)``)."""
        ...


@dataclass(frozen=True)
class Backoff:
    """Retry delays: ``first_s`` doubling up to ``max_s``, with +-20% jitter.

    Example:
        >>> b = Backoff(0.5, 4.0)
        >>> [b.base(n) for n in (1, 2, 3, 5)]
        [0.5, 1.0, 2.0, 4.0]
    """

    first_s: float
    max_s: float

    def base(self, failures: int) -> float:
        """The delay after ``failures`` failed attempts in a row, before jitter."""
        return min(self.max_s, self.first_s * 2 ** min(max(failures - 1, 0), 30))

    def delay(self, failures: int, at_least: float | None = None) -> float:
        """The jittered delay after ``failures`` failed attempts; no less than ``at_least``
        (a ``Retry-After``), up to ``max_s``."""
        wait = self.base(failures) * random.uniform(0.8, 1.2)
        return max(wait, min(at_least, self.max_s)) if at_least else wait


@dataclass
class _Settling(Generic[I]):
    """One round's answered items, by verdict."""

    by: dict[Verdict, list[tuple[list[I], Answer]]] = field(default_factory=dict)

    def add(self, items: list[I], answer: Answer) -> None:
        if items:
            self.by.setdefault(answer.verdict, []).append((items, answer))

    def kept(self) -> Answer | None:
        """The answer that made the round keep its items (a hold before an outage), if any."""
        return next((a for v in (Verdict.HOLD, Verdict.RETRY) for _, a in self.by.get(v, [])), None)


class SendLoop(Generic[I]):
    """Sends a backlog through a course, durably (see the module docstring).

    Args:
        backlog: where the items wait.
        course: how they are sent.
        watch: the trouble's log lines and ``status`` state.
        metrics: the service's instruments (``tracescore_errors_total{component}``).
        component: names the sender in internal-error counts and the task.
        logger: the sender's logger.
        batch: items taken per round.
        concurrency: requests in flight at once (1: in order).
        backoff: retry delays after a round that kept its items.
        poll_s: how often an idle loop looks at the backlog (`notify` wakes it sooner).
        batch_delay_s: after a round that took less than a batch (or once woken from idle),
            wait this long, so that items arriving meanwhile share the next request.
        wait_s: how long an item answered ``WAIT`` is kept at most (since the first such answer).
        wait_backoff: retry delays of such an item, by its attempts (default: ``backoff``).
    """

    def __init__(
        self, backlog: Backlog[I], course: Course[I], watch: SendWatch, metrics: Metrics, *, component: str,
        logger: logging.Logger, batch: int, concurrency: int = 1, backoff: Backoff, poll_s: float = 0.5,
        batch_delay_s: float = 0.0, wait_s: float = 0.0, wait_backoff: Backoff | None = None,
    ) -> None:
        self.backlog = backlog
        self.course = course
        self.watch = watch
        self._metrics = metrics
        self._component = component
        self._log = logger
        self._batch = batch
        self._concurrency = max(1, concurrency)
        self._backoff = backoff
        self._wait_backoff = wait_backoff or backoff
        self._poll = poll_s
        self._batch_delay = batch_delay_s
        self._wait_s = wait_s
        self._failures = 0
        self._delay = 0.0
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None  # cuts a backoff or batch delay short when stopping
        self._stopping = False

    def notify(self) -> None:
        """Wake an idle loop (items were added)."""
        if self._wake is not None:
            self._wake.set()

    def state(self) -> dict[str, Any]:
        """Where sending stands, for ``status`` (`SendWatch.state`)."""
        return self.watch.state()

    async def start(self) -> None:
        """Open the course's client and start sending (items left by a previous process go first)."""
        await self.course.open()
        self._wake, self._stop = asyncio.Event(), asyncio.Event()
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"tracescore-{self._component}")

    async def shutdown(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (lifecycle contract)
        """Send what is due for up to ``timeout`` seconds, then close; the rest stays in the
        store for the next start. Safe twice, and before `start`."""
        if self._task is not None:
            self._stopping = True  # the loop ends between rounds
            if self._stop is not None:
                self._stop.set()
            self.notify()
            try:
                async with asyncio.timeout(timeout):
                    await self._task
                    while await self.round(flush=True) > 0:
                        pass
            except TimeoutError:
                self._log.warning("%s: not everything was sent within %.1f s; the rest waits in the store and "
                                  "is sent after the restart", self.watch.destination, timeout)
                await cancel_and_wait([self._task])
            self._task = None
        await self.course.close()

    async def _run(self) -> None:
        wake, stop = self._wake or asyncio.Event(), self._stop or asyncio.Event()
        while not self._stopping:
            try:
                done = await self.round()
            except Exception:
                self._metrics.errors.labels(component=self._component).inc()
                self._log.exception("%s: sending failed unexpectedly", self.watch.destination)
                self._failures += 1
                self._delay = self._backoff.delay(self._failures)
                done = -1
            if self._stopping:
                break
            if done < 0:  # kept for later: back off (new items do not cut it short)
                await wait_event(stop, self._delay)
                continue
            if done == 0:
                await wait_event(wake, self._poll)
                wake.clear()
            if done < self._batch and self._batch_delay and not self._stopping:
                await wait_event(stop, self._batch_delay)

    async def round(self, flush: bool = False) -> int:
        """One round (see the module docstring): the items settled (sent, refused, given up,
        or settled by the course), 0 when none was due, -1 when the backend made it keep them."""
        items = list(await self.backlog.take(self._batch, flush))
        if not items:
            return 0
        batches, done = await self.course.prepare(items, flush)
        answered = _Settling[I]()
        for start in range(0, len(batches), self._concurrency):
            chunk = batches[start:start + self._concurrency]
            kept = answered.kept()
            if kept is not None:  # the backend is away: the rest of the round waits too, untried
                answered.add([item for batch in chunk for item in batch.items], kept)
                continue
            answers = await asyncio.gather(*(self._send(batch) for batch in chunk))
            for batch, answer in zip(chunk, answers, strict=True):
                if answer.verdict is Verdict.REFUSE and len(batch.items) > 1:
                    await self._send_alone(batch.items, answered)
                else:
                    answered.add(batch.items, answer)
        done += await self._settle(answered)
        if answered.kept() is not None:
            return -1
        self._failures = 0
        return done

    async def _send(self, batch: Batch[I]) -> Answer:
        try:
            return await self.course.send(batch)
        except Exception as err:  # a bug must not lose the items: they are kept, as in an outage
            self._metrics.errors.labels(component=self._component).inc()
            self._log.exception("%s: sending %s failed", self.watch.destination, self.course.describe(batch.items))
            return classify_error(err)

    async def _send_alone(self, items: list[I], answered: _Settling[I]) -> None:
        """Send a refused request's items one by one, in order, up to the first kept."""
        for n, item in enumerate(items):
            answer = await self._send(Batch([item]))
            if answer.verdict.keeps:
                answered.add(items[n:], answer)
                return
            answered.add([item], answer)

    async def _settle(self, answered: _Settling[I]) -> int:
        """Release, keep or give up answered items; returns how many left the backlog."""
        now = time.time()
        released = [item for items, _ in answered.by.get(Verdict.SENT, []) for item in items]
        for items, answer in answered.by.get(Verdict.REFUSE, []):
            released += items
            self.watch.refused(answer, len(items))
            self._log.error("%s refused %s for good (%s); dropped", self.watch.destination,
                            self.course.describe(items), answer.cause)
        waiting = answered.by.get(Verdict.WAIT, [])
        expired = [(i, a) for items, a in waiting for i in items
                   if (since := self.backlog.waiting_since(i)) is not None and now - since >= self._wait_s]
        gone = {id(i) for i, _ in expired}
        missing = [(i, a) for items, a in waiting for i in items if id(i) not in gone]
        released += [i for i, _ in expired]
        if released:
            await self.backlog.release(released)
        for verdict, outcome in ((Verdict.SENT, "sent"), (Verdict.REFUSE, "rejected")):
            for items, answer in answered.by.get(verdict, []):
                await self.course.settled(items, outcome, answer)
        if expired:
            await self.course.settled([i for i, _ in expired], "dropped_span_missing", expired[0][1])
        if missing:
            delay = self._wait_backoff.delay(max(self.backlog.attempts(i) for i, _ in missing) + 1)
            await self.backlog.keep([i for i, _ in missing], delay, waiting=True)
            await self.course.settled([i for i, _ in missing], "span_missing", missing[0][1])
        kept = answered.kept()
        if kept is not None:
            await self._keep([i for v in (Verdict.HOLD, Verdict.RETRY) for items, _ in answered.by.get(v, [])
                              for i in items], kept)
        elif answered.by.get(Verdict.SENT) and (line := self.watch.recovered()) is not None:
            self._log.warning("%s", line)  # a warning as the trouble's was: whoever saw that one sees this
        return len(released)

    async def _keep(self, items: list[I], answer: Answer) -> None:
        """Keep the items of a round an outage or a hold (``answer``) stopped, for after a
        backoff; log the trouble."""
        self._failures += 1
        self._delay = self._backoff.delay(self._failures, answer.retry_after_s)
        await self.backlog.keep(items, self._delay)
        await self.course.settled(items, "retried", answer)
        line = self.watch.failed(answer, items=len(items))
        if line is not None:
            self._log.warning("%s", line)
        else:
            self._log.debug("%s: %s kept, retried in %.1f s; failed again: %s", self.watch.destination,
                            self.course.describe(items), self._delay, answer.cause)
